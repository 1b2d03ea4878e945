"""What the compatibility scripts share: the task, the answer it must come to, and how a
check reports (one line per mode, `MODE: ok …`; the first failure exits non-zero)."""

import sys
import traceback

import pydantic

PROMPT = "Yuki Tanaka, 27, is a nurse in Osaka. Who is it? Answer as JSON."
MESSAGES = [{"role": "user", "content": PROMPT}]


class Person(pydantic.BaseModel):
    name: str
    age: int


EXPECTED = Person(name="Yuki Tanaka", age=27)
# How the backend's wrong first answer in text begins.
PROSE_START = "Sure!"


def is_expected(person):
    """Whether `person` is Yuki Tanaka, 27 (a library may hand back a subclass of `Person`)."""
    return isinstance(person, pydantic.BaseModel) and person.model_dump() == EXPECTED.model_dump()


def args():
    """BASE_URL API_KEY from the command line."""
    return sys.argv[1], sys.argv[2]


def check(mode, fn):
    """Run `fn` (which returns what to print after `ok`) and report; exit 1 on failure."""
    try:
        said = fn()
    except BaseException:  # noqa: BLE001 — reported, then fatal
        print(f"{mode}: FAILED", flush=True)
        traceback.print_exc()
        sys.exit(1)
    print(f"{mode}: ok {said}", flush=True)


def who_retried(completion):
    """`redraft attempts=N` when the proxy checked the answer, else `client`."""
    extra = getattr(completion, "model_extra", None) or {}
    run = extra.get("redraft")
    return f"redraft attempts={run['attempts']}" if run else "client"
