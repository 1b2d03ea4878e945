"""The official `openai` client's Responses API through the redraft proxy: create with a JSON
schema, parse into a Pydantic model, a stream, a forced function, plain text, and what is
refused; the backend answers each conversation wrongly first.

Usage: compat_openai_responses.py BASE_URL API_KEY"""

import json

import openai

from compat_common import PROMPT, PROSE_START, Person, args, check, is_expected

base_url, api_key = args()
client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)
SCHEMA = Person.model_json_schema()


def created():
    r = client.responses.create(model="fake/m", input=PROMPT, instructions="You extract people.",
                                text={"format": {"type": "json_schema", "name": "person", "schema": SCHEMA}})
    assert r.status == "completed" and r.object == "response", r
    assert is_expected(Person.model_validate_json(r.output_text)), r.output_text
    assert r.usage.input_tokens > 0 and r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens, r.usage
    return f"redraft attempts={r.model_extra['redraft']['attempts']}"


def parsed():
    r = client.responses.parse(model="fake/m", input=[{"role": "user", "content": PROMPT}], text_format=Person)
    assert is_expected(r.output_parsed), r.output_parsed
    return f"redraft attempts={r.model_extra['redraft']['attempts']}"


def streamed():
    kinds = []
    with client.responses.stream(model="fake/m", input=PROMPT, text_format=Person) as stream:
        for event in stream:
            kinds.append(event.type)
        final = stream.get_final_response()
    assert is_expected(final.output_parsed), final
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    assert "response.output_text.delta" in kinds, kinds
    return f"{len(kinds)} events"


def forced_function():
    tool = {"type": "function", "name": "Person", "parameters": SCHEMA, "strict": False}
    r = client.responses.create(model="fake/m", input=PROMPT, tools=[tool],
                                tool_choice={"type": "function", "name": "Person"})
    calls = [item for item in r.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "Person", r.output
    assert is_expected(Person.model_validate(json.loads(calls[0].arguments))), calls[0].arguments
    return f"redraft attempts={r.model_extra['redraft']['attempts']}"


def plain_text():
    r = client.responses.create(model="fake/m", input="Who is Yuki Tanaka?")
    assert r.output_text.startswith(PROSE_START), r.output_text
    return "passed through"


def refused():
    try:
        client.responses.create(model="fake/m", input="Hi", previous_response_id="resp_1")
    except openai.BadRequestError as e:
        assert "previous_response_id" in e.body["message"], e.body
        return "previous_response_id"
    raise AssertionError("expected openai.BadRequestError")


check("create json_schema", created)
check("parse", parsed)
check("stream", streamed)
check("forced function", forced_function)
check("text", plain_text)
check("refused", refused)
