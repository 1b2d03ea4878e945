//! The values the cases are made of: runs, specs, attempts and results, and a few ways of
//! reading them back.

use std::time::Duration;

use redraft_core::extract::{Repair, Route};
use redraft_core::record::{
    AttemptRecord, AttemptStatus, Escalation, Metrics, RecurringIssue, RunErrorReport, RunResult, RunStatus, Validation,
};
use redraft_core::{FinishReason, HaltReason, Issue, Score};
use redraft_store::{Lease, NewRun, Origin, RunFilter, RunState, Store, StoreError};
use serde_json::{Value, json};

/// The worker holding the runs of these tests.
pub(crate) const W: &str = "w1";

/// A long lease for `worker_id`.
pub(crate) fn lease(worker_id: &str) -> Lease<'_> {
    Lease { worker_id, ttl: Duration::from_secs(600) }
}

/// A run recorded running, held by [`W`].
pub(crate) fn held<'a>(run_id: &'a str, spec: &'a Value) -> NewRun<'a> {
    NewRun { run_id, spec, holder: Some(lease(W)), max_queued: None, origin: Origin::Http }
}

/// A run recorded queued.
pub(crate) fn queued<'a>(run_id: &'a str, spec: &'a Value) -> NewRun<'a> {
    NewRun { run_id, spec, holder: None, max_queued: None, origin: Origin::Http }
}

pub(crate) fn new_run<'a>(run_id: &'a str, spec: &'a Value, state: RunState) -> NewRun<'a> {
    if state == RunState::Queued { queued(run_id, spec) } else { held(run_id, spec) }
}

pub(crate) fn spec(prompt: &str) -> Value {
    json!({"prompt": prompt, "provider": "local", "model": "qwen", "max_iterations": 5})
}

pub(crate) fn attempt(iteration: u32, score: f64, artifact: Option<Value>) -> AttemptRecord {
    let status = match (&artifact, score) {
        (None, _) => AttemptStatus::InvalidJson,
        (Some(_), s) if s >= 1.0 => AttemptStatus::Accepted,
        (Some(_), _) => AttemptStatus::Rejected,
    };
    let issues = if score >= 1.0 {
        Vec::new()
    } else {
        vec![
            Issue::new("/city", "required", "`city` is missing")
                .with_values(Some(json!("a string")), None)
                .with_severity(redraft_core::Severity::Error),
        ]
    };
    AttemptRecord {
        iteration,
        status,
        raw: format!("attempt {iteration}: ```json\n{}\n```", artifact.clone().unwrap_or(Value::Null)),
        extraction: artifact.as_ref().map(|_| Route::Fenced),
        repairs: if iteration == 2 { vec![Repair::TrailingComma.into()] } else { Vec::new() },
        artifact,
        score: Score::new(score).unwrap(),
        issues,
        tokens_in: 100 * u64::from(iteration),
        tokens_out: 40,
        tokens_estimated: iteration == 2,
        cost_usd: Some(0.000_125 * f64::from(iteration)),
        judge_cost_usd: None,
        wall_ms: 1234,
        started_at: Some(format!("2026-11-24T09:00:0{iteration}.000Z")),
        finished_at: Some(format!("2026-11-24T09:00:0{iteration}.900Z")),
        finish_reason: Some(FinishReason::Stop),
        repeat_of: None,
        model: Some("local/qwen".into()),
        served_model: Some("qwen2.5-7b-instruct-q4".into()),
        temperature: Some(0.2),
        reply: None,
        prompt: None,
    }
}

pub(crate) fn result(run_id: &str, status: RunStatus, history: Vec<AttemptRecord>) -> RunResult {
    let best =
        history.iter().filter(|a| a.artifact.is_some()).max_by(|a, b| a.score.get().total_cmp(&b.score.get())).cloned();
    let failed = status == RunStatus::Failed;
    RunResult {
        run_id: run_id.into(),
        status,
        halted_because: if failed { HaltReason::MaxIterations } else { HaltReason::Success },
        artifact: best.as_ref().and_then(|a| a.artifact.clone()),
        validation: Validation {
            score: best.as_ref().map_or(Score::ZERO, |a| a.score),
            passed: !failed,
            issues: best.as_ref().map(|a| a.issues.clone()).unwrap_or_default(),
        },
        iterations: u32::try_from(history.len()).unwrap(),
        best_iteration: best.as_ref().map(|a| a.iteration),
        best_score: best.as_ref().map(|a| a.score),
        best_ref: best.as_ref().map(|a| format!("{run_id}/{}", a.iteration)),
        artifact_sha256: best.as_ref().map(|_| "ab".repeat(32)),
        metrics: Metrics {
            wall_ms: 3702,
            tokens_in: 600,
            tokens_out: 120,
            tokens_estimated: true,
            cost_usd: Some(0.00075),
            judge_cost_usd: None,
        },
        escalation: failed.then(|| Escalation {
            summary: "3 attempts failed on `/city`".into(),
            attempts: vec!["1: required at /city".into()],
            recurring_issues: vec![RecurringIssue { path: "/city".into(), code: "required".into(), count: 3 }],
            pattern: Some("the same issue every time".into()),
            question: "Where is the city?".into(),
        }),
        error: failed.then(|| RunErrorReport { code: "max_iterations".into(), message: "out of attempts".into() }),
        history,
    }
}

pub(crate) async fn summary(store: &dyn Store, run_id: &str) -> redraft_store::RunSummary {
    let all = store.list(&RunFilter { limit: Some(1000), ..RunFilter::default() }).await.unwrap();
    all.into_iter().find(|s| s.run_id == run_id).unwrap_or_else(|| panic!("`{run_id}` is not listed"))
}

pub(crate) fn ids(summaries: &[redraft_store::RunSummary]) -> Vec<&str> {
    summaries.iter().map(|s| s.run_id.as_str()).collect()
}

pub(crate) fn not_found(result: Result<impl std::fmt::Debug, StoreError>, run_id: &str) {
    match result {
        Err(StoreError::NotFound { run_id: id }) => assert_eq!(id, run_id),
        other => panic!("expected NotFound for `{run_id}`, got {other:?}"),
    }
}

/// A text-mode attempt: the artifact is the raw text itself.
pub(crate) fn text_attempt(iteration: u32, raw: &str, score: f64) -> AttemptRecord {
    let mut a = attempt(iteration, score, Some(Value::String(raw.to_owned())));
    a.raw = raw.to_owned();
    a.extraction = None;
    a
}

pub(crate) static SPEC: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| json!({"prompt": "p"}));

pub(crate) fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}
