"""Scale driver (run by loop-scale.sh): RUNS (10,000) concurrent runs of invalid -> wrong ->
valid in one redraft process (`loop-bench --concurrent`: one Runner, every run a tokio task
on one multi-threaded runtime, one reqwest client), against the fake server adding DELAY_MS
(500) to every reply. ROUNDS (5) repetitions; medians. Every repetition must lose nothing:
RUNS results, 3*RUNS attempts, every run succeeded, 3*RUNS requests at the server.
Each round also runs `http-floor` (reqwest alone, the same tasks and requests) for the
transport's share of CPU and memory."""

import json
import os
import resource
import sys

from benchlib import BIN, median, machine, table, write_results
from loop_overhead import LOOP, Server, spawn_measured

N = int(os.environ.get("RUNS", "10000"))
DELAY_MS = int(os.environ.get("DELAY_MS", "500"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
GIB = 1024 * 1024  # KiB


def main():
    info = machine()
    info["open_files_limit"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    server = Server(DELAY_MS)
    common = ["--base-url", server.url, "--prompt", str(LOOP / "prompt.txt"), "--runs", str(N)]
    clients = {
        "redraft": [str(BIN / "loop-bench"), "--schema", str(LOOP / "schema.json"), "--concurrent"] + common,
        "reqwest alone (HTTP floor)": [str(BIN / "http-floor"), "--concurrent"] + common,
    }
    rounds = {name: [] for name in clients}
    try:
        for r in range(ROUNDS):
            for name, cmd in clients.items():
                server.reset()
                code, out, err, cpu, rss = spawn_measured(cmd)
                if code != 0:
                    sys.exit(f"{name} exited {code}:\n{err[-3000:]}")
                res = json.loads(out.strip().splitlines()[-1])
                st = server.stats()
                ok = (res["runs"] == N and res["succeeded"] == N and res["attempts"] == 3 * N
                      and res["errors"] == 0 and st["requests"] == 3 * N and st["steps"] == [N, N, N])
                rounds[name].append({
                    "wall_s": res["loop_wall_s"], "process_cpu_s": cpu, "max_rss_kib": rss, "results": res["runs"],
                    "succeeded": res["succeeded"], "attempts": res["attempts"], "errors": res["errors"],
                    "sequences": res["sequences"], "server_requests": st["requests"],
                    "server_max_in_flight": st["max_in_flight"], "nothing_lost": ok})
                print(f"round {r + 1}/{ROUNDS} {name}: {res['loop_wall_s']:.2f} s, {rss / 1024:.0f} MiB, "
                      f"{res['succeeded']}/{N} succeeded, {res['attempts']} attempts, {st['requests']} requests",
                      file=sys.stderr)
    finally:
        server.stop()

    floor = 3 * DELAY_MS / 1000
    md = [f"{N:,} concurrent runs × 3 attempts, {DELAY_MS} ms per reply (floor: {floor:.1f} s), "
          f"{ROUNDS} rounds; open-files limit {info['open_files_limit']}.", ""]
    rows, med = [], {}
    for name, rs in rounds.items():
        med[name] = {k: median([x[k] for x in rs]) for k in ("wall_s", "process_cpu_s", "max_rss_kib")}
        for i, x in enumerate(rs):
            rows.append([name, i + 1, f"{x['wall_s']:.2f}", f"{x['process_cpu_s']:.2f}", f"{x['max_rss_kib'] / 1024:.0f}",
                         f"{x['succeeded']:,}/{x['results']:,}", f"{x['attempts']:,}", f"{x['server_requests']:,}",
                         f"{x['server_max_in_flight']:,}", "yes" if x["nothing_lost"] else "NO"])
        m = med[name]
        rows.append([f"**{name}**", "median", f"**{m['wall_s']:.2f}**", f"**{m['process_cpu_s']:.2f}**",
                     f"**{m['max_rss_kib'] / 1024:.0f}**", "", "", "", "", ""])
    md.append(table(["client", "round", "completion s", "client CPU s", "peak RSS MiB", "succeeded", "attempts",
                     "server requests", "max in flight at server", "nothing lost"], rows))
    md.append("")
    red, flo = rounds["redraft"], med["reqwest alone (HTTP floor)"]
    rss_max = max(x["max_rss_kib"] for x in red)
    lost = all(x["nothing_lost"] for x in red)
    md.append(table(["target (redraft)", "result"], [
        ["peak RSS < 1 GiB", f"{rss_max / 1024:.0f} MiB in the worst round: " + ("met" if rss_max < GIB else "not met")],
        [f"nothing lost ({N:,} results, {3 * N:,} attempts, every run succeeded)",
         "met in every round" if lost else "NOT met (see rounds)"],
    ]))
    md.append("")
    m = med["redraft"]
    md.append(f"redraft: completion {m['wall_s']:.2f} s (median) against the {floor:.1f} s floor; client CPU "
              f"{m['process_cpu_s']:.2f} s = {1e3 * m['process_cpu_s'] / (3 * N):.3f} ms per attempt. Of its "
              f"{m['max_rss_kib'] / 1024:.0f} MiB, {flo['max_rss_kib'] / 1024:.0f} MiB is what reqwest alone holds "
              f"for the same {N:,} tasks and connections; the rest, "
              f"{(m['max_rss_kib'] - flo['max_rss_kib']) / N:.0f} KiB per run, is redraft's.")
    write_results("loop-scale", {"machine": info, "runs": N, "delay_ms": DELAY_MS, "rounds": rounds},
                  "\n".join(md))

if __name__ == "__main__":
    main()
