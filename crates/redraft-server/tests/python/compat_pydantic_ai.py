"""PydanticAI through the redraft proxy with an OpenAI chat model, unchanged code: the default
tool output, NativeOutput, PromptedOutput, and a function tool the model calls; the backend
answers each conversation wrongly first.

Usage: compat_pydantic_ai.py BASE_URL API_KEY"""

import os

from pydantic_ai import Agent, NativeOutput, PromptedOutput
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from compat_common import PROMPT, Person, args, check, is_expected

base_url, api_key = args()
model = OpenAIChatModel("fake/m", provider=OpenAIProvider(base_url=base_url, api_key=api_key))


def structured(output):
    def run():
        result = Agent(model, output_type=output, retries=2).run_sync(PROMPT)
        assert is_expected(result.output), result.output
        return f"requests={result.usage().requests}"
    return run


def weather_tool():
    agent = Agent(model, retries=2)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    result = agent.run_sync("What is the weather in Osaka?")
    assert "sunny in Osaka" in result.output, result.output
    return "tool called and answered"


def shorthand():
    # `openai:` names OpenAI's Responses API model, configured from the environment.
    os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"] = base_url, api_key
    result = Agent("openai:fake/m", output_type=Person, retries=2).run_sync(PROMPT)
    assert is_expected(result.output), result.output
    return f"requests={result.usage().requests}"


check("default (tool output)", structured(Person))
check("NativeOutput", structured(NativeOutput(Person)))
check("PromptedOutput", structured(PromptedOutput(Person)))
check("function tool", weather_tool)
check("openai: shorthand (Responses API)", shorthand)
