//! A run's life, written as it happens: inserted, its attempts saved one by one (or with its
//! result), its result written, each at its own time; writes to a run that is not stored.

use std::sync::Arc;

use redraft_core::HaltReason;
use redraft_core::record::{AttemptRecord, RunStatus};
use redraft_store::{Claim, RunFilter, RunState, Store, StoreError};
use serde_json::json;

use crate::values::{W, attempt, held, lease, not_found, queued, result, spec, summary};

/// insert → running → attempts visible one by one → an iteration saved again replaces it →
/// finish → the exact result is rebuilt, and the summary follows along.
pub(crate) async fn lifecycle_is_written_as_it_happens(store: Arc<dyn Store>) {
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
pub(crate) async fn failed_run_keeps_its_whole_history(store: Arc<dyn Store>) {
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
pub(crate) async fn a_last_attempt_is_written_with_the_result(store: Arc<dyn Store>) {
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

/// Each attempt's own start and end times read back as written, after the run finished.
pub(crate) async fn attempt_times_are_kept(store: Arc<dyn Store>) {
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

/// Writes to a run that is not stored fail with `NotFound`; reading one gives `None`; a second
/// insert of the same id is refused.
pub(crate) async fn unknown_runs_are_not_found(store: Arc<dyn Store>) {
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
