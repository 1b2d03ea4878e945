#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! One contract, every store. Each case below is a plain `async fn(Arc<dyn Store>)`; the
//! `contract!` macro runs it against:
//!
//! - SQLite, always (a fresh file in a temp dir, opened through `redraft_store::open`);
//! - PostgreSQL when `DATABASE_URL` is a `postgres://` URL, each case in a schema of its own
//!   (`redraft_test_<case>`, dropped afterwards). CI sets `DATABASE_URL` (`.ci/run` starts a
//!   throwaway cluster); without it each PostgreSQL case prints a visible `SKIP` line (which
//!   fails CI) and runs on SQLite only.
//!
//! Tests that only make sense for one backend (reopening a file, `:memory:`) follow at the end.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use redraft_core::extract::{Repair, Route};
use redraft_core::record::{
    AttemptRecord, AttemptStatus, Escalation, Metrics, PersonReply, RecurringIssue, RunErrorReport, RunResult,
    RunStatus, Validation,
};
use redraft_core::{FinishReason, HaltReason, Issue, Score};
use redraft_store::{Claim, Lease, NewRun, RunFilter, RunState, SqliteStore, Store, StoreError};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// The backends

/// A fresh SQLite store in a temp dir (kept alive by the returned guard).
async fn sqlite_store() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("redraft.db");
    let store = redraft_store::open(path.to_str().unwrap()).await.unwrap();
    (store, dir)
}

/// `DATABASE_URL` when it names PostgreSQL.
fn postgres_url() -> Option<String> {
    std::env::var("DATABASE_URL").ok().filter(|url| redraft_store::is_postgres_url(url))
}

/// A schema of one test case, dropped by [`PgSchema::drop`].
struct PgSchema {
    url: String,
    name: String,
}

impl PgSchema {
    async fn execute(url: &str, sql: String) {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
    }

    async fn drop(self) {
        Self::execute(&self.url, format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name)).await;
    }

    /// The URL of a store in this schema.
    fn store_url(url: &str, name: &str) -> String {
        let separator = if url.contains('?') { '&' } else { '?' };
        format!("{url}{separator}options[search_path]={name}")
    }

    /// Another store on this schema, as another process would open it.
    async fn another_store(&self) -> Arc<dyn Store> {
        redraft_store::open(&Self::store_url(&self.url, &self.name)).await.unwrap()
    }
}

/// A PostgreSQL store in a fresh schema named after the case, or `None` when `DATABASE_URL`
/// is not set to a PostgreSQL URL.
async fn postgres_store(case: &str) -> Option<(Arc<dyn Store>, PgSchema)> {
    let Some(url) = postgres_url() else {
        // Written past the test harness's capture, so the skip is seen (and CI, which sets
        // DATABASE_URL, fails on any SKIP line).
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIP {case} on PostgreSQL: DATABASE_URL is not a postgres:// URL (it ran on SQLite only)"
        );
        return None;
    };
    let name = format!("redraft_test_{case}");
    PgSchema::execute(&url, format!("DROP SCHEMA IF EXISTS {name} CASCADE")).await;
    PgSchema::execute(&url, format!("CREATE SCHEMA {name}")).await;
    let store = redraft_store::open(&PgSchema::store_url(&url, &name)).await.unwrap();
    Some((store, PgSchema { url, name }))
}

/// One test per case and backend: `sqlite::<case>` and `postgres::<case>`.
macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let (store, _dir) = super::sqlite_store().await;
                    super::$case(store).await;
                }
            )*
        }

        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let Some((store, schema)) = super::postgres_store(stringify!($case)).await else { return };
                    super::$case(store).await;
                    schema.drop().await;
                }
            )*
        }
    };
}

contract!(
    lifecycle_is_written_as_it_happens,
    failed_run_keeps_its_whole_history,
    results_of_many_runs_in_one_read,
    json_reads_back_verbatim,
    list_orders_filters_and_limits,
    list_filters_by_model_kind_and_text_and_pages,
    unfinished_runs_oldest_first,
    unknown_runs_are_not_found,
    concurrent_runs_never_lock,
    claims_are_exclusive,
    expired_leases_are_taken_over,
    cancel_withdraw_and_a_full_queue,
    runs_queued_at_once_are_each_answered_for_themselves,
    attempt_times_are_kept,
    raw_text_reads_back_as_the_artifact,
    refused_writes_among_many_leave_the_others_stored,
    a_run_awaiting_an_answer,
    a_last_attempt_is_written_with_the_result,
    results_written_at_once_are_each_written_or_refused,
    renewals_racing_results_all_succeed,
);

// ---------------------------------------------------------------------------------------------
// Values

/// The worker holding the runs of these tests.
const W: &str = "w1";

/// A long lease for `worker_id`.
fn lease(worker_id: &str) -> Lease<'_> {
    Lease { worker_id, ttl: Duration::from_secs(600) }
}

/// A run recorded running, held by [`W`].
fn held<'a>(run_id: &'a str, spec: &'a Value) -> NewRun<'a> {
    NewRun { run_id, spec, holder: Some(lease(W)), max_queued: None, local: false }
}

/// A run recorded queued.
fn queued<'a>(run_id: &'a str, spec: &'a Value) -> NewRun<'a> {
    NewRun { run_id, spec, holder: None, max_queued: None, local: false }
}

fn new_run<'a>(run_id: &'a str, spec: &'a Value, state: RunState) -> NewRun<'a> {
    if state == RunState::Queued { queued(run_id, spec) } else { held(run_id, spec) }
}

fn spec(prompt: &str) -> Value {
    json!({"prompt": prompt, "provider": "local", "model": "qwen", "max_iterations": 5})
}

