"""Extraction benchmark driver (run by extraction.sh): agreement with the jsonextract corpora
and throughput of redraft_extract::extract vs Python json_repair and npm jsonrepair.

Agreement: every tool's result per case is written as JSON lines and scored by the same
scorer (`extract-bench score`, the rules of crates/redraft-extract/tests/corpus.rs).
Throughput: ROUNDS rounds; in each, every tool is run as a fresh process on every file (tool
order rotated per round) and times whole-file passes for MIN_SECS after a 0.5 s warm-up,
in-process, only the repair calls inside the timed loop. Medians over rounds.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import BENCH, BIN, CORPORA, median, machine, run_json, table, write_results

ROUNDS = int(os.environ.get("ROUNDS", "7"))
MIN_SECS = os.environ.get("MIN_SECS", "1.0")
PY = str(BENCH / ".venv" / "extract" / "bin" / "python")
EX = str(BIN / "extract-bench")
FILES = {"json_repair_py": "json_repair", "jsonrepair_ts": "jsonrepair"}  # file -> its own peer
TOOLS = ["redraft", "json_repair", "jsonrepair"]


def corpus(f):
    return str(CORPORA / "jsonextract" / f"{f}.jsonl")


def time_cmd(tool, f):
    return {
        "redraft": [EX, "time", corpus(f), MIN_SECS],
        "json_repair": [PY, str(BENCH / "extraction" / "peer_json_repair.py"), "time", corpus(f), MIN_SECS],
        "jsonrepair": ["node", str(BENCH / "extraction" / "peer_jsonrepair.mjs"), "time", corpus(f), MIN_SECS],
    }[tool]


def agreement(tmp):
    scores = {}
    for f in FILES:
        outs = {t: str(Path(tmp) / f"{t}-{f}.jsonl") for t in TOOLS + ["json_repair_empty_as_value"]}
        with open(outs["redraft"], "w") as fh:
            subprocess.run([EX, "outputs", corpus(f)], check=True, stdout=fh)
        run = subprocess.run
        run([PY, str(BENCH / "extraction" / "peer_json_repair.py"), "outputs", corpus(f), outs["json_repair"],
             outs["json_repair_empty_as_value"]], check=True)
        run(["node", str(BENCH / "extraction" / "peer_jsonrepair.mjs"), "outputs", corpus(f), outs["jsonrepair"]],
            check=True)
        scores[f] = {t: run_json([EX, "score", corpus(f), path]) for t, path in outs.items()}
    return scores


def pct(a, b):
    return 100.0 * a / b if b else float("nan")


def main():
    info = machine()
    with tempfile.TemporaryDirectory() as tmp:
        scores = agreement(tmp)
    samples = {f: {t: [] for t in TOOLS} for f in FILES}
    for r in range(ROUNDS):
        order = TOOLS[r % 3:] + TOOLS[: r % 3]
        for f in FILES:
            for t in order:
                samples[f][t].append(run_json(time_cmd(t, f)))
        print(f"round {r + 1}/{ROUNDS} done", file=sys.stderr)

    thr = {}
    for f in FILES:
        thr[f] = {}
        for t in TOOLS:
            s = samples[f][t]
            mbs = [x["bytes"] * x["reps"] / x["secs"] / 1e6 for x in s]
            cps = [x["cases"] * x["reps"] / x["secs"] for x in s]
            thr[f][t] = {"mb_s": median(mbs), "cases_s": median(cps), "mb_s_samples": mbs,
                         "bytes": s[0]["bytes"], "cases": s[0]["cases"]}
        for peer in ["json_repair", "jsonrepair"]:
            per_round = [a / b for a, b in zip(thr[f]["redraft"]["mb_s_samples"], thr[f][peer]["mb_s_samples"])]
            thr[f][f"ratio_vs_{peer}"] = {"of_medians": thr[f]["redraft"]["mb_s"] / thr[f][peer]["mb_s"],
                                          "median_per_round": median(per_round),
                                          "min": min(per_round), "max": max(per_round)}

    # --- markdown
    md = [f"Rounds: {ROUNDS}; each sample ≥ {MIN_SECS} s of whole-file passes after 0.5 s of warm-up.", ""]
    md.append("**Agreement** (equal value, or a failure where `expect_failure`):")
    md.append("")
    rows, targets = [], []
    for f, own in FILES.items():
        for t in TOOLS:
            s = scores[f][t]
            rows.append([f"`{f}.jsonl`", t + (" (own file)" if t == own else ""),
                         f"{s['agree']}/{s['cases']} ({pct(s['agree'], s['cases']):.1f}%)",
                         f"{s['nonfail_agree']}/{s['nonfail_cases']} ({pct(s['nonfail_agree'], s['nonfail_cases']):.1f}%)",
                         f"{s['fail_agree']}/{s['fail_cases']}", s["tool_failures"]])
        r, p = scores[f]["redraft"], scores[f][own]
        rp, pp = pct(r["nonfail_agree"], r["nonfail_cases"]), pct(p["nonfail_agree"], p["nonfail_cases"])
        targets.append([f"`{f}.jsonl`", f"redraft {rp:.1f}% ≥ {own} {pp:.1f}% − 2 pp = {pp - 2:.1f}%",
                        "met" if rp >= pp - 2 else f"not met ({rp - (pp - 2):+.1f} pp)"])
    md.append(table(["file", "tool", "all cases", "non-failure cases", "expect_failure cases", "tool failed"], rows))
    md.append("")
    alt = {f: scores[f]["json_repair_empty_as_value"] for f in FILES}
    md.append("json_repair with its \"\" result counted as the value `\"\"` instead of a failure: " + "; ".join(
        f"`{f}` {a['agree']}/{a['cases']} all, {a['nonfail_agree']}/{a['nonfail_cases']} non-failure" for f, a in alt.items()) + ".")
    md.append("")
    md.append(table(["file", "agreement target (non-failure cases)", "result"], targets))
    md.append("")
    md.append(f"**Throughput** (median of {ROUNDS} samples; input MB = 10^6 bytes of UTF-8):")
    md.append("")
    rows = []
    for f in FILES:
        for t in TOOLS:
            x = thr[f][t]
            rows.append([f"`{f}.jsonl` ({x['cases']} cases, {x['bytes']} B)", t, f"{x['mb_s']:.2f}", f"{x['cases_s']:,.0f}"])
    md.append(table(["file", "tool", "MB/s", "cases/s"], rows))
    md.append("")
    rows, ttargets = [], []
    for f in FILES:
        for peer in ["json_repair", "jsonrepair"]:
            q = thr[f][f"ratio_vs_{peer}"]
            rows.append([f"`{f}.jsonl`", f"redraft / {peer}", f"{q['of_medians']:.1f}×",
                         f"{q['median_per_round']:.1f}× ({q['min']:.1f}–{q['max']:.1f})"])
        q = thr[f]["ratio_vs_json_repair"]["of_medians"]
        ttargets.append([f"`{f}.jsonl`", f"{q:.1f}× ≥ 50×", "met" if q >= 50 else "not met"])
    md.append(table(["file", "ratio (MB/s and cases/s alike)", "of the medians", "per round: median (min–max)"], rows))
    md.append("")
    md.append(table(["file", "throughput target: redraft ≥ 50× json_repair", "result"], ttargets))
    write_results("extraction", {"machine": info, "rounds": ROUNDS, "min_secs": float(MIN_SECS),
                                 "agreement": scores, "throughput": thr}, "\n".join(md))


if __name__ == "__main__":
    main()
