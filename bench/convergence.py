"""Convergence driver (run by convergence.sh): does a loop turn a small local model's answers
into schema-valid JSON, and how correct is it? On DeepJSONEval extraction tasks, against one
OpenAI-compatible server (bench/local-model.sh: SmolLM2-135M-Instruct under llama-server):

  one-call    one request, no loop: the base prompt + the task's schema, the JSON taken from
              the answer's ```json fence (or the whole answer) with json.loads
  instructor  Instructor, Mode.JSON, max_retries=2 (3 calls at most), a Pydantic model built
              from the task's schema (strict, so it accepts what the schema accepts)
  redraft-*   the redraft CLI, --schema TASK_SCHEMA --max-iterations 3, one process per task,
              with the variant's flags (see VARIANTS)

All with temperature 0, the same max_tokens and the same base prompt: the dataset's meta
prompt filled with the task's text. Every answer is judged the same way here: the JSON value
a system ends up with after call k, validated with Python jsonschema against the task's
schema (valid@k), and compared leaf by leaf with the gold `expected` (field accuracy).

Environment: BASE_URL (the server's …/v1), N (tasks), MAX_TOKENS, SYSTEMS (comma-separated,
default all), OUT (results name), REDRAFT (the CLI binary), BENCH_REDRAFT_BEFORE (another build of
the CLI to compare, e.g. the commit before a change), BENCH_VARIANTS (more variants:
`name=[@BINARY] flags…|config lines;…`), MERGE=1 (keep the systems already in the results
file and run only SYSTEMS), RESUMMARIZE=1 (only recompute the tables from the results file).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Literal, Optional

import jsonschema

from benchlib import BENCH, BIN, CORPORA, RESULTS, machine, table, write_results

BASE_URL = os.environ["BASE_URL"]
MAX_TOKENS = int(os.environ.get("MAX_TOKENS", "512"))
# TASKS: `deepjsoneval` (../shared/corpora/tasks, the English rows) or `people` (bench/tasks:
# 30 flat person extractions, written by tasks/make_people.py).
# TASKS=staffing: the contracts of examples/staffing (contexts/*.json), each to be filled with
# roster workers through `--kind fill`, with the kind's hints and without them.
# TASKS=flat: the people and the 10 order lines of bench/tasks/orders.jsonl (prices written
# "€77.08", "1,246.73 US dollars"; paid in words), 40 flat extractions.
# TASKS=people-kind: the people through the person kind (examples/person: every value must be
# written in the sentence, given as the context), with the kind's hints and without them, and
# without constrained decoding.
TASK_SET = os.environ.get("TASKS", "deepjsoneval")
if TASK_SET not in ("deepjsoneval", "people", "flat", "staffing", "people-kind"):
    sys.exit("bench: TASKS is deepjsoneval, people, flat, staffing or people-kind")
N = int(os.environ.get("N", "40" if TASK_SET == "flat" else "30"))
OUT = os.environ.get("OUT", "convergence" if TASK_SET == "deepjsoneval" else f"convergence-{TASK_SET}")
REDRAFT = os.environ.get("REDRAFT", str(BIN / "redraft"))
MODEL = "smollm2-135m"
TASKS = {"deepjsoneval": [CORPORA / "tasks" / "deepjsoneval-dev.jsonl"], "people": [BENCH / "tasks" / "people.jsonl"],
         "people-kind": [BENCH / "tasks" / "people.jsonl"],
         "flat": [BENCH / "tasks" / "people.jsonl", BENCH / "tasks" / "orders.jsonl"]}.get(TASK_SET, [])
META = (CORPORA / "tasks" / "deepjsoneval_meta_prompt.txt").read_text().strip()
STAFFING = BENCH.parent / "examples" / "staffing"
PERSON = BENCH.parent / "examples" / "person"

# redraft variants: extra CLI flags and config lines. "redraft" is redraft as built, with its
# defaults; "redraft+example" shows the model an example instead of the JSON Schema;
# "redraft-strict" checks answers as extracted (no coercion); "redraft+constrained" sends the
# schema as response_format (llama-server turns it into a grammar).
VARIANTS = {
    "redraft": ([], ""),
    "redraft+example": (["--prompt-style", "example"], ""),
    "redraft-strict": (["--strict"], ""),
    "redraft+constrained": (["--constrained"], ""),
} if TASK_SET not in ("staffing", "people-kind") else {
    "redraft": ([], ""),
    "redraft-no-hints": (["--no-hints"], ""),
    "redraft-no-constrained": (["--no-constrained"], ""),
    "redraft-strict": (["--strict"], ""),
}
if os.environ.get("BENCH_REDRAFT_BEFORE"):  # another build of the CLI, e.g. before a change
    VARIANTS = {"redraft-before": (["@" + os.environ["BENCH_REDRAFT_BEFORE"]], ""),
                "redraft-before+example": (["@" + os.environ["BENCH_REDRAFT_BEFORE"], "--prompt-style", "example"], ""),
                **VARIANTS}
for spec in filter(None, os.environ.get("BENCH_VARIANTS", "").split(";")):
    # name=[@BINARY] flag flag…|config line\nconfig line
    name, _, rest = spec.partition("=")
    flags, _, config = rest.partition("|")
    VARIANTS[name.strip()] = (flags.split(), config.replace("\\n", "\n"))


def staffing_tasks():
    """One task per contract: fill it from the roster (which the model has not seen)."""
    import csv
    roster = list(csv.DictReader((STAFFING / "tables" / "workers.csv").open()))
    tasks = []
    for path in sorted((STAFFING / "contexts").glob("*.json")):
        c = json.loads(path.read_text())
        tasks.append({"id": path.stem, "depth": 1, "context": c, "roster": roster, "schema": None, "expected": None,
                      "text": (f"Staff contract {c['contract_id']}: {c['target_count']} {c['role']} worker(s) in "
                               f"{c['city']}, {c['state']}, starting {c['start_date']}. Answer with the fill.")})
    return tasks


def staffing_ok(task, value):
    """The fill rules, checked here against the roster itself: known workers whose city, state
    and role match the contract, exactly target_count of them, nobody twice."""
    if not isinstance(value, dict) or not isinstance(value.get("fills"), list):
        return False
    ids = [f.get("worker_id") if isinstance(f, dict) else None for f in value["fills"]]
    rows = {r["id"]: r for r in task["roster"]}
    c = task["context"]
    return (len(ids) == c["target_count"] and len(set(ids)) == len(ids)
            and all(i in rows and rows[i]["city"] == c["city"] and rows[i]["state"] == c["state"]
                    and rows[i]["role"] == c["role"] for i in ids))


def person_ok(task, value):
    """The person kind's rules, checked here: schema-valid, the name, the age and the city written
    in the sentence, the city not part of the name, the occupation one it names (or `other`)."""
    text = task["text"]
    if not jsonschema.validators.validator_for(task["schema"])(task["schema"]).is_valid(value):
        return False
    occupation = value["occupation"]
    return (value["name"] in text and str(value["age"]) in text and value["city"] in text
            and value["city"] not in value["name"] and (occupation == "other" or occupation in text))


def kinds_without_hints(dest, pack=STAFFING):
    """A copy of a pack's kinds with every rule's `[rules.hint]` table removed."""
    import shutil
    shutil.copytree(pack, dest, dirs_exist_ok=True)
    for toml in (dest / "kinds").glob("*/kind.toml"):
        out, skipping = [], False
        for line in toml.read_text().splitlines():
            if line.strip() == "[rules.hint]":
                skipping = True
                continue
            if skipping and line.startswith("["):
                skipping = False
            if not skipping:
                out.append(line)
        toml.write_text("\n".join(out) + "\n")
    return dest / "kinds"


def select_tasks():
    """English tasks, shortest first (text + schema characters, ties by id): the first N.
    Short prompts leave room in the context for three attempts and their feedback."""
    if TASK_SET == "staffing":
        return staffing_tasks()[:N]
    rows = [json.loads(line) for path in TASKS for line in path.read_text().splitlines() if line.strip()]
    en = [r for r in rows if r["language"] == "en"]
    en.sort(key=lambda r: (len(r["text"]) + len(json.dumps(r["schema"])), r["id"]))
    return en[:N]


def base_prompt(task):
    """The dataset's meta prompt filled with the text; each system shows the schema its way."""
    return f"{META}\n\n*** Text Description\n{task['text'].strip()}"


