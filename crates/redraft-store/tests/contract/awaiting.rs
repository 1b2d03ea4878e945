//! Runs awaiting a person's answer: answered once, back in the queue or with the worker that
//! continues them, or aborted.

use std::sync::Arc;

use redraft_core::record::{PersonReply, RunStatus};
use redraft_store::{Claim, RunFilter, RunState, Store, StoreError};
use serde_json::json;

use crate::values::{W, attempt, held, lease, result};

/// A run that stopped awaiting a person: listed as `awaiting_input`, never claimed nor resumed;
/// an answer is kept with it and puts it back in the queue (or with the worker that continues
/// it), once; an abort ends it as failed, with its escalation.
pub(crate) async fn a_run_awaiting_an_answer(store: Arc<dyn Store>) {
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
