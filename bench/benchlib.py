"""Shared helpers of the benchmark drivers: paths, the machine, medians, tables."""

import json
import os
import platform
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CORPORA = ROOT.parent / "shared" / "corpora"
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT.parent / "target-bench")
BIN = TARGET / "release"
RESULTS = BENCH / "results"
LOOP = BENCH / "loop"


def spawn_measured(cmd, env=None, cwd=None):
    """Run cmd; return (exit code, stdout, stderr, cpu seconds user+sys, max RSS KiB)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (p.returncode, out.read().decode(), err.read().decode(), ru.ru_utime + ru.ru_stime, ru.ru_maxrss)


def run_json(cmd, **kw):
    """Run a command; its last stdout line is JSON."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout
    return json.loads(out.strip().splitlines()[-1])


def _version(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        return "?"


def machine():
    model = "?"
    mem_kib = 0
    try:
        model = re.search(r"^model name\s*:\s*(.*)$", Path("/proc/cpuinfo").read_text(), re.M).group(1)
        mem_kib = int(re.search(r"^MemTotal:\s*(\d+)", Path("/proc/meminfo").read_text(), re.M).group(1))
    except (OSError, AttributeError):
        pass
    return {
        "nproc": os.cpu_count() and int(_version(["nproc"]) or 0),
        "cpu": model,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "rustc": _version(["rustc", "--version"]),
        "python": _version(["python3", "--version"]),
        "node": _version(["node", "--version"]),
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
    }


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def table(header, rows):
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def write_results(name, data, markdown):
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown + "\n")
    print(markdown)
    print(f"\nwritten: {RESULTS / (name + '.json')} and {RESULTS / (name + '.md')}")
