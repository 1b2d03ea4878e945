"""Python json_repair's side of the extraction benchmark (run by ../extraction.py).

    python peer_json_repair.py outputs CORPUS.jsonl OUT_STRICT OUT_EMPTY_AS_VALUE
    python peer_json_repair.py time CORPUS.jsonl [MIN_SECS]

Each case is `repair_json(input, return_objects=True)`. json_repair signals "nothing to
repair" by returning "" rather than raising, so a "" result counts as a failure
(OUT_STRICT); OUT_EMPTY_AS_VALUE counts it as the string "" instead, for the footnote.
An exception also counts as a failure.
"""

import json
import sys
import time

from json_repair import repair_json


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def outputs(corpus, out_strict, out_value):
    with open(out_strict, "w", encoding="utf-8") as strict, open(out_value, "w", encoding="utf-8") as value:
        for case in load(corpus):
            try:
                got = repair_json(case["input"], return_objects=True)
                text = json.dumps(got, ensure_ascii=False)
            except Exception:  # noqa: BLE001 - any exception is the tool failing
                got, text = None, None
            if text is None:
                strict.write('{"ok": false}\n')
                value.write('{"ok": false}\n')
            else:
                line = json.dumps({"ok": True, "json": text}) + "\n"
                strict.write('{"ok": false}\n' if got == "" else line)
                value.write(line)


def one_pass(inputs):
    for s in inputs:
        try:
            repair_json(s, return_objects=True)
        except Exception:  # noqa: BLE001
            pass


def timed(corpus, min_secs):
    """Warm up for 0.5 s, then whole-file passes until min_secs have passed."""
    inputs = [c["input"] for c in load(corpus)]
    nbytes = sum(len(s.encode("utf-8")) for s in inputs)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.5:
        one_pass(inputs)
    reps, t0 = 0, time.perf_counter()
    while reps == 0 or time.perf_counter() - t0 < min_secs:
        one_pass(inputs)
        reps += 1
    secs = time.perf_counter() - t0
    print(json.dumps({"cases": len(inputs), "bytes": nbytes, "reps": reps, "secs": secs}))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "outputs":
        outputs(*sys.argv[2:5])
    elif mode == "time":
        timed(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 1.0)
    else:
        sys.exit("usage: peer_json_repair.py outputs CORPUS OUT_STRICT OUT_VALUE | time CORPUS [MIN_SECS]")