def one_call_prompt(task):
    schema = json.dumps(task["schema"], indent=2, ensure_ascii=False)
    return f"{META}\n\n*** JSON Schema\n```json\n{schema}\n```\n\n*** Text Description\n{task['text'].strip()}"


# ---------------------------------------------------------------- judging


def judge(schema, value, task=None):
    """Schema-valid (the staffing tasks: the fill rules pass)? (None = no JSON value at all.)"""
    if value is None:
        return False
    if task is not None and TASK_SET == "staffing":
        return staffing_ok(task, value)
    if task is not None and TASK_SET == "people-kind":
        return person_ok(task, value)
    return jsonschema.validators.validator_for(schema)(schema).is_valid(value)


def schema_errors(schema, value):
    """How far from valid: the number of errors jsonschema reports."""
    if schema is None:
        return 0
    return sum(1 for _ in jsonschema.validators.validator_for(schema)(schema).iter_errors(value))


def leaves(value, path=()):
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from leaves(v, path + (k,))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from leaves(v, path + (i,))
    else:
        yield path, value


_MISSING = object()


def at(value, path):
    for p in path:
        if isinstance(p, str) and isinstance(value, dict) and p in value:
            value = value[p]
        elif isinstance(p, int) and isinstance(value, list) and p < len(value):
            value = value[p]
        else:
            return _MISSING
    return value


