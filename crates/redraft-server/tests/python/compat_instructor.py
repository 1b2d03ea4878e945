"""Instructor through the redraft proxy, every OpenAI mode, unchanged code: the backend answers
each conversation wrongly first (prose, or arguments missing `age`).

Usage: compat_instructor.py BASE_URL API_KEY"""

from typing import Iterable

import instructor
import openai

from compat_common import MESSAGES, Person, args, check, is_expected, who_retried

base_url, api_key = args()


def client(mode):
    return instructor.from_openai(openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0), mode=mode)


def one(mode):
    def run():
        person, completion = client(mode).chat.completions.create_with_completion(
            model="fake/m", response_model=Person, messages=MESSAGES, max_retries=2)
        assert is_expected(person), person
        return who_retried(completion)
    return run


def parallel():
    people = list(client(instructor.Mode.PARALLEL_TOOLS).chat.completions.create(
        model="fake/m", response_model=Iterable[Person], messages=MESSAGES, max_retries=2))
    assert len(people) == 1 and is_expected(people[0]), people
    return "client"


def responses_tools():
    client = instructor.from_openai(openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0),
                                    mode=instructor.Mode.RESPONSES_TOOLS)
    person, response = client.responses.create_with_completion(
        model="fake/m", response_model=Person, input=MESSAGES, max_retries=2)
    assert is_expected(person), person
    return who_retried(response)


for mode in (instructor.Mode.TOOLS, instructor.Mode.TOOLS_STRICT, instructor.Mode.JSON,
             instructor.Mode.JSON_SCHEMA, instructor.Mode.MD_JSON, instructor.Mode.JSON_O1,
             instructor.Mode.FUNCTIONS):
    check(mode.name, one(mode))
check("PARALLEL_TOOLS", parallel)
check("RESPONSES_TOOLS", responses_tools)
