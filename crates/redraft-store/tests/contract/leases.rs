//! Leases: renewed, expired and taken over (the old holder's writes refused from then on),
//! and renewals racing the results of the runs they renew.

use std::sync::Arc;
use std::time::Duration;

use redraft_core::record::RunStatus;
use redraft_store::{Claim, Lease, RunState, Store, StoreError};
use serde_json::json;

use crate::values::{SPEC, W, attempt, held, lease, now_ms, queued, result};

/// Leases: renewing keeps a run; a run whose lease expired is taken over by the next claim (and
/// by an explicit claim), a live one never — unless forced; the old holder's writes are refused
/// from then on, and its renewal no longer names the run.
pub(crate) async fn expired_leases_are_taken_over(store: Arc<dyn Store>) {
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

/// A worker renews the leases of the runs it holds while their results are written, batched
/// with each other: every renewal and every result succeeds (the two lock the same rows, in
/// one order, so neither is ever chosen as a deadlock victim), and a run is held until its
/// result is written.
pub(crate) async fn renewals_racing_results_all_succeed(store: Arc<dyn Store>) {
    // A race: three rounds make it likely to be lost at least once were the order not kept.
    for round in 0..3 {
        race_renewals_with_results(&store, round).await;
    }
}

pub(crate) async fn race_renewals_with_results(store: &Arc<dyn Store>, round: usize) {
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