def same(gold, got):
    if isinstance(gold, str) and isinstance(got, str):
        return gold.strip().casefold() == got.strip().casefold()
    num = (int, float)
    if isinstance(gold, num) and isinstance(got, num) and not isinstance(gold, bool) and not isinstance(got, bool):
        return float(gold) == float(got)
    return type(gold) is type(got) and gold == got


def field_accuracy(expected, value):
    """Share of the leaf values of `expected` (objects by key, arrays by index; an empty object or
    array is one leaf) found equal at the same path in `value`. (The staffing tasks have no gold
    values: any fill that passes the rules is right.)"""
    if expected is None:
        return 0.0
    gold = list(leaves(expected))
    if not gold:
        return 1.0
    return sum(1 for p, g in gold if (v := at(value, p)) is not _MISSING and same(g, v)) / len(gold)


# ---------------------------------------------------------------- systems


def chat(messages, **extra):
    body = {"model": MODEL, "messages": messages, "temperature": 0, "max_tokens": MAX_TOKENS, **extra}
    req = urllib.request.Request(BASE_URL + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as r:
        return json.loads(r.read())


def strict_parse(text):
    """What a caller without redraft does: the ```json fence if there is one, else the text."""
    t = text.strip()
    if "```" in t:
        after = t.split("```", 1)[1]
        if after.startswith("json"):
            after = after[4:]
        t = after.split("```", 1)[0]
    try:
        return json.loads(t)
    except ValueError:
        return None


def redraft_extract(text):
    """redraft's own extraction (`redraft extract`) of the same text, for comparison."""
    p = subprocess.run([REDRAFT, "extract", "-"], input=text, capture_output=True, text=True)
    return json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else None


def run_one_call(task):
    r = chat([{"role": "user", "content": one_call_prompt(task)}])
    text = r["choices"][0]["message"]["content"] or ""
    u = r.get("usage", {})
    value = strict_parse(text)
    return {
        "attempts": [{"value": value, "tokens_in": u.get("prompt_tokens", 0), "tokens_out": u.get("completion_tokens", 0),
                      "finish": r["choices"][0].get("finish_reason"), "raw": text}],
        "final": value,
        "lenient": redraft_extract(text),
    }


def pydantic_model(schema):
    """A Pydantic model accepting what the JSON Schema accepts (the subset DeepJSONEval uses:
    object/properties/required, array/items, scalar types, enum). Fields are aliased, so any
    property name works."""
    from pydantic import ConfigDict, Field, create_model

    counter = [0]

    def ann(s, name):
        if not isinstance(s, dict):
            return Any
        if "enum" in s:
            return Literal[tuple(s["enum"])]
        t = s.get("type")
        if isinstance(t, list):
            kinds = [ann({**s, "type": x}, name) for x in t]
            return Optional[kinds[0]] if "null" in t and len(kinds) == 2 else Any
        if t == "object" or "properties" in s:
            return model(s, name)
        if t == "array":
            return list[ann(s.get("items"), name + "Item")] if isinstance(s.get("items"), dict) else list[Any]
        return {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}.get(t, Any)

    def model(s, name):
        counter[0] += 1
        required = set(s.get("required", []))
        fields = {}
        for i, (k, sub) in enumerate(s.get("properties", {}).items()):
            desc = sub.get("description") if isinstance(sub, dict) else None
            fields[f"f{i}"] = (ann(sub, f"{name}_{k}"),
                               Field(... if k in required else None, alias=k, description=desc))
        return create_model(f"M{counter[0]}_{s.get('title', name)}"[:60].replace(" ", "_"),
                            __config__=ConfigDict(strict=True, populate_by_name=True), **fields)

    return model(schema, "Root")


def run_instructor(task):
    import instructor
    import openai

    raw = openai.OpenAI(base_url=BASE_URL, api_key="unused", max_retries=0, timeout=900)
    calls = []
    create = raw.chat.completions.create

    def recording_create(*a, **kw):
        r = create(*a, **kw)
        text = r.choices[0].message.content or ""
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        calls.append({"value": value, "tokens_in": r.usage.prompt_tokens if r.usage else 0,
                      "tokens_out": r.usage.completion_tokens if r.usage else 0,
                      "finish": r.choices[0].finish_reason, "raw": text})
        return r

    raw.chat.completions.create = recording_create
    client = instructor.from_openai(raw, mode=instructor.Mode.JSON)
    error = None
    try:
        client.chat.completions.create(model=MODEL, response_model=pydantic_model(task["schema"]), max_retries=2,
                                       temperature=0, max_tokens=MAX_TOKENS,
                                       messages=[{"role": "user", "content": base_prompt(task)}])
    except Exception as e:  # noqa: BLE001 - any failure ends the run; what was answered is recorded
        error = f"{type(e).__name__}: {str(e)[:300]}"
    final = calls[-1]["value"] if calls and error is None else None
    return {"attempts": calls, "final": final, "error": error}


def run_redraft(task, flags, config):
    binary = REDRAFT
    if flags and flags[0].startswith("@"):  # another build of the CLI (e.g. the code before a change)
        binary, flags = flags[0][1:], flags[1:]
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "schema.json").write_text(json.dumps(task["schema"], ensure_ascii=False))
        (t / "prompt.txt").write_text(base_prompt(task))
        (t / "redraft.toml").write_text(config)
        if TASK_SET == "staffing":
            kinds = kinds_without_hints(t / "pack") if "--no-hints" in flags else STAFFING / "kinds"
            flags = [f for f in flags if f != "--no-hints"]
            (t / "context.json").write_text(json.dumps(task["context"]))
            (t / "prompt.txt").write_text(task["text"])
            what = ["--kinds", str(kinds), "--kind", "fill", "--context", f"@{t / 'context.json'}"]
        elif TASK_SET == "people-kind":
            kinds = kinds_without_hints(t / "pack", PERSON) if "--no-hints" in flags else PERSON / "kinds"
            flags = [f for f in flags if f != "--no-hints"]
            (t / "context.json").write_text(json.dumps({"text": task["text"]}, ensure_ascii=False))
            what = ["--kinds", str(kinds), "--kind", "person", "--context", f"@{t / 'context.json'}"]
        else:
            what = ["--schema", str(t / "schema.json")]
        cmd = [binary, "run", "--config", str(t / "redraft.toml"), "--model", f"openai/{MODEL}",
               *what, "--prompt", f"@{t / 'prompt.txt'}",
               "--max-iterations", "3", "--temperature", "0", "--max-tokens", str(MAX_TOKENS),
               "--attempt-timeout", "900s", "--no-store", "--json", "--progress", "never"] + flags
        env = {**os.environ, "OPENAI_BASE_URL": BASE_URL, "OPENAI_API_KEY": "unused", "HOME": tmp,
               "XDG_CONFIG_HOME": tmp}
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp)
    try:
        result = json.loads(p.stdout)
    except ValueError:
        return {"attempts": [], "final": None, "error": f"exit {p.returncode}: {p.stderr[-300:]}"}
    attempts = [{"value": a.get("artifact"), "tokens_in": a.get("tokens_in", 0), "tokens_out": a.get("tokens_out", 0),
                 "finish": a.get("finish_reason"), "raw": a.get("raw", ""), "status": a.get("status"),
                 "repairs": a.get("repairs"), "extraction": a.get("extraction"), "repeat_of": a.get("repeat_of"),
                 "temperature": a.get("temperature"),
                 "issues": [f"{i.get('path')}: {i.get('code')}" for i in a.get("issues", [])][:5]}
                for a in result.get("history", [])]
    return {"attempts": attempts, "final": result.get("artifact") if result.get("status") == "succeeded" else None,
            "best": result.get("artifact"), "status": result.get("status"), "halted": result.get("halted_because"),
            "error": (result.get("error") or {}).get("message") if result.get("error") else None}


