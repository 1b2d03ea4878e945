"""Instructor in the loop benchmark: N sequential runs of
`client.chat.completions.create(response_model=Invoice, max_retries=2)` through the official
`openai` client against the fake server. --mode tools (Instructor's default) or json."""

import instructor
import openai

from invoice import Invoice, args, measure

base_url, prompt, runs, warmup, mode = args()
mode = mode or "tools"
client = instructor.from_openai(openai.OpenAI(base_url=base_url, api_key="sk-bench"),
                                mode={"tools": instructor.Mode.TOOLS, "json": instructor.Mode.JSON}[mode])


def one_run():
    try:
        client.chat.completions.create(model="fake", response_model=Invoice, max_retries=2,
                                       messages=[{"role": "user", "content": prompt}])
        return 1
    except instructor.core.InstructorRetryException:
        return 0


measure("instructor", mode, one_run, runs, warmup)