fn attempt(iteration: u32, score: f64, artifact: Option<Value>) -> AttemptRecord {
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

fn result(run_id: &str, status: RunStatus, history: Vec<AttemptRecord>) -> RunResult {
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

async fn summary(store: &dyn Store, run_id: &str) -> redraft_store::RunSummary {
    let all = store.list(&RunFilter { limit: Some(1000), ..RunFilter::default() }).await.unwrap();
    all.into_iter().find(|s| s.run_id == run_id).unwrap_or_else(|| panic!("`{run_id}` is not listed"))
}

fn ids(summaries: &[redraft_store::RunSummary]) -> Vec<&str> {
    summaries.iter().map(|s| s.run_id.as_str()).collect()
}

fn not_found(result: Result<impl std::fmt::Debug, StoreError>, run_id: &str) {
    match result {
        Err(StoreError::NotFound { run_id: id }) => assert_eq!(id, run_id),
        other => panic!("expected NotFound for `{run_id}`, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The contract

/// insert → running → attempts visible one by one → an iteration saved again replaces it →
/// finish → the exact result is rebuilt, and the summary follows along.
async fn lifecycle_is_written_as_it_happens(store: Arc<dyn Store>) {
    let spec = spec("fill the form");
    store.insert_run(&queued("run-a", &spec)).await.unwrap();
    let stored = store.run("run-a").await.unwrap().unwrap();
    assert_eq!(stored.state, RunState::Queued);
    assert_eq!(stored.spec, spec);
    assert!(stored.attempts.is_empty() && stored.result.is_none());
    assert!(stored.created_at_ms > 1_600_000_000_000, "milliseconds since the epoch: {}", stored.created_at_ms);
    let first = summary(&*store, "run-a").await;
    assert_eq!((first.iterations, first.best_score, first.halted_because), (0, None, None));
    assert_eq!(first.model.as_deref(), Some("local/qwen"));

    assert_eq!(store.claim_run("run-a", &lease(W), false).await.unwrap(), Claim::Claimed { takeover: false });
    let stored = store.run("run-a").await.unwrap().unwrap();
    assert_eq!(stored.state, RunState::Running);
    assert_eq!(stored.holder.map(|h| h.worker_id).as_deref(), Some(W));

    let attempts =
        [attempt(1, 0.4, Some(json!({"name": "Ada"}))), attempt(2, 0.0, None), attempt(3, 0.5, Some(json!({"x": 1})))];
    for (i, a) in attempts.iter().enumerate() {
        store.save_attempt("run-a", W, a).await.unwrap();
        // Visible at once, in order: a crash right now would lose nothing.
        let stored = store.run("run-a").await.unwrap().unwrap();
        assert_eq!(stored.attempts, attempts[..=i]);
        let s = summary(&*store, "run-a").await;
        assert_eq!(s.iterations, u32::try_from(i + 1).unwrap());
        assert_eq!(s.state, RunState::Running);
    }
    // The best score counts only attempts with an artifact.
    assert_eq!(summary(&*store, "run-a").await.best_score, Some(0.5));

    // A resumed run remakes iteration 3: the new record replaces the old one.
    let remade = attempt(3, 1.0, Some(json!({"name": "Ada", "city": "London"})));
    store.save_attempt("run-a", W, &remade).await.unwrap();
    let stored = store.run("run-a").await.unwrap().unwrap();
    assert_eq!(stored.attempts.len(), 3);
    assert_eq!(stored.attempts[2], remade);
    assert_eq!(summary(&*store, "run-a").await.best_score, Some(1.0));
    assert!(store.unfinished().await.unwrap().contains(&"run-a".to_owned()));

    let history = vec![attempts[0].clone(), attempts[1].clone(), remade];
    let result = result("run-a", RunStatus::Succeeded, history.clone());
    store.finish_run(&result, W).await.unwrap();
    let stored = store.run("run-a").await.unwrap().unwrap();
    assert_eq!(stored.state, RunState::Succeeded);
    assert_eq!(stored.attempts, history);
    assert_eq!(stored.result.as_ref(), Some(&result));
    assert_eq!(serde_json::to_string(&stored.result).unwrap(), serde_json::to_string(&Some(&result)).unwrap());
    assert!(stored.updated_at_ms >= stored.created_at_ms);

    let s = summary(&*store, "run-a").await;
    assert_eq!(s.state, RunState::Succeeded);
    assert_eq!(s.halted_because, Some(HaltReason::Success));
    assert_eq!((s.iterations, s.best_score), (3, Some(1.0)));
    assert!(!store.unfinished().await.unwrap().contains(&"run-a".to_owned()));
}

/// A failed run: state `failed`, escalation and error kept; the result's history is what is
/// stored, even attempts that were never saved one by one or saved otherwise, and only those.
async fn failed_run_keeps_its_whole_history(store: Arc<dyn Store>) {
    store.insert_run(&held("run-f", &json!({"prompt": "p"}))).await.unwrap();
    let history = vec![attempt(1, 0.2, Some(json!([1, 2]))), attempt(2, 0.3, Some(json!([1]))), attempt(3, 0.0, None)];
    store.save_attempt("run-f", W, &history[0]).await.unwrap();
    // Iteration 2 as first saved differs from the result's (the result's is what is kept).
    store.save_attempt("run-f", W, &attempt(2, 0.1, Some(json!([9])))).await.unwrap();
    // An attempt the run did not end up keeping (interrupted, then the run halted).
    store.save_attempt("run-f", W, &attempt(4, 0.9, Some(json!([])))).await.unwrap();
    // The spec names no model: the summary takes the proposer's from the first attempt.
    assert_eq!(summary(&*store, "run-f").await.model.as_deref(), Some("local/qwen"));

    let result = result("run-f", RunStatus::Failed, history.clone());
    assert!(result.escalation.is_some() && result.error.is_some());
    store.finish_run(&result, W).await.unwrap();

    let stored = store.run("run-f").await.unwrap().unwrap();
    assert_eq!(stored.state, RunState::Failed);
    assert_eq!(stored.attempts, history);
    assert_eq!(stored.result, Some(result));
    let s = summary(&*store, "run-f").await;
    assert_eq!(
        (s.state, s.halted_because, s.iterations, s.best_score),
        (RunState::Failed, Some(HaltReason::MaxIterations), 3, Some(0.3))
    );

    // Finishing again (a retried write) is harmless and gives the same run; no other worker
    // can write it.
    let again = store.run("run-f").await.unwrap().unwrap().result.unwrap();
    store.finish_run(&again, W).await.unwrap();
    assert_eq!(store.run("run-f").await.unwrap().unwrap().result, Some(again.clone()));
    assert!(matches!(store.finish_run(&again, "w9").await, Err(StoreError::LeaseLost { .. })));
    assert!(matches!(store.save_attempt("run-f", W, &history[0]).await, Err(StoreError::LeaseLost { .. })));
}

/// A run's last attempt is written with its result (one write): it is stored as though it had
/// been saved on its own, and a spec naming no model gets the model of its history.
async fn a_last_attempt_is_written_with_the_result(store: Arc<dyn Store>) {
    for (run_id, saved_before) in [("run-one", 0), ("run-three", 2)] {
        store.insert_run(&held(run_id, &json!({"prompt": "p"}))).await.unwrap();
        let history: Vec<AttemptRecord> = (1..=saved_before + 1)
            .map(|i| attempt(i, if i == saved_before + 1 { 1.0 } else { 0.5 }, Some(json!({"i": i}))))
            .collect();
        for a in history.iter().take(saved_before as usize) {
            store.save_attempt(run_id, W, a).await.unwrap();
        }
        let result = result(run_id, RunStatus::Succeeded, history.clone());
        store.finish_run(&result, W).await.unwrap();

        let stored = store.run(run_id).await.unwrap().unwrap();
        assert_eq!(stored.state, RunState::Succeeded);
        assert_eq!(stored.attempts, history, "{run_id}: every attempt, the last one included");
        assert_eq!(stored.result, Some(result));
        let s = summary(&*store, run_id).await;
        assert_eq!(
            (s.state, s.iterations, s.best_score, s.model.as_deref()),
            (RunState::Succeeded, saved_before + 1, Some(1.0), Some("local/qwen")),
            "{run_id}"
        );
    }
}

/// The results of many runs read at once are those of the runs that halted, each as a read of
/// that run gives it (history included); runs still queued or running, and unknown ones, are
/// left out.
async fn results_of_many_runs_in_one_read(store: Arc<dyn Store>) {
    for id in ["ok", "bad", "busy"] {
        store.insert_run(&held(id, &SPEC)).await.unwrap();
    }
    store.insert_run(&queued("waiting", &SPEC)).await.unwrap();
    let history = vec![attempt(1, 0.4, Some(json!({"a": 1}))), attempt(2, 1.0, Some(json!({"a": 2})))];
    for a in &history {
        store.save_attempt("ok", W, a).await.unwrap();
    }
    store.save_attempt("busy", W, &history[0]).await.unwrap();
    store.finish_run(&result("ok", RunStatus::Succeeded, history.clone()), W).await.unwrap();
    store.finish_run(&result("bad", RunStatus::Failed, vec![attempt(1, 0.0, None)]), W).await.unwrap();

    let asked: Vec<String> = ["busy", "ok", "nobody", "waiting", "bad"].map(str::to_owned).into();
    let mut results = store.results(&asked).await.unwrap();
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["bad", "ok"]);
    for (id, result) in &results {
        assert_eq!(Some(result), store.run(id).await.unwrap().unwrap().result.as_ref());
    }
    assert_eq!(results[1].1.history, history);
    assert!(store.results(&[]).await.unwrap().is_empty());
}

/// JSON comes back as it was written: key order (an artifact is shown as the model wrote it),
/// Unicode, escapes, NUL, big integers, floats.
async fn json_reads_back_verbatim(store: Arc<dyn Store>) {
    let text = r#"{"zeta": 1, "alpha": {"b": 2, "a": [3, 1]}, "text": "ü — 🚀 \"q\"\n\u0000", "big": 9007199254740993, "float": 0.1, "tiny": 1e-7, "neg": -0.0}"#;
    let artifact: Value = serde_json::from_str(text).unwrap();
    let spec = json!({"prompt": "p", "context": artifact.clone()});
    store.insert_run(&held("run-j", &spec)).await.unwrap();
    let mut a = attempt(1, 1.0, Some(artifact.clone()));
    a.raw = format!("Here you go:\n{text}\n\u{0}trailing \\ backslash");
    store.save_attempt("run-j", W, &a).await.unwrap();
    let result = result("run-j", RunStatus::Succeeded, vec![a.clone()]);
    store.finish_run(&result, W).await.unwrap();

    let stored = store.run("run-j").await.unwrap().unwrap();
    assert_eq!(serde_json::to_string(&stored.spec).unwrap(), serde_json::to_string(&spec).unwrap());
    assert_eq!(serde_json::to_string(&stored.attempts[0]).unwrap(), serde_json::to_string(&a).unwrap());
    assert_eq!(serde_json::to_string(&stored.result).unwrap(), serde_json::to_string(&Some(&result)).unwrap());
    let keys: Vec<&String> =
        stored.result.as_ref().unwrap().artifact.as_ref().unwrap().as_object().unwrap().keys().collect();
    assert_eq!(keys, ["zeta", "alpha", "text", "big", "float", "tiny", "neg"]);
}

/// A text-mode attempt (its artifact is its raw text) and a result whose artifact is its best
/// attempt's read back whole, however they are stored.
async fn raw_text_reads_back_as_the_artifact(store: Arc<dyn Store>) {
    store.insert_run(&held("run-t", &spec("write a poem"))).await.unwrap();
    let text = "roses are red\n".repeat(1000);
    let history = vec![text_attempt(1, &text, 0.0), text_attempt(2, "violets", 1.0), attempt(3, 0.0, None)];
    for a in &history {
        store.save_attempt("run-t", W, a).await.unwrap();
    }
    assert_eq!(store.run("run-t").await.unwrap().unwrap().attempts, history);
    // The best is attempt 2; the result's artifact is its artifact.
    let mut finished = result("run-t", RunStatus::Failed, history.clone());
    finished.best_iteration = Some(2);
    finished.artifact = history[1].artifact.clone();
    store.finish_run(&finished, W).await.unwrap();
    let stored = store.run("run-t").await.unwrap().unwrap();
    assert_eq!(stored.attempts, history);
    assert_eq!(stored.result.as_ref(), Some(&finished));
    assert_eq!(serde_json::to_string(&stored.result).unwrap(), serde_json::to_string(&Some(&finished)).unwrap());

    // A result whose artifact is no attempt's (a library caller's own) is kept as given.
    let mut own = finished.clone();
    own.run_id = "run-o".into();
    own.artifact = Some(json!("an artifact of its own"));
    store.insert_run(&held("run-o", &spec("p"))).await.unwrap();
    store.finish_run(&own, W).await.unwrap();
    assert_eq!(store.run("run-o").await.unwrap().unwrap().result, Some(own));
}

/// `list` by model, kind and text (in the id, model, kind or prompt, in any ASCII case), every
/// condition at once, a page at a time.
async fn list_filters_by_model_kind_and_text_and_pages(store: Arc<dyn Store>) {
    let specs = [
        ("k0", json!({"prompt": "Extract the INVOICE total", "model": "openai/gpt-5", "kind": "invoice"})),
        (
            "k1",
            json!({"prompt": "Staff the Toledo contract", "provider": "local", "model": "qwen", "kind": "staffing"}),
        ),
        ("k2", json!({"prompt": "Another invoice, 100% off_", "model": "openai/gpt-5", "kind": "invoice"})),
        ("k3", json!({"prompt": "No kind here", "model": "openai/gpt-5"})),
    ];
    for (id, spec) in &specs {
        store.insert_run(&queued(id, spec)).await.unwrap();
    }
    let list = |filter: RunFilter| {
        let store = store.clone();
        async move { store.list(&filter).await.unwrap() }
    };
    let f = RunFilter::default;
    let all = list(f()).await;
    assert_eq!(
        all.iter().map(|s| s.kind.as_deref()).collect::<Vec<_>>(),
        [None, Some("invoice"), Some("staffing"), Some("invoice")]
    );
    assert_eq!(ids(&list(RunFilter { model: Some("openai/gpt-5".into()), ..f() }).await), ["k3", "k2", "k0"]);
    assert_eq!(ids(&list(RunFilter { model: Some("local/qwen".into()), ..f() }).await), ["k1"]);
    assert!(list(RunFilter { model: Some("openai".into()), ..f() }).await.is_empty(), "a model matches whole");
    assert_eq!(ids(&list(RunFilter { kind: Some("invoice".into()), ..f() }).await), ["k2", "k0"]);
    assert_eq!(ids(&list(RunFilter { text: Some("invoice".into()), ..f() }).await), ["k2", "k0"]);
    assert_eq!(ids(&list(RunFilter { text: Some("TOLEDO".into()), ..f() }).await), ["k1"]);
    assert_eq!(ids(&list(RunFilter { text: Some("k3".into()), ..f() }).await), ["k3"]);
    assert_eq!(ids(&list(RunFilter { text: Some("qwen".into()), ..f() }).await), ["k1"]);
    // A request holding a NUL character (JSON `\u0000`, which PostgreSQL cannot turn into
    // text) neither breaks the list nor hides from a search.
    let nul = json!({"prompt": "Find the NUL\u{0}here", "model": "openai/gpt-5", "kind": "invoice"});
    store.insert_run(&queued("k4", &nul)).await.unwrap();
    assert_eq!(ids(&list(RunFilter { kind: Some("invoice".into()), ..f() }).await), ["k4", "k2", "k0"]);
    assert_eq!(ids(&list(RunFilter { text: Some("find the nul".into()), ..f() }).await), ["k4"]);
    assert_eq!(list(f()).await.len(), 5);
    for odd in ["\u{0}", "nul\u{0}here", "\u{fffd}"] {
        let found = store.list(&RunFilter { text: Some(odd.into()), model: Some(odd.into()), ..f() }).await;
        assert!(found.is_ok_and(|runs| runs.is_empty()), "{odd:?}");
    }
    // Characters that are wildcards in LIKE are plain text here.
    assert_eq!(ids(&list(RunFilter { text: Some("100% off_".into()), ..f() }).await), ["k2"]);
    assert!(list(RunFilter { text: Some("%".into()), kind: Some("staffing".into()), ..f() }).await.is_empty());
    let both = RunFilter { kind: Some("invoice".into()), text: Some("total".into()), ..f() };
    assert_eq!(ids(&list(both).await), ["k0"]);
    assert!(list(RunFilter { kind: Some("invoice".into()), state: Some(RunState::Running), ..f() }).await.is_empty());
    // Pages: newest first, `offset` skips.
    let page = |offset| list(RunFilter { limit: Some(3), offset: Some(offset), ..f() });
    assert_eq!(ids(&page(0).await), ["k4", "k3", "k2"]);
    assert_eq!(ids(&page(3).await), ["k1", "k0"]);
    assert!(page(5).await.is_empty());
}

/// A text-mode attempt: the artifact is the raw text itself.
fn text_attempt(iteration: u32, raw: &str, score: f64) -> AttemptRecord {
    let mut a = attempt(iteration, score, Some(Value::String(raw.to_owned())));
    a.raw = raw.to_owned();
    a.extraction = None;
    a
}

/// `list`: newest first, by state, at most `limit` (50 by default).
async fn list_orders_filters_and_limits(store: Arc<dyn Store>) {
    for i in 0..5 {
        store.insert_run(&held(&format!("r{i}"), &spec(&format!("p{i}")))).await.unwrap();
    }
    store.finish_run(&result("r0", RunStatus::Succeeded, vec![attempt(1, 1.0, Some(json!(1)))]), W).await.unwrap();
    store.finish_run(&result("r1", RunStatus::Failed, vec![attempt(1, 0.1, Some(json!(1)))]), W).await.unwrap();
    assert!(store.release("r3", W).await.unwrap());

    let list = |state: Option<RunState>, limit: Option<u32>| {
        let store = store.clone();
        async move { store.list(&RunFilter { state, limit, ..RunFilter::default() }).await.unwrap() }
    };
    assert_eq!(ids(&list(None, None).await), ["r4", "r3", "r2", "r1", "r0"]);
    assert_eq!(ids(&list(Some(RunState::Running), None).await), ["r4", "r2"]);
    assert_eq!(ids(&list(Some(RunState::Queued), None).await), ["r3"]);
    assert_eq!(ids(&list(Some(RunState::Failed), None).await), ["r1"]);
    assert_eq!(ids(&list(None, Some(2)).await), ["r4", "r3"]);
    assert_eq!(ids(&list(Some(RunState::Succeeded), Some(1)).await), ["r0"]);
    assert!(list(None, Some(0)).await.is_empty());

    let all = list(None, None).await;
    assert!(all.windows(2).all(|w| w[0].created_at_ms >= w[1].created_at_ms));
    let r0 = all.iter().find(|s| s.run_id == "r0").unwrap();
    assert_eq!((r0.halted_because, r0.iterations, r0.best_score), (Some(HaltReason::Success), 1, Some(1.0)));

    for i in 5..60 {
        store.insert_run(&queued(&format!("r{i}"), &json!({"prompt": "p"}))).await.unwrap();
    }
    let page = list(None, None).await;
    assert_eq!(page.len(), 50);
    assert_eq!(page[0].run_id, "r59");
    assert_eq!(list(None, Some(500)).await.len(), 60);
}

/// `unfinished`: running and queued runs, oldest first.
async fn unfinished_runs_oldest_first(store: Arc<dyn Store>) {
    assert!(store.unfinished().await.unwrap().is_empty());
    for (id, state) in
        [("a", RunState::Running), ("b", RunState::Queued), ("c", RunState::Running), ("d", RunState::Running)]
    {
        store.insert_run(&new_run(id, &json!({"prompt": id}), state)).await.unwrap();
    }
    store.finish_run(&result("c", RunStatus::Succeeded, vec![attempt(1, 1.0, Some(json!({})))]), W).await.unwrap();
    assert_eq!(store.unfinished().await.unwrap(), ["a", "b", "d"]);
    assert!(store.release("a", W).await.unwrap());
    store.finish_run(&result("d", RunStatus::Failed, Vec::new()), W).await.unwrap();
    assert_eq!(store.unfinished().await.unwrap(), ["a", "b"]);
}

/// Writes to a run that is not stored fail with `NotFound`; reading one gives `None`; a second
/// insert of the same id is refused.
async fn unknown_runs_are_not_found(store: Arc<dyn Store>) {
    not_found(store.claim_run("nope", &lease(W), false).await, "nope");
    not_found(store.request_cancel("nope").await, "nope");
    assert!(!store.withdraw("nope").await.unwrap());
    assert!(!store.release("nope", W).await.unwrap());
    not_found(store.save_attempt("nope", W, &attempt(1, 0.5, None)).await, "nope");
    not_found(store.finish_run(&result("nope", RunStatus::Failed, Vec::new()), W).await, "nope");
    assert!(store.run("nope").await.unwrap().is_none());
    assert_eq!(StoreError::NotFound { run_id: "nope".into() }.to_string(), "run `nope` is not in the store");
    // Nothing was created on the way.
    assert!(store.list(&RunFilter::default()).await.unwrap().is_empty());

    store.insert_run(&queued("dup", &json!({"prompt": "p"}))).await.unwrap();
    let err = store.insert_run(&held("dup", &json!({"prompt": "other"}))).await.unwrap_err();
    assert!(matches!(err, StoreError::Query { .. }), "{err:?}");
    assert_eq!(err.to_string(), "the store failed to insert run `dup`: a run with this id is already stored");
    assert_eq!(store.run("dup").await.unwrap().unwrap().spec, json!({"prompt": "p"}));
}

/// A server running many runs at once: 20 runs, each writing 5 attempts (and reading its run
/// back after each) concurrently, never fail with "database is locked".
async fn concurrent_runs_never_lock(store: Arc<dyn Store>) {
    let tasks: Vec<_> = (0..20)
        .map(|r| {
            let store = store.clone();
            tokio::spawn(async move {
                let run_id = format!("c{r:02}");
                store.insert_run(&queued(&run_id, &spec("p"))).await?;
                store.claim_run(&run_id, &lease(W), false).await?;
                let mut history = Vec::new();
                for i in 1..=5 {
                    let a = attempt(i, f64::from(i) / 5.0, Some(json!({"run": r, "i": i})));
                    store.save_attempt(&run_id, W, &a).await?;
                    history.push(a);
                    let seen = store.run(&run_id).await?.map_or(0, |s| s.attempts.len());
                    assert_eq!(seen, history.len());
                    tokio::task::yield_now().await;
                }
                store.finish_run(&result(&run_id, RunStatus::Succeeded, history), W).await?;
                Ok::<_, StoreError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let all = store
        .list(&RunFilter { state: Some(RunState::Succeeded), limit: Some(100), ..RunFilter::default() })
        .await
        .unwrap();
    assert_eq!(all.len(), 20);
    assert!(all.iter().all(|s| s.iterations == 5 && s.best_score == Some(1.0)));
    for r in 0..20 {
        assert_eq!(store.run(&format!("c{r:02}")).await.unwrap().unwrap().attempts.len(), 5);
    }
}

/// 8 workers claiming 30 queued runs get 30 distinct runs; the oldest goes first; runs held
/// under a live lease, and runs started by a user's own process, are not claimable.
async fn claims_are_exclusive(store: Arc<dyn Store>) {
    let w0 = lease("w0");
    assert_eq!(store.claim_next(&w0).await.unwrap(), None);
    store.insert_run(&held("busy", &json!({"prompt": "p"}))).await.unwrap();
    let local = NewRun { local: true, ..queued("mine", &SPEC) };
    store.insert_run(&local).await.unwrap();
    let expected: HashSet<String> = (0..30).map(|i| format!("q{i:02}")).collect();
    for i in 0..30 {
        store.insert_run(&queued(&format!("q{i:02}"), &json!({"prompt": i}))).await.unwrap();
    }
    assert_eq!(store.queue_depth().await.unwrap(), 31);
    let first = store.claim_next(&w0).await.unwrap().unwrap();
    assert_eq!((first.run_id.as_str(), first.takeover), ("q00", false));

    let workers: Vec<_> = (1..=8)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                let id = format!("w{w}");
                let mut mine = Vec::new();
                while let Some(claimed) = store.claim_next(&lease(&id)).await? {
                    mine.push(claimed.run_id);
                    tokio::task::yield_now().await;
                }
                Ok::<_, StoreError>(mine)
            })
        })
        .collect();
    let mut claimed = vec!["q00".to_owned()];
    for worker in workers {
        claimed.extend(worker.await.unwrap().unwrap());
    }
    assert_eq!(claimed.len(), 30, "{claimed:?}");
    assert_eq!(claimed.iter().cloned().collect::<HashSet<_>>(), expected);
    for run_id in &claimed {
        assert_eq!(store.run(run_id).await.unwrap().unwrap().state, RunState::Running);
    }
    assert_eq!(store.claim_next(&w0).await.unwrap(), None);
    assert_eq!(store.queue_depth().await.unwrap(), 1, "the local run stays queued for `runs resume`");
    assert_eq!(
        store
            .list(&RunFilter { state: Some(RunState::Running), limit: Some(100), ..RunFilter::default() })
            .await
            .unwrap()
            .len(),
        31
    );
}

/// Leases: renewing keeps a run; a run whose lease expired is taken over by the next claim (and
/// by an explicit claim), a live one never — unless forced; the old holder's writes are refused
/// from then on, and its renewal no longer names the run.
async fn expired_leases_are_taken_over(store: Arc<dyn Store>) {
    let short = Lease { worker_id: "w1", ttl: Duration::from_millis(150) };
    for id in ["long", "short", "done"] {
        store.insert_run(&queued(id, &json!({"prompt": id}))).await.unwrap();
    }
    assert_eq!(store.claim_run("long", &lease("w2"), false).await.unwrap(), Claim::Claimed { takeover: false });
    assert_eq!(store.claim_run("short", &short, false).await.unwrap(), Claim::Claimed { takeover: false });
    assert_eq!(store.claim_run("done", &lease("w3"), false).await.unwrap(), Claim::Claimed { takeover: false });
    store.finish_run(&result("done", RunStatus::Succeeded, vec![attempt(1, 1.0, Some(json!(1)))]), "w3").await.unwrap();
    assert_eq!(store.claim_run("done", &lease("w4"), false).await.unwrap(), Claim::Finished(RunState::Succeeded));

    // A live lease is never taken: the claimer is told who holds it, and until when.
    match store.claim_run("long", &lease("w4"), false).await.unwrap() {
        Claim::Held(holder) => {
            assert_eq!(holder.worker_id, "w2");
            assert!(holder.lease_until_ms > now_ms() + 500_000, "{holder:?}");
        }
        other => panic!("a live lease was taken: {other:?}"),
    }
    let renewal = store.renew(&lease("w2"), &["long".to_owned(), "short".to_owned()]).await.unwrap();
    assert_eq!(renewal.held, ["long"], "w2 does not hold `short`");
    assert!(renewal.cancel.is_empty());

    // w1 stops renewing `short`. w1 itself never takes its own run over (it is alive, so it is
    // still running it); once the lease has run out, another worker's next claim does.
    while now_ms() < store.run("short").await.unwrap().unwrap().holder.unwrap().lease_until_ms + 10 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(store.claim_next(&short).await.unwrap(), None);
    store.save_attempt("short", "w1", &attempt(1, 0.2, Some(json!(1)))).await.unwrap();
    // At once: w1 finding nothing to take over (its own runs are never its to take) says
    // nothing about what another worker may take.
    let taken = store.claim_next(&lease("w4")).await.unwrap().expect("the expired lease was not taken over");
    assert_eq!((taken.run_id.as_str(), taken.takeover), ("short", true));
    let stored = store.run("short").await.unwrap().unwrap();
    // A store that reads the claimed run with the claim reads it as it now is: held by the
    // claimer, its recorded attempt there to resume from.
    if let Some(read) = &taken.run {
        assert_eq!(**read, stored);
    }
    assert_eq!((stored.state, stored.attempts.len()), (RunState::Running, 1), "the recorded attempt is kept");
    assert_eq!(stored.holder.unwrap().worker_id, "w4");

    // The old holder is fenced off: its writes are refused, its renewal no longer names the run.
    let lost = store.save_attempt("short", "w1", &attempt(2, 0.9, Some(json!(2)))).await.unwrap_err();
    assert!(
        matches!(&lost, StoreError::LeaseLost { run_id, worker_id } if run_id == "short" && worker_id == "w1"),
        "{lost:?}"
    );
    let lost = store.finish_run(&result("short", RunStatus::Succeeded, Vec::new()), "w1").await.unwrap_err();
    assert!(matches!(lost, StoreError::LeaseLost { .. }), "{lost:?}");
    assert!(store.renew(&short, &["short".to_owned()]).await.unwrap().held.is_empty());
    assert!(!store.release("short", "w1").await.unwrap());
    assert_eq!(store.run("short").await.unwrap().unwrap().attempts.len(), 1);
    store.save_attempt("short", "w4", &attempt(2, 0.9, Some(json!(2)))).await.unwrap();

    // Forcing breaks a live lease (its holder is known to be dead).
    assert_eq!(store.claim_run("long", &lease("w5"), true).await.unwrap(), Claim::Claimed { takeover: true });
    assert!(store.renew(&lease("w2"), &["long".to_owned()]).await.unwrap().held.is_empty());
    assert_eq!(store.claim_next(&lease("w6")).await.unwrap(), None);
}

/// Cancel requests reach the holder on its next renewal; a queued run can be withdrawn until a
/// worker claims it; a full queue refuses new queued runs but never runs started at once.
async fn cancel_withdraw_and_a_full_queue(store: Arc<dyn Store>) {
    store.insert_run(&held("r", &json!({"prompt": "p"}))).await.unwrap();
    assert_eq!(store.request_cancel("r").await.unwrap(), RunState::Running);
    let renewal = store.renew(&lease(W), &["r".to_owned()]).await.unwrap();
    assert_eq!((renewal.held, renewal.cancel), (vec!["r".to_owned()], vec!["r".to_owned()]));
    store.finish_run(&result("r", RunStatus::Failed, Vec::new()), W).await.unwrap();
    assert_eq!(store.request_cancel("r").await.unwrap(), RunState::Failed);

    let bounded = |id: &'static str| NewRun { max_queued: Some(2), ..queued(id, &SPEC) };
    store.insert_run(&bounded("q1")).await.unwrap();
    store.insert_run(&bounded("q2")).await.unwrap();
    let full = store.insert_run(&bounded("q3")).await.unwrap_err();
    assert!(matches!(full, StoreError::QueueFull { queued: 2 }), "{full:?}");
    assert!(store.run("q3").await.unwrap().is_none(), "a refused run is not stored");
    store.insert_run(&NewRun { max_queued: Some(2), ..held("now", &SPEC) }).await.unwrap();

    assert!(store.withdraw("q1").await.unwrap());
    assert!(store.run("q1").await.unwrap().is_none());
    store.claim_run("q2", &lease(W), false).await.unwrap();
    assert!(!store.withdraw("q2").await.unwrap(), "a claimed run is not withdrawn");
    assert!(!store.withdraw("now").await.unwrap());
    assert_eq!(store.queue_depth().await.unwrap(), 0);
}

/// Hundreds of runs queued at once (stored together by the store's group commit) are each
/// answered for themselves: every acknowledged run is stored, a duplicate id is refused alone,
/// and a bound on the queue admits exactly as many as it has room for.
async fn runs_queued_at_once_are_each_answered_for_themselves(store: Arc<dyn Store>) {
    store.insert_run(&queued("taken", &SPEC)).await.unwrap();
    let ids: Vec<String> = (0..200).map(|i| format!("burst-{i}")).chain(["taken".to_owned()]).collect();
    let outcomes = futures_util::future::join_all(ids.iter().map(|id| {
        let store = store.clone();
        async move { store.insert_run(&queued(id, &SPEC)).await }
    }))
    .await;
    for (id, outcome) in ids.iter().zip(&outcomes) {
        match id.as_str() {
            "taken" => assert!(outcome.as_ref().unwrap_err().to_string().contains("already stored"), "{outcome:?}"),
            _ => assert!(outcome.is_ok(), "{id}: {outcome:?}"),
        }
    }
    assert_eq!(store.queue_depth().await.unwrap(), 201);

    // Room for 60 more: 60 of 100 at once get in, the other 40 are told the queue is full.
    let ids: Vec<String> = (0..100).map(|i| format!("bounded-{i}")).collect();
    let outcomes = futures_util::future::join_all(ids.iter().map(|id| {
        let store = store.clone();
        async move { store.insert_run(&NewRun { max_queued: Some(261), ..queued(id, &SPEC) }).await }
    }))
    .await;
    let admitted: Vec<&String> = ids.iter().zip(&outcomes).filter(|(_, o)| o.is_ok()).map(|(id, _)| id).collect();
    assert_eq!(admitted.len(), 60);
    assert!(outcomes.iter().filter_map(|o| o.as_ref().err()).all(|e| matches!(e, StoreError::QueueFull { .. })));
    for (id, outcome) in ids.iter().zip(&outcomes) {
        assert_eq!(store.run(id).await.unwrap().is_some(), outcome.is_ok(), "{id}: stored exactly when admitted");
    }
    assert_eq!(store.queue_depth().await.unwrap(), 261);
}

/// Each attempt's own start and end times read back as written, after the run finished.
async fn attempt_times_are_kept(store: Arc<dyn Store>) {
    store.insert_run(&held("t", &json!({"prompt": "p"}))).await.unwrap();
    let history = vec![attempt(1, 0.5, Some(json!(1))), attempt(2, 1.0, Some(json!(2)))];
    store.save_attempt("t", W, &history[0]).await.unwrap();
    store.finish_run(&result("t", RunStatus::Succeeded, history), W).await.unwrap();
    let stored = store.run("t").await.unwrap().unwrap();
    let times: Vec<_> = stored.attempts.iter().map(|a| (a.started_at.clone(), a.finished_at.clone())).collect();
    assert_eq!(
        times,
        [
            (Some("2026-11-24T09:00:01.000Z".into()), Some("2026-11-24T09:00:01.900Z".into())),
            (Some("2026-11-24T09:00:02.000Z".into()), Some("2026-11-24T09:00:02.900Z".into())),
        ]
    );
}

/// Many writes at once (which the SQLite store commits together), half of them refused (the
/// writer does not hold the run, or the run id is taken): every other write is stored, every
/// refused one reports why.
async fn refused_writes_among_many_leave_the_others_stored(store: Arc<dyn Store>) {
    for r in 0..20 {
        store.insert_run(&held(&format!("m{r:02}"), &SPEC)).await.unwrap();
    }
    let tasks: Vec<_> = (0..20)
        .map(|r| {
            let store = store.clone();
            tokio::spawn(async move {
                let run_id = format!("m{r:02}");
                let writer = if r % 2 == 0 { W } else { "intruder" };
                let saved = store.save_attempt(&run_id, writer, &attempt(1, 0.5, Some(json!(r)))).await;
                let again = store.insert_run(&queued(&run_id, &SPEC)).await;
                (r, saved, again)
            })
        })
        .collect();
    for task in tasks {
        let (r, saved, again) = task.await.unwrap();
        assert!(matches!(again, Err(StoreError::Query { .. })), "run {r} inserted twice");
        let stored = store.run(&format!("m{r:02}")).await.unwrap().unwrap();
        if r % 2 == 0 {
            saved.unwrap();
            assert_eq!(stored.attempts.len(), 1);
        } else {
            assert!(matches!(saved, Err(StoreError::LeaseLost { .. })), "{saved:?}");
            assert!(stored.attempts.is_empty());
        }
    }
}

/// Results written at once (a worker finishing many runs together) are each written or refused
/// on their own: a result for a run its writer does not hold is refused alone, one the
/// database cannot take (an id with a NUL character) fails alone, a run finished twice keeps
/// the later result, and each written run has exactly its result's attempts.
async fn results_written_at_once_are_each_written_or_refused(store: Arc<dyn Store>) {
    const RUNS: usize = 40;
    for r in 0..RUNS {
        let run_id = format!("f{r:02}");
        store.insert_run(&held(&run_id, &SPEC)).await.unwrap();
        // Two attempts saved; every third result lists only the second (the first is dropped).
        for i in 1..=2 {
            store.save_attempt(&run_id, W, &attempt(i, 0.5, Some(json!({"r": r, "i": i})))).await.unwrap();
        }
    }
    let history = |r: usize| -> Vec<AttemptRecord> {
        let last = attempt(3, 1.0, Some(json!({"r": r, "i": 3})));
        let second = attempt(2, 0.5, Some(json!({"r": r, "i": 2})));
        if r.is_multiple_of(3) {
            vec![second, last]
        } else {
            vec![attempt(1, 0.5, Some(json!({"r": r, "i": 1}))), second, last]
        }
    };
    let finish = |run_id: String, writer: &'static str, result: RunResult| {
        let store = store.clone();
        tokio::spawn(async move { (run_id, store.finish_run(&result, writer).await) })
    };
    let mut tasks = Vec::new();
    for r in 0..RUNS {
        let run_id = format!("f{r:02}");
        let writer = if r % 5 == 4 { "intruder" } else { W };
        tasks.push(finish(run_id.clone(), writer, result(&run_id, RunStatus::Succeeded, history(r))));
    }
    tasks.push(finish("bad\0id".into(), W, result("bad\0id", RunStatus::Succeeded, history(0))));
    for (run_id, outcome) in futures_util::future::join_all(tasks).await.into_iter().map(Result::unwrap) {
        let Some(r) = run_id.strip_prefix('f').and_then(|n| n.parse::<usize>().ok()) else {
            assert!(outcome.is_err(), "a result for a run that cannot be stored was written: {outcome:?}");
            continue;
        };
        let stored = store.run(&run_id).await.unwrap().unwrap();
        if r % 5 == 4 {
            assert!(matches!(outcome, Err(StoreError::LeaseLost { .. })), "{run_id}: {outcome:?}");
            assert_eq!(stored.state, RunState::Running, "{run_id}");
            assert_eq!(stored.attempts.len(), 2, "{run_id}: the holder's attempts are kept");
            assert_eq!(stored.result, None, "{run_id}");
        } else {
            outcome.unwrap_or_else(|e| panic!("{run_id}: {e}"));
            assert_eq!(stored.state, RunState::Succeeded, "{run_id}");
            assert_eq!(stored.attempts, history(r), "{run_id}: the result's attempts, no others");
            assert_eq!(stored.result, Some(result(&run_id, RunStatus::Succeeded, history(r))), "{run_id}");
        }
    }
    // A run finished twice at once (an answer racing its run's end) keeps one whole result.
    let first = result("f00", RunStatus::Failed, history(1));
    let second = result("f00", RunStatus::Succeeded, history(0));
    let (a, b) = tokio::join!(store.finish_run(&first, W), store.finish_run(&second, W));
    a.unwrap();
    b.unwrap();
    let stored = store.run("f00").await.unwrap().unwrap();
    let kept = stored.result.clone().unwrap();
    assert!(kept == first || kept == second, "{kept:?}");
    assert_eq!(stored.attempts, kept.history, "the attempts are those of the result kept");
}

/// A worker renews the leases of the runs it holds while their results are written, batched
/// with each other: every renewal and every result succeeds (the two lock the same rows, in
/// one order, so neither is ever chosen as a deadlock victim), and a run is held until its
/// result is written.
async fn renewals_racing_results_all_succeed(store: Arc<dyn Store>) {
    // A race: three rounds make it likely to be lost at least once were the order not kept.
    for round in 0..3 {
        race_renewals_with_results(&store, round).await;
    }
}

async fn race_renewals_with_results(store: &Arc<dyn Store>, round: usize) {
    const RUNS: usize = 600;
    let run_ids: Vec<String> = (0..RUNS).map(|r| format!("r{round}-{:04}", (r * 7919) % RUNS)).collect();
    for run_id in &run_ids {
        store.insert_run(&held(run_id, &SPEC)).await.unwrap();
    }
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let renewer = {
        let (store, done, mut ids) = (store.clone(), done.clone(), run_ids.clone());
        tokio::spawn(async move {
            let mut renewals = 0;
            while !done.load(std::sync::atomic::Ordering::Acquire) || renewals < 3 {
                ids.reverse();
                store.renew(&lease(W), &ids).await.unwrap_or_else(|e| panic!("renewal {renewals}: {e}"));
                renewals += 1;
            }
            renewals
        })
    };
    let tasks: Vec<_> = run_ids
        .iter()
        .map(|run_id| {
            let (store, run_id) = (store.clone(), run_id.clone());
            tokio::spawn(async move {
                let history = vec![attempt(1, 1.0, Some(json!({"run": run_id})))];
                store.finish_run(&result(&run_id, RunStatus::Succeeded, history), W).await.map_err(|e| (run_id, e))
            })
        })
        .collect();
    for outcome in futures_util::future::join_all(tasks).await {
        if let Err((run_id, e)) = outcome.unwrap() {
            panic!("{run_id}: {e}");
        }
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    assert!(renewer.await.unwrap() >= 3);
    let finished = store.results(&run_ids).await.unwrap();
    assert_eq!(finished.len(), RUNS, "every result is stored");
    let renewal = store.renew(&lease(W), &run_ids).await.unwrap();
    assert!(renewal.held.is_empty(), "finished runs are no longer held: {:?}", renewal.held);
}

static SPEC: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| json!({"prompt": "p"}));

// ---------------------------------------------------------------------------------------------
// SQLite only

/// What the PostgreSQL store does beyond the contract (skipped, visibly, without `DATABASE_URL`).
mod postgres_only {
    use super::*;

    /// A claim reads the runs it claims in the same statement: what it hands the worker is the
    /// run as a read right after gives it (held by the claimer, spec and attempts).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn claims_read_their_runs() {
        let Some((store, schema)) = postgres_store("claims_read_their_runs").await else { return };
        store.insert_run(&queued("q", &json!({"prompt": "queued"}))).await.unwrap();
        let claimed = store.claim_many(&lease("w2"), 10).await.unwrap();
        assert_eq!(claimed.len(), 1);
        let read = claimed[0].run.as_deref().expect("the claim read the run");
        let stored = store.run("q").await.unwrap().unwrap();
        assert_eq!(*read, stored);
        assert_eq!(
            (read.spec.clone(), read.holder.as_ref().map(|h| h.worker_id.as_str())),
            (json!({"prompt": "queued"}), Some("w2"))
        );
        schema.drop().await;
    }

    /// A worker waiting for queued runs is told when another process queues one (or puts one
    /// back), without waiting for its next poll of the queue; nothing is announced otherwise.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn runs_queued_elsewhere_are_announced() {
        let Some((worker, schema)) = postgres_store("announced").await else { return };
        let api = schema.another_store().await;
        let within = Duration::from_secs(10);
        // The first wait starts listening, and reports at once (runs queued before are claimed).
        tokio::time::timeout(within, worker.queued_elsewhere()).await.expect("the first wait reports at once");
        assert!(
            tokio::time::timeout(Duration::from_millis(300), worker.queued_elsewhere()).await.is_err(),
            "nothing was queued, yet the worker was told so"
        );
        // Queued together with others (the batched insert) and on its own (the fallback path).
        let waiting = tokio::spawn({
            let worker = worker.clone();
            async move { worker.queued_elsewhere().await }
        });
        api.insert_run(&queued("a", &json!({"prompt": "queued"}))).await.unwrap();
        tokio::time::timeout(within, waiting).await.expect("told of the queued run").unwrap();
        // A run put back in the queue by the worker that held it.
        api.insert_run(&held("b", &json!({"prompt": "held"}))).await.unwrap();
        let waiting = tokio::spawn({
            let worker = worker.clone();
            async move { worker.queued_elsewhere().await }
        });
        assert!(api.release("b", W).await.unwrap());
        tokio::time::timeout(within, waiting).await.expect("told of the run put back").unwrap();
        schema.drop().await;
    }

    /// Results written by a worker are announced, by run, to the API nodes waiting for them;
    /// a refused write is not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn runs_finished_elsewhere_are_announced() {
        let Some((worker, schema)) = postgres_store("finished_announced").await else { return };
        let api = schema.another_store().await;
        let within = Duration::from_secs(10);
        // The first wait starts listening, and reports at once that runs may have been missed.
        let first =
            tokio::time::timeout(within, api.finished_elsewhere()).await.expect("the first wait reports at once");
        assert_eq!(first, None, "runs finished before listening are read, not named");
        let ids = ["a", "b", "c"];
        for id in ids {
            worker.insert_run(&held(id, &SPEC)).await.unwrap();
        }
        let attempts = vec![attempt(1, 1.0, Some(json!({"city": "Lyon"})))];
        let [ra, rb, rc] = ids.map(|id| result(id, RunStatus::Succeeded, attempts.clone()));
        let (a, b, c) =
            tokio::join!(worker.finish_run(&ra, W), worker.finish_run(&rb, W), worker.finish_run(&rc, "intruder"));
        a.unwrap();
        b.unwrap();
        assert!(matches!(c, Err(StoreError::LeaseLost { .. })), "{c:?}");
        let mut told = Vec::new();
        while told.len() < 2 {
            let ids = tokio::time::timeout(within, api.finished_elsewhere()).await.expect("told of the finished runs");
            told.extend(ids.expect("named, not missed"));
        }
        told.sort();
        assert_eq!(told, ["a", "b"]);
        assert!(
            tokio::time::timeout(Duration::from_millis(300), api.finished_elsewhere()).await.is_err(),
            "a run whose result was refused was announced finished"
        );
        schema.drop().await;
    }

    /// An attempt's `recorded_at` is when it was saved: finishing the run keeps it; saving the
    /// attempt again (a resumed run remaking it) moves it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn recorded_at_is_when_the_attempt_was_saved() {
        use sqlx::Connection;
        let Some((store, schema)) = postgres_store("recorded_at_pg").await else { return };
        let times = format!("SELECT recorded_at FROM {}.attempts WHERE run_id = 't' ORDER BY iteration", schema.name);
        let mut conn = sqlx::PgConnection::connect(&schema.url).await.unwrap();
        let mut read = async || -> Vec<i64> {
            sqlx::query_scalar(sqlx::AssertSqlSafe(times.clone())).fetch_all(&mut conn).await.unwrap()
        };
        store.insert_run(&held("t", &json!({"prompt": "p"}))).await.unwrap();
        let history = vec![attempt(1, 0.5, Some(json!(1))), attempt(2, 1.0, Some(json!(2)))];
        store.save_attempt("t", W, &history[0]).await.unwrap();
        let saved = read().await;
        while now_ms() <= saved[0] + 5 {
            tokio::task::yield_now().await;
        }
        store.save_attempt("t", W, &history[0]).await.unwrap();
        let resaved = read().await;
        assert!(resaved[0] > saved[0], "saved again, it moves: {saved:?} -> {resaved:?}");
        store.finish_run(&result("t", RunStatus::Succeeded, history), W).await.unwrap();
        let after = read().await;
        assert_eq!(after[0], resaved[0], "attempt 1 keeps the time it was saved");
        assert!(after[1] >= resaved[0], "attempt 2 was first recorded with the result: {after:?}");
        let summary = summary(&*store, "t").await;
        assert_eq!((summary.iterations, summary.best_score), (2, Some(1.0)));
        drop(conn);
        schema.drop().await;
    }
}