# ---------------------------------------------------------------- driver


def accepted(name, run, i):
    """Whether the system itself accepted attempt i (and so returned it)."""
    a = run["attempts"][i]
    if name == "one-call":
        return True
    if name == "instructor":
        return i == len(run["attempts"]) - 1 and run.get("error") is None
    return a.get("status") == "accepted"


def returned(name, run):
    """What the system hands back to its caller: the parsed answer (one call), the model
    (Instructor; nothing when it raises), the artifact or best-so-far (redraft)."""
    return run.get("best") if name.startswith("redraft") else run["final"]


def summarize(name, tasks, runs):
    n = len(tasks)
    valid_at = []
    for k in (1, 2, 3):
        valid_at.append(sum(1 for t, r in zip(tasks, runs)
                            if any(accepted(name, r, i) and judge(t["schema"], a["value"], t)
                                   for i, a in enumerate(r["attempts"][:k]))))
    final_valid = [any(accepted(name, r, i) and judge(t["schema"], a["value"], t) for i, a in enumerate(r["attempts"]))
                   for t, r in zip(tasks, runs)]
    # The system accepted an answer that Python jsonschema rejects (should not happen).
    disagreements = sum(1 for t, r in zip(tasks, runs)
                        for i, a in enumerate(r["attempts"]) if accepted(name, r, i) and name != "one-call"
                        and not judge(t["schema"], a["value"], t))
    acc = [(1.0 if t["expected"] is None else field_accuracy(t["expected"], r["final"])) if v else 0.0
           for t, r, v in zip(tasks, runs, final_valid)]
    acc_valid = [a for a, v in zip(acc, final_valid) if v]
    back = [returned(name, r) for r in runs]
    acc_returned = [field_accuracy(t["expected"], b) if b is not None else 0.0 for t, b in zip(tasks, back)]
    calls = sum(len(r["attempts"]) for r in runs)
    tokens = sum(a["tokens_in"] + a["tokens_out"] for r in runs for a in r["attempts"])
    n_valid = sum(final_valid)
    s = {
        "system": name, "tasks": n, "valid_at": valid_at, "valid": n_valid, "calls": calls, "tokens": tokens,
        "field_accuracy": sum(acc) / n, "field_accuracy_of_valid": (sum(acc_valid) / len(acc_valid)) if acc_valid else None,
        "returned_json": sum(b is not None for b in back), "field_accuracy_of_returned": sum(acc_returned) / n,
        "field_accuracy_best_attempt": sum(max([field_accuracy(t["expected"], a["value"]) if a["value"] is not None
                                                else 0.0 for a in r["attempts"]] or [0.0])
                                           for t, r in zip(tasks, runs)) / n,
        "schema_errors_of_returned": [schema_errors(t["schema"], b) for t, b in zip(tasks, back) if b is not None],
        "calls_per_valid": calls / n_valid if n_valid else None, "tokens_per_valid": tokens / n_valid if n_valid else None,
        "cut_off_answers": sum(1 for r in runs for a in r["attempts"] if a.get("finish") == "length"),
        "judge_disagreements": disagreements,
        "wall_s": sum(r["wall_s"] for r in runs),
    }
    if name == "one-call":
        lenient = [judge(t["schema"], r["lenient"]) for t, r in zip(tasks, runs)]
        s["valid_with_redraft_extraction"] = sum(lenient)
    return s


