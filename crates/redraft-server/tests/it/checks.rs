//! A hostile answer cannot hold the server up: checks compute off the runtime's threads, so
//! `/healthz` answers and a run can be cancelled while one is being checked, on a runtime of
//! two threads; and an answer failing a million times keeps a thousand issues.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redraft::core::EvaluatorError;
use redraft::{EvalInput, Evaluator, Verdict};
use redraft_server::{AppState, router};
use redraft_testkit::processes::{eventually, eventually_async};
use redraft_testkit::{FakeOpenAi, reply};
use serde_json::{Value, json};

use crate::{Harness, WAIT, config, harness, harness_with, write_kind};

/// A check that computes until it is told to stop: it spins on its cancellation flag, counting
/// the checks that began and those that saw the flag. Should the flag never come, it gives up
/// after a minute, so that a broken runner fails the test instead of hanging it.
#[derive(Debug, Default)]
struct HangingEvaluator {
    started: AtomicUsize,
    stopped: AtomicUsize,
}

#[async_trait::async_trait]
impl Evaluator for HangingEvaluator {
    fn name(&self) -> &str {
        "hanging"
    }

    async fn evaluate(&self, input: EvalInput<'_>) -> Result<Verdict, EvaluatorError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        let t0 = Instant::now();
        while !input.cancel.is_cancelled() && t0.elapsed() < Duration::from_secs(60) {
            std::hint::spin_loop();
        }
        if input.cancel.is_cancelled() {
            self.stopped.fetch_add(1, Ordering::SeqCst);
        }
        Ok(Verdict::pass())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_more_checks_compute_than_the_runtime_has_threads() {
    let h = harness(Vec::new()).await;
    let hanging = Arc::new(HangingEvaluator::default());
    let evaluators: Vec<Arc<dyn Evaluator>> = vec![hanging.clone()];
    let checks: Vec<_> = (0..3)
        .map(|_| {
            let evaluators = evaluators.clone();
            tokio::spawn(async move { redraft::runner::verdict(&evaluators, &json!(1), &Value::Null, 1).await })
        })
        .collect();
    assert!(eventually(WAIT, || hanging.started.load(Ordering::SeqCst) == 3).await, "the checks never began");

    let health = tokio::time::timeout(WAIT, h.call("GET", "/healthz", None)).await.expect("/healthz did not answer");
    assert_eq!(health.status, 200, "{}", health.text);
    assert_eq!(hanging.stopped.load(Ordering::SeqCst), 0, "the checks were still computing");

    for check in &checks {
        check.abort();
    }
    assert!(eventually(WAIT, || hanging.stopped.load(Ordering::SeqCst) == 3).await, "the checks never saw their flag");
}

/// A kind whose rule costs the square of the answer's length: each item is compared with
/// every other one.
fn write_costly_kind(dir: &Path) {
    let kind = dir.join("kinds").join("costly");
    std::fs::create_dir_all(&kind).unwrap();
    std::fs::write(
        kind.join("kind.toml"),
        r#"description = "Items that all agree."

[[rules]]
code = "agree"
each = "self.items"
check = "self.items.all(other, other == item)"
path = "/items/{{ index }}"
message = "item {{ index }} disagrees"
"#,
    )
    .unwrap();
    std::fs::write(kind.join("schema.json"), r#"{"type": "object", "required": ["items"]}"#).unwrap();
    std::fs::write(kind.join("example.json"), r#"{"items": ["a"]}"#).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_cancelled_and_healthz_answers_while_a_hostile_answer_is_checked() {
    // 30,000 items: 900 million comparisons, far more than the test waits for.
    let items = vec!["a"; 30_000];
    let model = FakeOpenAi::start(vec![reply(&json!({"items": items}).to_string())]).await;
    let dir = tempfile::tempdir().unwrap();
    write_kind(dir.path());
    write_costly_kind(dir.path());
    let config = config(&model.base_url(), dir.path());
    let store = redraft::store::open(&config).await.unwrap();
    let state = AppState::new(config, store, Vec::new()).unwrap();
    let app = router(state.clone());
    let h = Harness { dir, model, state, app };

    let accepted =
        h.call("POST", "/v1/runs", Some(json!({"kind": "costly", "prompt": "Items?", "max_iterations": 1}))).await;
    assert_eq!(accepted.status, 202, "{}", accepted.text);
    let run_id = accepted.json["run_id"].as_str().unwrap().to_owned();
    let answered = eventually_async(WAIT, || async { h.model.calls().await >= 1 }).await;
    assert!(answered, "the model was never asked");

    for _ in 0..3 {
        let health = tokio::time::timeout(WAIT, h.call("GET", "/healthz", None)).await.expect("/healthz stalled");
        assert_eq!(health.status, 200);
    }
    let running = h.call("GET", &format!("/v1/runs/{run_id}"), None).await;
    assert_eq!(running.json["state"], "running", "the answer is still being checked: {}", running.text);

    let cancelled = tokio::time::timeout(WAIT, h.call("DELETE", &format!("/v1/runs/{run_id}"), None))
        .await
        .expect("the cancel was not answered");
    assert!(matches!(cancelled.status, 200 | 202), "{}", cancelled.text);
    assert_eq!(h.finished(&run_id).await["halted_because"], "cancelled");
}

#[tokio::test]
async fn an_answer_failing_a_million_times_keeps_the_first_thousand_issues() {
    let ones = format!("[{}]", vec!["1"; 1_000_000].join(","));
    let h = harness(vec![reply(&ones)]).await;
    let schema = json!({"type": "array", "items": {"type": "string"}});
    let a =
        h.call("POST", "/v1/iterate", Some(json!({"prompt": "Names?", "schema": schema, "max_iterations": 1}))).await;
    assert_eq!(a.json["halted_because"], "max_iterations", "{}", a.text.chars().take(500).collect::<String>());
    let issues = a.json["history"][0]["issues"].as_array().unwrap();
    assert_eq!(issues.len(), 1_001);
    assert_eq!(issues[999]["path"], "/999");
    assert_eq!(issues[1_000]["code"], "too_many_issues");
    assert_eq!(issues[1_000]["found"], 999_000);
    let stored = h.finished(a.json["run_id"].as_str().unwrap()).await;
    assert_eq!(stored["history"][0]["issues"].as_array().map(Vec::len), Some(1_001), "as stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_checks_at_once_are_bounded_and_the_rest_told_to_retry() {
    let h = Arc::new(harness_with(Vec::new(), Vec::new(), |c| c.policy.attempt_timeout = Duration::from_secs(5)).await);
    // A schema every string of a long answer meets 2^13 times: seconds of work each.
    let mut defs = serde_json::Map::new();
    for i in 0..13 {
        let next = json!({"$ref": format!("#/$defs/a{}", i + 1)});
        defs.insert(format!("a{i}"), json!({"allOf": [next.clone(), next]}));
    }
    defs.insert("a13".into(), json!({"type": "string"}));
    let schema = json!({"$defs": defs, "type": "array", "items": {"$ref": "#/$defs/a0"}});
    let answer: Vec<String> = (0..20_000).map(|i| format!("value {i}")).collect();
    let body = json!({"schema": schema, "artifact": answer});
    let at_once = std::thread::available_parallelism().map_or(2, |n| n.get()) * 2;
    let calls: Vec<_> = (0..at_once + 2)
        .map(|_| {
            let (h, body) = (h.clone(), body.clone());
            tokio::spawn(async move { h.call("POST", "/v1/validate", Some(body)).await })
        })
        .collect();
    let mut statuses = Vec::new();
    for call in calls {
        let answer = call.await.unwrap();
        if answer.status == 503 {
            assert_eq!(answer.json["error"]["code"], "busy", "{}", answer.text);
            assert!(answer.headers.contains_key("retry-after"), "{:?}", answer.headers);
        } else {
            // Past `attempt_timeout`, stopped and said so.
            assert_eq!(answer.status, 422, "{}", answer.text);
            assert_eq!(answer.json["issues"][0]["code"], "check_timeout", "{}", answer.text);
        }
        statuses.push(answer.status);
    }
    assert_eq!(statuses.iter().filter(|&&s| s == 503).count(), 2, "{statuses:?}");
    // The slots are free again once the checks stopped.
    let small = h.call("POST", "/v1/validate", Some(json!({"schema": {"type": "string"}, "artifact": "x"}))).await;
    assert_eq!(small.status, 200, "{}", small.text);
}
