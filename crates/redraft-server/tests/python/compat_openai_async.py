"""50 concurrent checked requests from the official `AsyncOpenAI` client, more than the
server's run slots: they wait in the queue, none is refused, each comes back valid; the
backend answers each conversation wrongly first.

Usage: compat_openai_async.py BASE_URL API_KEY"""

import asyncio

import openai

from compat_common import MESSAGES, Person, args, check, is_expected

base_url, api_key = args()
N = 50


async def burst():
    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=120)
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": Person.model_json_schema()}}

    async def one():
        r = await client.chat.completions.create(model="fake/m", messages=MESSAGES, response_format=fmt)
        assert is_expected(Person.model_validate_json(r.choices[0].message.content)), r
        return r.model_extra["redraft"]["attempts"]

    attempts = await asyncio.gather(*(one() for _ in range(N)))
    await client.close()
    assert attempts == [2] * N, attempts
    return f"{N} valid, 2 attempts each"


check("async x50", lambda: asyncio.run(burst()))