def row(s):
    n = s["tasks"]
    pct = lambda k: f"{k}/{n}"  # noqa: E731
    f = lambda x, fmt: "—" if x is None else format(x, fmt)  # noqa: E731
    single = s["system"] == "one-call"
    fav = s["field_accuracy_of_valid"]
    return [s["system"], pct(s["valid_at"][0]), "—" if single else pct(s["valid_at"][1]),
            "—" if single else pct(s["valid_at"][2]), f"{100 * s['field_accuracy']:.1f}%",
            "—" if fav is None else f"{100 * fav:.1f}%", f"{s['returned_json']}/{n}",
            f"{100 * s['field_accuracy_of_returned']:.1f}%", f"{100 * s['field_accuracy_best_attempt']:.1f}%",
            f(statistics.median(s["schema_errors_of_returned"]) if s["schema_errors_of_returned"] else None, "g"),
            s["calls"], s["cut_off_answers"],
            f(s["calls_per_valid"], ".2f"), f(s["tokens_per_valid"], ",.0f"), f"{s['tokens']:,}", f"{s['wall_s']:.0f}"]


HEADER = ["system", "valid@1", "valid@2", "valid@3", "field accuracy (all tasks)", "field accuracy (valid ones)",
          "JSON returned", "field accuracy of what is returned",
          "field accuracy of the best attempt", "schema errors in it (median)", "LLM calls", "answers cut off", "calls / valid",
          "tokens / valid", "tokens", "wall s"]
