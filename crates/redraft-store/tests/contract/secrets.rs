//! Nothing the store keeps holds a known secret: a spec, an attempt (raw output, artifact,
//! issues), a result (escalation, error) and an answer that repeat an API key are stored with
//! `[redacted]` in its place, whatever writes them.

use std::sync::Arc;

use redraft_core::record::{PersonReply, RunStatus};
use redraft_core::{Issue, secrets};
use redraft_store::Store;
use serde_json::json;

use crate::values::{W, attempt, held, result};

const KEY: &str = "sk-store-contract-5e6f7a8b9c0d";

pub(crate) async fn known_secrets_are_never_written(store: Arc<dyn Store>) {
    secrets::register(KEY);
    let spec = json!({"prompt": format!("use the key {KEY}"), "provider": "local", "model": "qwen"});
    store.insert_run(&held("run-s", &spec)).await.unwrap();
    let mut first = attempt(1, 0.4, Some(json!({"key": KEY})));
    first.raw = format!("the key is {KEY}");
    first.issues.push(Issue::new("/key", "leak", format!("`{KEY}` is not a city")));
    store.save_attempt("run-s", W, &first).await.unwrap();
    let mut second = attempt(2, 0.5, Some(json!({"city": "Toledo"})));
    second.raw = format!("Bearer {KEY}");
    let mut finished = result("run-s", RunStatus::AwaitingInput, vec![first, second]);
    finished.escalation = Some(redraft_core::Escalation {
        summary: format!("the model kept saying {KEY}"),
        attempts: vec![format!("1: {KEY}")],
        recurring_issues: Vec::new(),
        pattern: None,
        question: format!("what is {KEY}?"),
    });
    store.finish_run(&finished, W).await.unwrap();
    let reply = PersonReply {
        question: format!("what is {KEY}?"),
        answer: format!("not {KEY}"),
        max_iterations: 1,
        after_iteration: 2,
        answered_at: None,
    };
    store.answer_run("run-s", &reply, None).await.unwrap();

    let stored = store.run("run-s").await.unwrap().unwrap();
    let text = serde_json::to_string(&json!({
        "spec": stored.spec,
        "attempts": stored.attempts,
        "result": stored.result,
        "answers": stored.answers,
    }))
    .unwrap();
    assert!(!text.contains(KEY), "{text}");
    assert_eq!(stored.spec["prompt"], "use the key [redacted]");
    assert_eq!(stored.attempts[0].raw, "the key is [redacted]");
    assert_eq!(stored.attempts[0].artifact, Some(json!({"key": "[redacted]"})));
    assert_eq!(stored.attempts[1].raw, "Bearer [redacted]");
    assert!(text.contains("`[redacted]` is not a city") && text.contains("not [redacted]"), "{text}");
}
