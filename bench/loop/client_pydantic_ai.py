"""PydanticAI in the loop benchmark: N sequential `agent.run_sync(prompt)` of an Agent with
`output_type=Invoice, retries=2` on an OpenAI-compatible chat model pointed at the fake
server. --mode tool (PydanticAI's default output tool) or prompted (PromptedOutput: JSON in
the text)."""

from pydantic_ai import Agent, PromptedOutput
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from invoice import Invoice, args, measure

base_url, prompt, runs, warmup, mode = args()
mode = mode or "tool"
model = OpenAIChatModel("fake", provider=OpenAIProvider(base_url=base_url, api_key="sk-bench"))
output = {"tool": Invoice, "prompted": PromptedOutput(Invoice)}[mode]
agent = Agent(model, output_type=output, retries=2)


def one_run():
    try:
        agent.run_sync(prompt)
        return 1
    except UnexpectedModelBehavior:
        return 0


measure("pydantic-ai", mode, one_run, runs, warmup)
