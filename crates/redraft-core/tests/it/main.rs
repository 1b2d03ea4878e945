//! Integration tests of the deciding loop: scenarios, the exact feedback text, escalations
//! and the loop's invariants.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_debug_implementations)] // test code

mod conversation;
mod cost;
mod halting;
mod invariants;
mod narrowing;
mod person;
mod read;
mod repeats;
mod resume;
mod text;

use std::time::Duration;

use redraft_core::{
    AttemptEnd, AttemptOutcome, ChatResponse, Engine, Issue, Next, Plan, RunResult, Score, Task, Usage, Verdict,
};
use serde_json::{Value, json};

/// A scripted evaluator: the artifact passes when `/city` is "Toledo".
pub fn city_check(artifact: &Value) -> Verdict {
    match artifact.get("city").and_then(Value::as_str) {
        Some("Toledo") => Verdict::pass(),
        Some(other) => Verdict::from_issues(vec![Issue::new(
            "/city",
            "rule:city_matches",
            format!("city '{other}' doesn't match contract city 'Toledo'"),
        )]),
        None => Verdict::from_issues(vec![Issue::new("/city", "required", "\"city\" is a required property")]),
    }
}

pub fn plan() -> Plan {
    let mut plan = Plan::new(Task::new("Name the city of the contract as {\"city\": …}."), "mock/test");
    plan.schema = Some(std::sync::Arc::new(json!({
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"]
    })));
    plan
}

/// Answer the engine's next attempt with `raw`, judged by `check`.
pub fn answer(
    engine: &mut Engine,
    raw: &str,
    check: impl Fn(&Value) -> Verdict,
) -> Option<redraft_core::AttemptRecord> {
    answer_with(engine, raw, None, check)
}

pub fn answer_with(
    engine: &mut Engine,
    raw: &str,
    usage: Option<Usage>,
    check: impl Fn(&Value) -> Verdict,
) -> Option<redraft_core::AttemptRecord> {
    let Next::Attempt { iteration, request, .. } = engine.next(Duration::ZERO) else {
        return None;
    };
    let read = engine.read_artifact(raw);
    let verdict = read.artifact.as_ref().map(&check);
    let response = ChatResponse { usage, ..ChatResponse::text(raw) };
    engine
        .settle(AttemptOutcome {
            iteration,
            request_chars: request.chars(),
            wall_ms: 10,
            started_at: None,
            finished_at: None,
            end: AttemptEnd::Answered { response, read, verdict },
        })
        .cloned()
}

pub fn scored(score: f64) -> impl Fn(&Value) -> Verdict {
    move |_| Verdict {
        score: Score::new(score).unwrap_or(Score::ZERO),
        passed: score >= 1.0,
        issues: if score >= 1.0 { vec![] } else { vec![Issue::new("/x", "grade", format!("graded {score}"))] },
        cost_usd: None,
        wall_ms: 0,
    }
}

pub fn finish(engine: Engine) -> RunResult {
    engine.finish("run-1", Duration::from_millis(1234))
}
