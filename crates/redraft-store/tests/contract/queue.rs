//! The queue: claims are exclusive and oldest first; cancel requests, withdrawals and a full
//! queue.

use std::collections::HashSet;
use std::sync::Arc;

use redraft_core::record::RunStatus;
use redraft_store::{NewRun, Origin, RunFilter, RunState, Store, StoreError};
use serde_json::json;

use crate::values::{SPEC, W, held, lease, queued, result};

/// 8 workers claiming 30 queued runs get 30 distinct runs; the oldest goes first; runs held
/// under a live lease, and runs started by a user's own process, are not claimable.
pub(crate) async fn claims_are_exclusive(store: Arc<dyn Store>) {
    let w0 = lease("w0");
    assert_eq!(store.claim_next(&w0).await.unwrap(), None);
    store.insert_run(&held("busy", &json!({"prompt": "p"}))).await.unwrap();
    let local = NewRun { origin: Origin::Cli, ..queued("mine", &SPEC) };
    store.insert_run(&local).await.unwrap();
    let session = NewRun { origin: Origin::Mcp, ..queued("session", &SPEC) };
    store.insert_run(&session).await.unwrap();
    // Where each request came from is kept, for whoever continues the run.
    for (id, origin) in [("mine", Origin::Cli), ("session", Origin::Mcp), ("busy", Origin::Http)] {
        assert_eq!(store.run(id).await.unwrap().unwrap().origin, origin, "{id}");
    }
    let expected: HashSet<String> = (0..30).map(|i| format!("q{i:02}")).collect();
    for i in 0..30 {
        store.insert_run(&queued(&format!("q{i:02}"), &json!({"prompt": i}))).await.unwrap();
    }
    assert_eq!(store.queue_depth().await.unwrap(), 32);
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
    assert_eq!(store.queue_depth().await.unwrap(), 2, "the local runs stay queued for `runs resume`");
    assert_eq!(
        store
            .list(&RunFilter { state: Some(RunState::Running), limit: Some(100), ..RunFilter::default() })
            .await
            .unwrap()
            .len(),
        31
    );
}

/// Cancel requests reach the holder on its next renewal; a queued run can be withdrawn until a
/// worker claims it; a full queue refuses new queued runs but never runs started at once.
pub(crate) async fn cancel_withdraw_and_a_full_queue(store: Arc<dyn Store>) {
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
