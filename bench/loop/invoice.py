"""The Pydantic equivalent of schema.json (the demo invoice), and what the clients share."""

import json
import resource
import sys
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Line(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str
    quantity: int = Field(ge=1)
    amount: float


class Invoice(BaseModel):
    model_config = ConfigDict(extra="forbid")
    invoice_id: str = Field(pattern=r"^INV-\d{4}-\d{4}$")
    issued: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    customer: str = Field(min_length=1)
    currency: Literal["USD", "EUR", "GBP"]
    total: float = Field(ge=0)
    lines: list[Line] = Field(min_length=1)


def cpu_and_rss():
    """(user+sys CPU seconds, peak RSS KiB) of this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def args():
    """--base-url URL --prompt FILE --runs N --warmup W [--mode M]"""
    a = sys.argv[1:]
    get = lambda name, default=None: a[a.index(name) + 1] if name in a else default  # noqa: E731
    with open(get("--prompt"), encoding="utf-8") as f:
        prompt = f.read()
    return get("--base-url"), prompt, int(get("--runs", "100")), int(get("--warmup", "0")), get("--mode")


def measure(client, mode, one_run, runs, warmup):
    """Warm-up runs, then `runs` measured runs, sequentially; prints the JSON line."""
    warm_ok = sum(one_run() for _ in range(warmup))
    cpu0, _ = cpu_and_rss()
    t0 = time.perf_counter()
    ok = sum(one_run() for _ in range(runs))
    wall = time.perf_counter() - t0
    cpu1, rss = cpu_and_rss()
    print(json.dumps({"client": client, "mode": mode, "runs": runs, "succeeded": ok, "warmup_runs": warmup,
                      "warmup_succeeded": warm_ok, "loop_cpu_s": cpu1 - cpu0, "loop_wall_s": wall,
                      "process_cpu_s": cpu1, "max_rss_kib": rss}))
