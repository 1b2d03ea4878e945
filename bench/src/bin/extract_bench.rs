//! redraft's side of the extraction benchmark, and the one scorer used for every tool.
//!
//! ```text
//! extract-bench outputs CORPUS.jsonl           # redraft's result per case, as JSON lines
//! extract-bench score CORPUS.jsonl OUTPUTS     # agreement of any tool's outputs with CORPUS
//! extract-bench time CORPUS.jsonl [MIN_SECS]   # one throughput sample (JSON on stdout)
//! ```
//!
//! An outputs file has one line per case: `{"ok": true, "json": "<the value as JSON text>"}`
//! or `{"ok": false}`. Scoring follows `crates/redraft-extract/tests/corpus.rs`: a case agrees
//! when the value equals `expected` (object keys in any order, `-0.0` read as `0`), or when the
//! tool failed and the case has `expect_failure`.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Case {
    input: String,
    expected: Value,
    expect_failure: bool,
}

fn load(path: &str) -> Result<Vec<Case>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("read {path}: {e}"))?;
    let mut cases = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("{path}:{}: {e}", n + 1))?;
        let input = v["input"].as_str().ok_or_else(|| format!("{path}:{}: no input", n + 1))?.to_owned();
        cases.push(Case {
            input,
            expected: v["expected"].clone(),
            expect_failure: v["expect_failure"].as_bool().unwrap_or(false),
        });
    }
    Ok(cases)
}

/// The same canonical form as the corpus test: keys sorted, `-0.0` as `0`.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k.clone(), canonical(v))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        Value::Number(n) if n.as_f64() == Some(0.0) && n.is_f64() && n.to_string() == "-0.0" => Value::from(0),
        other => other.clone(),
    }
}

fn outputs(path: &str) -> Result<(), String> {
    for case in load(path)? {
        let line = match redraft_extract::extract(&case.input) {
            Ok(found) => json!({"ok": true, "json": found.value.to_string()}),
            Err(_) => json!({"ok": false}),
        };
        println!("{line}");
    }
    Ok(())
}

fn score(corpus: &str, outputs: &str) -> Result<(), String> {
    let cases = load(corpus)?;
    let text = std::fs::read_to_string(outputs).map_err(|e| format!("read {outputs}: {e}"))?;
    let results: Vec<Value> =
        text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap_or(Value::Null)).collect();
    if results.len() != cases.len() {
        return Err(format!("{outputs}: {} outputs for {} cases", results.len(), cases.len()));
    }
    let (mut agree, mut nonfail, mut nonfail_agree, mut fail, mut fail_agree) = (0, 0, 0, 0, 0);
    let (mut failures, mut unparsable) = (0, 0);
    let mut disagreeing = Vec::new();
    for (i, (case, out)) in cases.iter().zip(&results).enumerate() {
        let got: Option<Value> = if out["ok"].as_bool() == Some(true) {
            // a value the scorer cannot read back (NaN, Infinity) counts as a wrong value
            let parsed = out["json"].as_str().and_then(|s| serde_json::from_str::<Value>(s).ok());
            if parsed.is_none() {
                unparsable += 1;
            }
            Some(parsed.unwrap_or(json!({"$unparsable": out["json"].clone()})))
        } else {
            failures += 1;
            None
        };
        let ok = match (&got, case.expect_failure) {
            (None, true) => true,
            (Some(v), false) => canonical(v) == canonical(&case.expected),
            _ => false,
        };
        if case.expect_failure {
            fail += 1;
            fail_agree += usize::from(ok);
        } else {
            nonfail += 1;
            nonfail_agree += usize::from(ok);
        }
        agree += usize::from(ok);
        if !ok {
            disagreeing.push(i + 1);
        }
    }
    let summary = json!({
        "cases": cases.len(), "agree": agree,
        "nonfail_cases": nonfail, "nonfail_agree": nonfail_agree,
        "fail_cases": fail, "fail_agree": fail_agree,
        "tool_failures": failures, "unparsable_values": unparsable,
        "disagreeing_lines": disagreeing,
    });
    println!("{summary}");
    Ok(())
}

/// One pass over every input; only the extraction calls run inside.
fn pass(inputs: &[String]) {
    for s in inputs {
        let _ = black_box(redraft_extract::extract(black_box(s.as_str())));
    }
}

/// Warm up for 0.5 s, then run whole-file passes until `min_secs` have passed; the sample
/// is the elapsed time over the passes made (the clock is read once per pass).
fn time(path: &str, min_secs: f64) -> Result<(), String> {
    let inputs: Vec<String> = load(path)?.into_iter().map(|c| c.input).collect();
    let bytes: usize = inputs.iter().map(String::len).sum();
    let warm_start = Instant::now();
    while warm_start.elapsed() < Duration::from_millis(500) {
        pass(&inputs);
    }
    let (mut reps, t0) = (0u64, Instant::now());
    while reps == 0 || t0.elapsed().as_secs_f64() < min_secs {
        pass(&inputs);
        reps += 1;
    }
    let secs = t0.elapsed().as_secs_f64();
    println!("{}", json!({"cases": inputs.len(), "bytes": bytes, "reps": reps, "secs": secs}));
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["outputs", corpus] => outputs(corpus),
        ["score", corpus, outs] => score(corpus, outs),
        ["time", corpus] => time(corpus, 1.0),
        ["time", corpus, secs] => secs.parse().map_err(|e| format!("MIN_SECS: {e}")).and_then(|s| time(corpus, s)),
        _ => Err("usage: extract-bench outputs CORPUS | score CORPUS OUTPUTS | time CORPUS [MIN_SECS]".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("extract-bench: {e}");
            ExitCode::from(2)
        }
    }
}
