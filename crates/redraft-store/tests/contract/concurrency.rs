//! Many runs and writes at once (which the stores group-commit): none locks another out, and
//! each is answered for itself, stored or refused alone.

use std::sync::Arc;

use redraft_core::record::{AttemptRecord, RunResult, RunStatus};
use redraft_store::{NewRun, RunFilter, RunState, Store, StoreError};
use serde_json::json;

use crate::values::{SPEC, W, attempt, held, lease, queued, result, spec};

/// A server running many runs at once: 20 runs, each writing 5 attempts (and reading its run
/// back after each) concurrently, never fail with "database is locked".
pub(crate) async fn concurrent_runs_never_lock(store: Arc<dyn Store>) {
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

/// Hundreds of runs queued at once (stored together by the store's group commit) are each
/// answered for themselves: every acknowledged run is stored, a duplicate id is refused alone,
/// and a bound on the queue admits exactly as many as it has room for.
pub(crate) async fn runs_queued_at_once_are_each_answered_for_themselves(store: Arc<dyn Store>) {
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

/// Many writes at once (which the SQLite store commits together), half of them refused (the
/// writer does not hold the run, or the run id is taken): every other write is stored, every
/// refused one reports why.
pub(crate) async fn refused_writes_among_many_leave_the_others_stored(store: Arc<dyn Store>) {
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
pub(crate) async fn results_written_at_once_are_each_written_or_refused(store: Arc<dyn Store>) {
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