mod sqlite_only {
    use super::*;

    /// Open, write, close and drop; reopen (through a `sqlite://` URL) and read everything back.
    #[tokio::test]
    async fn a_file_store_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a").join("b").join("redraft.db");
        let history = vec![attempt(1, 0.5, Some(json!({"k": 1}))), attempt(2, 1.0, Some(json!({"k": 2})))];
        let finished = result("done", RunStatus::Succeeded, history.clone());
        {
            let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
            store.insert_run(&held("done", &spec("p"))).await.unwrap();
            for a in &history {
                store.save_attempt("done", W, a).await.unwrap();
            }
            store.finish_run(&finished, W).await.unwrap();
            store.insert_run(&held("interrupted", &spec("q"))).await.unwrap();
            store.save_attempt("interrupted", W, &history[0]).await.unwrap();
            store.close().await;
        }
        assert!(path.is_file(), "the file and its parent directories were created");

        let store = redraft_store::open(&format!("sqlite://{}", path.display())).await.unwrap();
        let done = store.run("done").await.unwrap().unwrap();
        assert_eq!((done.state, done.result), (RunState::Succeeded, Some(finished)));
        assert_eq!(store.unfinished().await.unwrap(), ["interrupted"]);
        assert_eq!(store.run("interrupted").await.unwrap().unwrap().attempts, history[..1]);
    }

    /// A database made by an earlier version (the first two migrations, with runs and attempts
    /// in it) is brought up to date on open with nothing lost: making `runs` again to let a run
    /// await an answer leaves every attempt where it was.
    #[tokio::test]
    async fn an_older_database_is_upgraded_with_its_runs_and_attempts() {
        use sqlx::Connection;
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("old-migrations");
        std::fs::create_dir(&old).unwrap();
        let migrations = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite");
        for name in ["0001_runs_and_attempts.sql", "0002_queue.sql"] {
            std::fs::copy(migrations.join(name), old.join(name)).unwrap();
        }
        let path = dir.path().join("redraft.db");
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let history = [attempt(1, 0.5, Some(json!({"k": 1}))), attempt(2, 0.7, Some(json!({"k": 2})))];
        {
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::migrate::Migrator::new(old.as_path()).await.unwrap().run(&mut conn).await.unwrap();
            sqlx::query(
                "INSERT INTO runs (id, seq, state, spec, created_at, updated_at, iterations, worker_id, lease_until)
                 VALUES ('old', 1, 'running', $1, 1, 1, 2, $2, 9000000000000000)",
            )
            .bind(spec("p").to_string())
            .bind(W)
            .execute(&mut conn)
            .await
            .unwrap();
            for a in &history {
                sqlx::query(
                    "INSERT INTO attempts (run_id, iteration, status, score, has_artifact, record, recorded_at) VALUES ('old', $1, 'rejected', $2, 1, $3, 1)",
                )
                .bind(i64::from(a.iteration))
                .bind(a.score.get())
                .bind(serde_json::to_string(a).unwrap())
                .execute(&mut conn)
                .await
                .unwrap();
            }
            conn.close().await.unwrap();
        }
        let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
        let run = store.run("old").await.unwrap().unwrap();
        assert_eq!((run.state, run.attempts.as_slice()), (RunState::Running, &history[..]));
        assert!(run.answers.is_empty());
        // And the new state is usable.
        let mut waiting = result("old", RunStatus::AwaitingInput, history.to_vec());
        waiting.halted_because = HaltReason::MaxIterations;
        store.finish_run(&waiting, W).await.unwrap();
        assert_eq!(store.run("old").await.unwrap().unwrap().state, RunState::AwaitingInput);
    }

    /// The raw text of a text-mode run is stored once: not again as the attempt's artifact, nor
    /// as the result's.
    #[tokio::test]
    async fn raw_text_is_stored_once() {
        use sqlx::Connection;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redraft.db");
        let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
        store.insert_run(&held("big", &spec("p"))).await.unwrap();
        let raw = "a long answer. ".repeat(200_000); // 3 MB
        let history = vec![text_attempt(1, &raw, 1.0)];
        store.save_attempt("big", W, &history[0]).await.unwrap();
        store.finish_run(&result("big", RunStatus::Succeeded, history.clone()), W).await.unwrap();

        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
        let stored: i64 = sqlx::query_scalar(
            "SELECT (SELECT SUM(LENGTH(record)) FROM attempts) + (SELECT SUM(LENGTH(result)) FROM runs)",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        let raw_len = i64::try_from(raw.len()).unwrap();
        assert!(stored >= raw_len && stored < raw_len + 4096, "{stored} bytes stored for {raw_len} bytes of raw text");
        let back = store.run("big").await.unwrap().unwrap();
        assert_eq!(back.attempts, history);
        assert_eq!(back.result.unwrap().artifact, Some(Value::String(raw)));
    }

    /// Rows written by earlier versions (every attempt and result whole) read back as they were.
    #[tokio::test]
    async fn rows_of_earlier_versions_read_back() {
        use sqlx::Connection;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redraft.db");
        let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
        store.insert_run(&held("old", &spec("p"))).await.unwrap();
        let history = vec![text_attempt(1, "an old answer", 1.0)];
        let finished = result("old", RunStatus::Succeeded, history.clone());
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
        sqlx::query(
            "INSERT INTO attempts (run_id, iteration, status, score, has_artifact, record, recorded_at)
             VALUES ('old', 1, 'accepted', 1.0, 1, $1, 0)",
        )
        .bind(serde_json::to_string(&history[0]).unwrap())
        .execute(&mut conn)
        .await
        .unwrap();
        let whole = RunResult { history: Vec::new(), ..finished.clone() };
        sqlx::query("UPDATE runs SET state = 'succeeded', result = $1 WHERE id = 'old'")
            .bind(serde_json::to_string(&whole).unwrap())
            .execute(&mut conn)
            .await
            .unwrap();
        let back = store.run("old").await.unwrap().unwrap();
        assert_eq!(back.attempts, history);
        assert_eq!(back.result, Some(finished));
    }

    /// An attempt's `recorded_at` is when it was saved: writing the run's result later keeps it.
    #[tokio::test]
    async fn recorded_at_is_when_the_attempt_was_saved() {
        use sqlx::Connection;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redraft.db");
        let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
        store.insert_run(&held("t", &json!({"prompt": "p"}))).await.unwrap();
        let history = vec![attempt(1, 0.5, Some(json!(1))), attempt(2, 1.0, Some(json!(2)))];
        store.save_attempt("t", W, &history[0]).await.unwrap();
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
        const TIMES: &str = "SELECT recorded_at FROM attempts WHERE run_id = 't' ORDER BY iteration";
        let saved: Vec<i64> = sqlx::query_scalar(TIMES).fetch_all(&mut conn).await.unwrap();
        // Wait for the clock to move on, so that a rewrite would show.
        while now_ms() <= saved[0] + 5 {
            tokio::task::yield_now().await;
        }
        store.finish_run(&result("t", RunStatus::Succeeded, history), W).await.unwrap();
        let after: Vec<i64> = sqlx::query_scalar(TIMES).fetch_all(&mut conn).await.unwrap();
        assert_eq!(after[0], saved[0], "attempt 1 keeps the time it was saved");
        assert!(after[1] > saved[0], "attempt 2 was first recorded with the result: {after:?}");
    }

    /// Several processes opening a new file at once (a server and `redraft runs list`) all get
    /// a working store: the migrations are applied once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn stores_opened_at_once_on_a_new_file_all_work() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redraft.db").to_str().unwrap().to_owned();
        let opening: Vec<_> = (0..8)
            .map(|_| {
                let path = path.clone();
                tokio::spawn(async move { SqliteStore::open(&path).await })
            })
            .collect();
        for (i, store) in opening.into_iter().enumerate() {
            let store = store.await.unwrap().unwrap();
            store.insert_run(&queued(&format!("r{i}"), &SPEC)).await.unwrap();
        }
        assert_eq!(SqliteStore::open(&path).await.unwrap().queue_depth().await.unwrap(), 8);
    }

    /// The file is in WAL mode with foreign keys enforced.
    #[tokio::test]
    async fn the_file_is_in_wal_mode() {
        use sqlx::Connection;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redraft.db");
        let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
        store.insert_run(&held("r", &json!({"prompt": "p"}))).await.unwrap();
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode").fetch_one(&mut conn).await.unwrap();
        assert_eq!(mode, "wal");
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\' ORDER BY name",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap();
        assert_eq!(tables, ["attempts", "runs"]);
    }

    /// `:memory:` works with concurrent writers (one connection, so one database).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_memory_store_is_one_database() {
        let store: Arc<dyn Store> = redraft_store::open(":memory:").await.unwrap();
        store.insert_run(&queued("m", &spec("p"))).await.unwrap();
        assert_eq!(store.claim_next(&lease(W)).await.unwrap().map(|c| c.run_id).as_deref(), Some("m"));
        let tasks: Vec<_> = (1..=10)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move { store.save_attempt("m", W, &attempt(i, 0.1, Some(json!(i)))).await })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert_eq!(store.run("m").await.unwrap().unwrap().attempts.len(), 10);
        let other = SqliteStore::open("sqlite::memory:").await.unwrap();
        assert!(other.run("m").await.unwrap().is_none(), "each memory store is its own database");
    }

    /// Two stores on one file (a server and `redraft runs …` in another process) write at the
    /// same time without "database is locked".
    /// A write that fails after changing something (here a trigger refusing to delete an
    /// attempt, the last step of writing a result) leaves nothing of itself, and the writes
    /// made in the same batch are all stored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_write_failing_halfway_leaves_nothing_and_fails_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redraft.db");
        let store = Arc::new(SqliteStore::open(path.to_str().unwrap()).await.unwrap());
        for r in 0..20 {
            let run_id = format!("h{r:02}");
            store.insert_run(&held(&run_id, &SPEC)).await.unwrap();
            store.save_attempt(&run_id, W, &attempt(1, 0.5, Some(json!(r)))).await.unwrap();
        }
        let db = rusqlite::Connection::open(&path).unwrap();
        db.execute_batch(
            "CREATE TRIGGER refuse BEFORE DELETE ON attempts WHEN OLD.run_id = 'h07'
             BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END;",
        )
        .unwrap();
        drop(db);
        // Each result drops attempt 1 (its history is attempt 2 alone): for `h07`, after the
        // run's row was written.
        let results: Vec<RunResult> = (0..20)
            .map(|r| result(&format!("h{r:02}"), RunStatus::Succeeded, vec![attempt(2, 1.0, Some(json!(r)))]))
            .collect();
        let outcomes = futures_util::future::join_all(results.iter().map(|result| store.finish_run(result, W))).await;
        for (r, outcome) in outcomes.into_iter().enumerate() {
            let run_id = format!("h{r:02}");
            let stored = store.run(&run_id).await.unwrap().unwrap();
            if r == 7 {
                let error = outcome.unwrap_err();
                assert!(error.to_string().contains("refused by a trigger"), "{error}");
                assert_eq!(stored.state, RunState::Running, "nothing of the failed write is kept");
                assert_eq!(stored.result, None);
                assert_eq!(stored.attempts, vec![attempt(1, 0.5, Some(json!(r)))]);
            } else {
                outcome.unwrap_or_else(|e| panic!("{run_id}: {e}"));
                assert_eq!(stored.state, RunState::Succeeded, "{run_id}");
                assert_eq!(stored.attempts, results[r].history, "{run_id}");
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_stores_share_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redraft.db");
        let first = Arc::new(SqliteStore::open(path.to_str().unwrap()).await.unwrap());
        let second = Arc::new(SqliteStore::open(path.to_str().unwrap()).await.unwrap());
        let tasks: Vec<_> = (0..16)
            .map(|r| {
                let store = if r % 2 == 0 { first.clone() } else { second.clone() };
                tokio::spawn(async move {
                    let run_id = format!("s{r}");
                    store.insert_run(&held(&run_id, &spec("p"))).await?;
                    for i in 1..=5 {
                        store.save_attempt(&run_id, W, &attempt(i, 0.5, Some(json!(i)))).await?;
                    }
                    Ok::<_, StoreError>(())
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert_eq!(first.unfinished().await.unwrap().len(), 16);
        assert_eq!(second.run("s0").await.unwrap().unwrap().attempts.len(), 5);
    }

    /// A place that cannot hold a database is an `Open` error naming it.
    #[tokio::test]
    async fn a_bad_location_is_an_open_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, "not a directory").unwrap();
        let location = file.join("redraft.db");
        let err = SqliteStore::open(location.to_str().unwrap()).await.unwrap_err();
        assert!(matches!(&err, StoreError::Open { location: l, .. } if l == location.to_str().unwrap()), "{err:?}");
        assert!(err.to_string().starts_with(&format!("cannot open the store `{}`", location.display())), "{err}");

        let garbage = dir.path().join("garbage.db");
        std::fs::write(&garbage, vec![7u8; 8192]).unwrap();
        let err = redraft_store::open(garbage.to_str().unwrap()).await.unwrap_err();
        assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL without a server

/// A PostgreSQL URL that cannot be reached is an `Open` error without the password.
#[tokio::test]
async fn an_unreachable_postgres_is_an_open_error_without_its_password() {
    let err = redraft_store::open("postgres://app:s3cret@127.0.0.1:1/app").await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert!(text.starts_with("cannot open the store `postgres://app:***@127.0.0.1:1/app`: "), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}

fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// A run that stopped awaiting a person: listed as `awaiting_input`, never claimed nor resumed;
/// an answer is kept with it and puts it back in the queue (or with the worker that continues
/// it), once; an abort ends it as failed, with its escalation.
async fn a_run_awaiting_an_answer(store: Arc<dyn Store>) {
    let history = vec![attempt(1, 0.2, Some(json!([1]))), attempt(2, 0.3, Some(json!([2])))];
    for id in ["wait-a", "wait-b", "wait-c"] {
        store.insert_run(&held(id, &json!({"prompt": "p"}))).await.unwrap();
        for a in &history {
            store.save_attempt(id, W, a).await.unwrap();
        }
        let mut stopped = result(id, RunStatus::Failed, history.clone());
        stopped.status = RunStatus::AwaitingInput;
        store.finish_run(&stopped, W).await.unwrap();
    }
    let stored = store.run("wait-a").await.unwrap().unwrap();
    assert_eq!(stored.state, RunState::AwaitingInput);
    let stopped = stored.result.unwrap();
    assert_eq!(stopped.status, RunStatus::AwaitingInput);
    assert_eq!(stopped.escalation.unwrap().question, "Where is the city?");
    let waiting =
        store.list(&RunFilter { state: Some(RunState::AwaitingInput), ..RunFilter::default() }).await.unwrap();
    assert_eq!(waiting.len(), 3);
    assert!(store.claim_many(&lease("w2"), 10).await.unwrap().is_empty(), "an awaiting run is not claimed");
    assert!(store.unfinished().await.unwrap().is_empty(), "nor resumed as unfinished");
    assert_eq!(store.claim_run("wait-a", &lease("w2"), true).await.unwrap(), Claim::Finished(RunState::AwaitingInput));

    // Answered: queued for any worker, the answer kept with the run, the attempts as they were.
    let reply = PersonReply {
        question: "Where is the city?".into(),
        answer: "Toledo, OH".into(),
        max_iterations: 3,
        after_iteration: 2,
        answered_at: Some("2026-11-24T10:00:00.000Z".into()),
    };
    store.answer_run("wait-a", &reply, None).await.unwrap();
    let stored = store.run("wait-a").await.unwrap().unwrap();
    assert_eq!((stored.state, stored.result.is_none()), (RunState::Queued, true));
    assert_eq!(stored.answers, vec![reply.clone()]);
    assert_eq!(stored.attempts, history);
    assert!(matches!(
        store.answer_run("wait-a", &reply, None).await,
        Err(StoreError::NotAwaiting { state: RunState::Queued, .. })
    ));
    assert!(matches!(store.abort_run("wait-a").await, Err(StoreError::NotAwaiting { .. })));
    let claimed: Vec<String> =
        store.claim_many(&lease("w2"), 10).await.unwrap().into_iter().map(|c| c.run_id).collect();
    assert_eq!(claimed, ["wait-a"]);

    // Answered by the worker that continues it: held by that worker at once.
    store.answer_run("wait-c", &reply, Some(&lease("w3"))).await.unwrap();
    let stored = store.run("wait-c").await.unwrap().unwrap();
    assert_eq!(stored.state, RunState::Running);
    assert_eq!(stored.holder.map(|h| h.worker_id).as_deref(), Some("w3"));
    store.save_attempt("wait-c", "w3", &attempt(3, 1.0, Some(json!([3])))).await.unwrap();

    // Aborted: failed, with the result it stopped with.
    let aborted = store.abort_run("wait-b").await.unwrap();
    assert_eq!((aborted.status, aborted.history.len()), (RunStatus::Failed, 2));
    assert!(aborted.escalation.is_some());
    let stored = store.run("wait-b").await.unwrap().unwrap();
    assert_eq!((stored.state, stored.result), (RunState::Failed, Some(aborted)));
    assert!(matches!(store.abort_run("wait-b").await, Err(StoreError::NotAwaiting { state: RunState::Failed, .. })));
    assert!(matches!(store.answer_run("nope", &reply, None).await, Err(StoreError::NotFound { .. })));
}
