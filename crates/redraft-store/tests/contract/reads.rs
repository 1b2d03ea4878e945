//! What is written reads back as it was: JSON byte for byte, text-mode artifacts whole, and
//! the results of many runs in one read.

use std::sync::Arc;

use redraft_core::record::RunStatus;
use redraft_store::Store;
use serde_json::{Value, json};

use crate::values::{SPEC, W, attempt, held, queued, result, spec, text_attempt};

/// The results of many runs read at once are those of the runs that halted, each as a read of
/// that run gives it (history included); runs still queued or running, and unknown ones, are
/// left out.
pub(crate) async fn results_of_many_runs_in_one_read(store: Arc<dyn Store>) {
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
pub(crate) async fn json_reads_back_verbatim(store: Arc<dyn Store>) {
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
pub(crate) async fn raw_text_reads_back_as_the_artifact(store: Arc<dyn Store>) {
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
