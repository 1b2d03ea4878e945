//! What the PostgreSQL store does beyond the contract (skipped, visibly, without `DATABASE_URL`).

use std::time::Duration;

use redraft_core::record::RunStatus;
use redraft_store::StoreError;
use serde_json::json;

use crate::postgres_store;
use crate::values::{SPEC, W, attempt, held, lease, now_ms, queued, result, summary};

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
    let first = tokio::time::timeout(within, api.finished_elsewhere()).await.expect("the first wait reports at once");
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