ORDER = ["one-call", "instructor"]


def main():
    tasks = select_tasks()
    # One call and Instructor have no roster to check a fill against: redraft's variants only.
    others = "" if TASK_SET in ("staffing", "people-kind") else "one-call,instructor,"
    systems = os.environ.get("SYSTEMS", others + ",".join(VARIANTS)).split(",")
    out = {"machine": machine(), "task_set": TASK_SET, "model": MODEL, "base_url": BASE_URL, "n": len(tasks), "max_tokens": MAX_TOKENS,
           "tasks": [t["id"] for t in tasks], "variants": VARIANTS, "systems": {}}
    previous = RESULTS / f"{OUT}.json"
    if (os.environ.get("MERGE") or os.environ.get("RESUMMARIZE")) and previous.exists():
        # Keep the systems measured earlier on the same tasks; rerun only SYSTEMS (none with
        # RESUMMARIZE, which only recomputes the tables from the recorded runs).
        old = json.loads(previous.read_text())
        if old["tasks"] == out["tasks"] and old["max_tokens"] == MAX_TOKENS:
            if os.environ.get("RESUMMARIZE"):
                systems = []
                out["machine"] = old["machine"]
            out["systems"] = {k: v for k, v in old["systems"].items() if k not in systems}
            out["variants"] = {**old.get("variants", {}), **VARIANTS}
    for name in systems:
        runs = []
        for i, task in enumerate(tasks):
            t0 = time.monotonic()
            if name == "one-call":
                r = run_one_call(task)
            elif name == "instructor":
                r = run_instructor(task)
            else:
                r = run_redraft(task, *VARIANTS[name])
            r["wall_s"] = time.monotonic() - t0
            r["id"] = task["id"]
            runs.append(r)
            ok = [int(judge(task["schema"], a["value"], task)) for a in r["attempts"]]
            print(f"{name} {i + 1}/{len(tasks)} {task['id']} depth {task['depth']}: calls {len(r['attempts'])} "
                  f"valid {ok} {r['wall_s']:.1f}s {r.get('error') or ''}", file=sys.stderr, flush=True)
        for r in runs:
            for a in r["attempts"]:
                a["raw"] = a["raw"][:3000]
        out["systems"][name] = {"runs": runs}
        # Kept as each system ends: a long run is not lost to a failure after it.
        (RESULTS / f"{OUT}.json").write_text(json.dumps(out, indent=1, ensure_ascii=False))
    for name, v in out["systems"].items():
        v["summary"] = summarize(name, tasks, v["runs"])
    names = [k for k in ORDER if k in out["systems"]] + [k for k in out["systems"] if k not in ORDER]
    out["systems"] = {k: out["systems"][k] for k in names}
    what = {"deepjsoneval": f"DeepJSONEval (English, the {len(tasks)} shortest tasks)",
            "people": f"{len(tasks)} flat person extractions (bench/tasks/people.jsonl)",
            "flat": f"{len(tasks)} flat extractions (bench/tasks/people.jsonl and orders.jsonl)",
            "staffing": f"the {len(tasks)} staffing contracts (examples/staffing; valid = the fill rules pass)",
            "people-kind": f"{len(tasks)} person extractions through the person kind (examples/person; valid = "
                           "its rules pass: every value written in the sentence)"}[TASK_SET]
    md = [f"Convergence on {what}, {MODEL}, temperature 0, max_tokens {MAX_TOKENS}", "",
          table(HEADER, [row(v["summary"]) for v in out["systems"].values()])]
    if "one-call" in out["systems"]:
        s = out["systems"]["one-call"]["summary"]
        md.append(f"\none-call: {s['valid_with_redraft_extraction']}/{s['tasks']} schema-valid when the same answers "
                  f"are read with redraft's extraction instead of json.loads.")
    write_results(OUT, out, "\n".join(md))


if __name__ == "__main__":
    main()
