"""Loop overhead driver (run by loop-overhead.sh): client-process CPU and peak RSS per attempt
of redraft (library and CLI), Instructor and PydanticAI, each making N runs of
invalid -> wrong -> valid (3 attempts) against one fake OpenAI-compatible server
(bench/src/bin/fake_openai.rs, its own process, no added latency).

Every client is a fresh child process, measured with wait4() (user+sys CPU, ru_maxrss).
The library clients also report the CPU of their measured runs alone (getrusage around the
loop, after W warm-up runs), which leaves out interpreter start, imports and client setup.
The server's counters check every run: 3 requests per run, one at each step.
"""

import json
import os
import subprocess
import sys
import tempfile
import urllib.request

from benchlib import BENCH, BIN, LOOP, median, machine, spawn_measured, table, write_results

N = int(os.environ.get("RUNS", "200"))
W = int(os.environ.get("WARMUP", "20"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
VENV = BENCH / ".venv"


class Server:
    def __init__(self, delay_ms=0):
        self.p = subprocess.Popen([str(BIN / "fake-openai"), "--delay-ms", str(delay_ms)], stdout=subprocess.PIPE,
                                  text=True)
        line = self.p.stdout.readline().split()
        if not line or line[0] != "LISTENING":
            sys.exit("fake-openai did not start")
        self.url = line[1]
        self.root = self.url.removesuffix("/v1")

    def reset(self):
        urllib.request.urlopen(urllib.request.Request(self.root + "/reset", method="POST")).read()

    def stats(self):
        return json.loads(urllib.request.urlopen(self.root + "/stats").read())

    def stop(self):
        self.p.terminate()
        self.p.wait()


def clients(url):
    common = ["--base-url", url, "--prompt", str(LOOP / "prompt.txt"), "--runs", str(N), "--warmup", str(W)]
    lib = [str(BIN / "loop-bench"), "--schema", str(LOOP / "schema.json")] + common
    ins = [str(VENV / "instructor" / "bin" / "python"), str(LOOP / "client_instructor.py")] + common
    pai = [str(VENV / "pydantic-ai" / "bin" / "python"), str(LOOP / "client_pydantic_ai.py")] + common
    return {
        "redraft (library, sequential)": lib,
        "redraft (library, concurrent)": lib + ["--concurrent"],
        "redraft (CLI, one process per run)": "cli",
        "reqwest alone, sequential (HTTP floor)": [str(BIN / "http-floor")] + common,
        "Instructor (TOOLS mode, default)": ins + ["--mode", "tools"],
        "Instructor (JSON mode)": ins + ["--mode", "json"],
        "PydanticAI (tool output, default)": pai + ["--mode", "tool"],
        "PydanticAI (PromptedOutput)": pai + ["--mode", "prompted"],
    }


def run_cli(url, tmp, version_only=False):
    """N sequential `redraft run … --no-store` processes (or N `redraft --version`)."""
    env = {"PATH": os.environ["PATH"], "HOME": tmp, "XDG_CONFIG_HOME": tmp, "OPENAI_BASE_URL": url,
           "OPENAI_API_KEY": "sk-bench"}
    cmd = [str(BIN / "redraft"), "run", "--model", "openai/fake", "--schema", str(LOOP / "schema.json"),
           "--prompt", "@" + str(LOOP / "prompt.txt"), "--max-iterations", "3", "--no-store"]
    if version_only:
        cmd = [str(BIN / "redraft"), "--version"]
    cpu, rss, ok = 0.0, 0, 0
    for _ in range(N):
        code, _, err, c, r = spawn_measured(cmd, env=env, cwd=tmp)
        if code != 0 and not ok:
            print(f"redraft CLI exited {code}: {err[-2000:]}", file=sys.stderr)
        cpu, rss, ok = cpu + c, max(rss, r), ok + (code == 0)
    return {"runs": N, "succeeded": ok, "warmup_runs": 0, "process_cpu_s_measured": cpu, "max_rss_kib_measured": rss}


def main():
    info = machine()
    server = Server()
    samples = {}
    baseline = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cl = clients(server.url)
            names = list(cl)
            for r in range(ROUNDS):
                for name in names[r % len(names):] + names[: r % len(names)]:
                    server.reset()
                    if cl[name] == "cli":
                        res = run_cli(server.url, tmp)
                        cpu, rss = res["process_cpu_s_measured"], res["max_rss_kib_measured"]
                    else:
                        code, out, err, cpu, rss = spawn_measured(cl[name])
                        if code != 0:
                            sys.exit(f"{name} exited {code}:\n{err[-3000:]}")
                        res = json.loads(out.strip().splitlines()[-1])
                    st = server.stats()
                    total_runs = res["runs"] + res["warmup_runs"]
                    problems = []
                    if res["succeeded"] != res["runs"]:
                        problems.append(f"{res['succeeded']}/{res['runs']} runs succeeded")
                    if st["requests"] != 3 * total_runs or st["steps"] != [total_runs] * 3:
                        problems.append(f"server saw {st['requests']} requests, steps {st['steps']}")
                    if problems:
                        sys.exit(f"{name}: not the 3-attempt scenario: {'; '.join(problems)}")
                    samples.setdefault(name, []).append({
                        "process_cpu_s": cpu, "max_rss_kib": rss, "attempts_total": st["requests"],
                        "loop_cpu_s": res.get("loop_cpu_s"), "loop_wall_s": res.get("loop_wall_s"),
                        "loop_attempts": 3 * res["runs"], "messages_hist": st["messages"],
                        "with_tools": st["with_tools"]})
                server.reset()
                b = run_cli(server.url, tmp, version_only=True)
                baseline.append(b["process_cpu_s_measured"] / N)
                print(f"round {r + 1}/{ROUNDS} done", file=sys.stderr)
    finally:
        server.stop()

    summary = {}
    for name, s in samples.items():
        summary[name] = {
            "process_cpu_per_attempt_ms": median([1e3 * x["process_cpu_s"] / x["attempts_total"] for x in s]),
            "loop_cpu_per_attempt_ms": (median([1e3 * x["loop_cpu_s"] / x["loop_attempts"] for x in s])
                                        if s[0]["loop_cpu_s"] is not None else None),
            "peak_rss_mib": median([x["max_rss_kib"] / 1024 for x in s]),
            "loop_wall_per_attempt_ms": (median([1e3 * x["loop_wall_s"] / x["loop_attempts"] for x in s])
                                         if s[0]["loop_wall_s"] is not None else None),
            "messages_per_request": {str(i): n for i, n in enumerate(s[0]["messages_hist"]) if n},
            "tools_offered": s[0]["with_tools"] > 0,
        }
    lib = summary["redraft (library, sequential)"]
    cli = summary["redraft (CLI, one process per run)"]
    start_ms = median(baseline) * 1e3

    fmt = lambda x, d=3: "—" if x is None else f"{x:.{d}f}"  # noqa: E731
    md = [f"N = {N} runs per client (+ {W} warm-up runs for the in-process clients), 3 attempts each; "
          f"{ROUNDS} rounds, client order rotated; medians.", ""]
    rows = []
    for name, x in summary.items():
        loop_ratio = (x["loop_cpu_per_attempt_ms"] / lib["loop_cpu_per_attempt_ms"]
                      if x["loop_cpu_per_attempt_ms"] is not None else None)
        proc_ratio = x["process_cpu_per_attempt_ms"] / lib["process_cpu_per_attempt_ms"]
        rows.append([name, fmt(x["loop_cpu_per_attempt_ms"]), fmt(loop_ratio, 1) + ("×" if loop_ratio else ""),
                     fmt(x["process_cpu_per_attempt_ms"]), f"{proc_ratio:.1f}×", f"{x['peak_rss_mib']:.1f}",
                     fmt(x["loop_wall_per_attempt_ms"])])
    md.append(table(["client", "CPU ms / attempt, measured runs only", "÷ redraft library",
                     "CPU ms / attempt, whole process(es)", "÷ redraft library", "peak RSS MiB",
                     "wall ms / attempt, measured runs"], rows))
    md.append("")
    per_run = 3 * cli["process_cpu_per_attempt_ms"]
    rest = per_run - start_ms - 3 * lib["loop_cpu_per_attempt_ms"]
    md.append(f"redraft CLI: one `redraft run … --no-store` process costs {per_run:.2f} ms CPU for its 3 attempts "
              f"({cli['process_cpu_per_attempt_ms']:.2f} ms per attempt). `redraft --version` alone costs "
              f"{start_ms:.2f} ms per process (process start and exit), and the library does the 3 attempts in "
              f"{3 * lib['loop_cpu_per_attempt_ms']:.2f} ms once warm, so about {rest:.2f} ms per invocation is the "
              "CLI's one-off work in a fresh process beyond process start and the attempts themselves.")
    md.append("")
    targets = []
    base = samples["redraft (library, sequential)"]
    for name in summary:
        if name.startswith(("Instructor", "PydanticAI")):
            x = summary[name]
            lr = x["loop_cpu_per_attempt_ms"] / lib["loop_cpu_per_attempt_ms"]
            pr = x["process_cpu_per_attempt_ms"] / lib["process_cpu_per_attempt_ms"]
            per_round = [(p["loop_cpu_s"] / p["loop_attempts"]) / (b["loop_cpu_s"] / b["loop_attempts"])
                         for p, b in zip(samples[name], base)]
            x["loop_ratio_per_round"] = per_round
            targets.append([name, f"{lr:.1f}×", f"{median(per_round):.1f}× ({min(per_round):.1f}–{max(per_round):.1f})",
                            "met" if lr >= 20 else "not met", f"{pr:.1f}×", "met" if pr >= 20 else "not met"])
    md.append(table(["peer", "CPU / attempt ÷ redraft library (measured runs), of the medians",
                     "per round: median (min–max)", "≥ 20×?", "whole process, of the medians", "≥ 20×?"], targets))
    write_results("loop-overhead", {"machine": info, "runs": N, "warmup": W, "rounds": ROUNDS,
                                    "version_only_cpu_ms": baseline, "summary": summary, "samples": samples},
                  "\n".join(md))


if __name__ == "__main__":
    main()
