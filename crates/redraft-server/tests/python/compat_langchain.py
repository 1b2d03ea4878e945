"""LangChain's ChatOpenAI through the redraft proxy, unchanged code: with_structured_output in
each method, bind_tools (a forced function, and a tool the model chooses, round trip), and a
stream; the backend answers each conversation wrongly first.

Usage: compat_langchain.py BASE_URL API_KEY"""

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from compat_common import EXPECTED, PROMPT, Person, args, check, is_expected

base_url, api_key = args()
llm = ChatOpenAI(model="fake/m", base_url=base_url, api_key=api_key, max_retries=0, timeout=60)


def structured(method):
    def run():
        raw = llm.with_structured_output(Person, method=method, include_raw=True).invoke(PROMPT)
        assert is_expected(raw["parsed"]), raw
        redraft = raw["raw"].response_metadata.get("redraft") or raw["raw"].additional_kwargs.get("redraft")
        return f"redraft attempts={redraft['attempts']}" if redraft else "checked"
    return run


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def forced_tool():
    message = llm.bind_tools([Person], tool_choice="Person").invoke(PROMPT)
    assert [c["name"] for c in message.tool_calls] == ["Person"], message
    assert Person(**message.tool_calls[0]["args"]) == EXPECTED, message.tool_calls
    return "arguments valid"


def chosen_tool():
    with_tools = llm.bind_tools([get_weather])
    ask = HumanMessage("What is the weather in Osaka?")
    message = with_tools.invoke([ask])
    assert [c["name"] for c in message.tool_calls] == ["get_weather"], message
    result = get_weather.invoke(message.tool_calls[0])
    final = with_tools.invoke([ask, message, result])
    assert "sunny in Osaka" in final.content, final
    return "round trip"


def streamed():
    text = "".join(chunk.content for chunk in llm.stream("Who is Yuki Tanaka?"))
    assert text.startswith("Sure!"), text
    return f"{len(text)} characters"


for method in ("json_schema", "function_calling", "json_mode"):
    check(f"with_structured_output {method}", structured(method))
check("bind_tools forced", forced_tool)
check("bind_tools chosen", chosen_tool)
check("stream", streamed)
