"""The redraft proxy through the official `openai` client.

Usage: proxy_client.py BASE_URL API_KEY

The server's fake upstream answers: (1) wrongly then rightly, (2) rightly (streamed),
(3) wrongly three times, (4) a forced function call with bad arguments then good ones,
(5) two parallel calls of a tool the model may choose, (7) wrongly once, streamed. Prints one line per check; exits non-zero on the first failure.
"""

import json
import sys

import openai
import pydantic

base_url, api_key = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "state": {"type": "string"}},
    "required": ["city", "state"],
    "additionalProperties": False,
}
FORMAT = {"type": "json_schema", "json_schema": {"name": "place", "schema": SCHEMA, "strict": True}}
MESSAGES = [
    {"role": "system", "content": "You extract places."},
    {"role": "user", "content": "Contract C-7 is in Toledo, OH. Where is it?"},
]

# 1. Checked and retried: the first answer misses `state`.
raw = client.chat.completions.with_raw_response.create(model="fake/m", messages=MESSAGES, response_format=FORMAT)
assert raw.status_code == 200, raw.status_code
assert raw.headers.get("x-redraft-attempts") == "2", raw.headers
run_id = raw.headers.get("x-redraft-run-id")
assert run_id, raw.headers
completion = raw.parse()
place = json.loads(completion.choices[0].message.content)
assert place == {"city": "Toledo", "state": "OH"}, place
redraft = completion.model_extra["redraft"]
assert redraft["run_id"] == run_id and redraft["attempts"] == 2, redraft
assert redraft["history"] == ["rejected", "accepted"], redraft
assert completion.usage.prompt_tokens == 200 and completion.usage.completion_tokens == 40, completion.usage
print("checked: ok", json.dumps(place), "attempts=2")

# 2. Streamed: chunks of the accepted answer, then [DONE].
stream = client.chat.completions.create(model="fake/m", messages=MESSAGES, response_format=FORMAT, stream=True)
pieces = []
finish = None
for chunk in stream:
    assert chunk.object == "chat.completion.chunk", chunk
    if chunk.choices:
        pieces.append(chunk.choices[0].delta.content or "")
        finish = chunk.choices[0].finish_reason or finish
streamed = json.loads("".join(pieces))
assert streamed == {"city": "Toledo", "state": "OH"}, streamed
assert finish == "stop", finish
print("streamed: ok", json.dumps(streamed), f"chunks={len(pieces)}")

# 3. Never valid: 422 in OpenAI's error shape.
try:
    client.chat.completions.create(model="fake/m", messages=MESSAGES, response_format=FORMAT)
except openai.UnprocessableEntityError as e:
    assert e.status_code == 422, e.status_code
    assert e.body["code"] == "max_iterations", e.body
    assert e.body["run_id"] == e.response.headers.get("x-redraft-run-id"), e.body
    assert e.response.headers.get("x-redraft-attempts") == "3", e.response.headers
    print("failed: ok", e.body["code"], "attempts=3")
else:
    raise AssertionError("expected openai.UnprocessableEntityError")

# 4. A forced function call, the SDK's strict tool from a Pydantic model: its arguments are
#    checked against the function's parameters and retried.
class Place(pydantic.BaseModel):
    city: str
    state: str


raw = client.chat.completions.with_raw_response.parse(
    model="fake/m",
    messages=MESSAGES,
    tools=[openai.pydantic_function_tool(Place)],
    tool_choice={"type": "function", "function": {"name": "Place"}},
)
assert raw.headers.get("x-redraft-attempts") == "2", raw.headers
message = raw.parse().choices[0].message
assert message.tool_calls[0].function.name == "Place", message
place = message.tool_calls[0].function.parsed_arguments
assert place == Place(city="Toledo", state="OH"), place
print("tool forced: ok", place.model_dump_json(), "attempts=2")

# 5. Tools the model may choose pass through: both parallel calls come back.
weather = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
completion = client.chat.completions.create(model="fake/m", messages=MESSAGES, tools=[weather], tool_choice="auto")
calls = completion.choices[0].message.tool_calls
assert [json.loads(c.function.arguments)["city"] for c in calls] == ["Toledo", "Columbus"], calls
assert completion.choices[0].finish_reason == "tool_calls", completion
print("tools passed through: ok", len(calls), "calls")

# 6. Models: the list, and one model by an id that contains `/` (the client sends it as is).
listed = [m.id for m in client.models.list()]
assert "fake/m" in listed, listed
model = client.models.retrieve("fake/m")
assert (model.id, model.owned_by) == ("fake/m", "fake"), model
try:
    client.models.retrieve("fake/unknown")
except openai.NotFoundError:
    print("models: ok", listed)
else:
    raise AssertionError("expected openai.NotFoundError for an unlisted model")

# 7. Per-request options and parameters: `extra_body={"redraft": ...}` allows one attempt,
#    `seed` and `top_p` reach the backend; streamed, the failed run ends the stream with an
#    error event, which the client raises.
stream = client.chat.completions.create(
    model="fake/m", messages=MESSAGES, response_format=FORMAT, stream=True, seed=7, top_p=0.5,
    extra_body={"redraft": {"max_iterations": 1}})
try:
    for chunk in stream:
        raise AssertionError(f"no chunk of a failed run: {chunk}")
except openai.APIError as e:
    assert e.body["code"] == "max_iterations" and e.body["attempts"] == 1, e.body
    print("stream failed: ok", e.body["code"], "attempts=1")
else:
    raise AssertionError("expected openai.APIError from the stream")

# A parameter the checked answer cannot honour is refused by name.
try:
    client.chat.completions.create(model="fake/m", messages=MESSAGES, response_format=FORMAT, logprobs=True)
except openai.BadRequestError as e:
    assert "`logprobs`" in e.body["message"], e.body
    print("refused by name: ok logprobs")
else:
    raise AssertionError("expected openai.BadRequestError for logprobs")

# A wrong key is refused.
try:
    openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list()
except openai.AuthenticationError:
    print("auth: ok")
else:
    raise AssertionError("expected openai.AuthenticationError")
