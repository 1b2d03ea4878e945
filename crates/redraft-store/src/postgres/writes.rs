//! The writes every run makes: storing it, saving each attempt, finishing it (the queued runs
//! and the results written at once go through `pg_batch` and `pg_finish`).

use redraft_core::record::{AttemptRecord, RunResult};
use redraft_core::store::{Lease, NewRun, StoreError};
use sqlx::postgres::PgPool;

use super::PostgresStore;
use super::queue::queue_depth;
use crate::pg_batch::QueuedRun;
use crate::pg_finish::Finish;
use crate::pg_signal::announce;
use crate::rows::{AttemptColumns, ResultColumns, encode_spec, failed, lease_ms, model_of_spec};

/// Save an attempt of run `$1` held running by worker `$7`, in one statement (one round trip;
/// the run's row is locked only while it executes): the run's row is updated first, which
/// locks it and checks the holder (writes to one run are serialized, the run row always locked
/// before its attempts); the attempt is written only when that row was. Inserting an attempt
/// sets its `recorded_at`; saving it again (a resumed run remakes an interrupted attempt) moves
/// it to the new time. The summary columns count this attempt as the one being written (the
/// statement's snapshot does not see its own insert). Returns the iteration; no row when the
/// worker does not hold the run.
const SAVE_ATTEMPT: &str = "WITH run AS (
         UPDATE runs SET updated_at = redraft_now_ms(),
             iterations = (SELECT COUNT(*) FROM attempts WHERE run_id = $1 AND iteration <> $2) + 1,
             best_score = GREATEST(
                 (SELECT MAX(score) FROM attempts WHERE run_id = $1 AND has_artifact AND iteration <> $2),
                 CASE WHEN $5 THEN $4::DOUBLE PRECISION END),
             model = COALESCE(model, $8)
         WHERE id = $1 AND worker_id = $7 AND state = 'running'
         RETURNING id)
     INSERT INTO attempts (run_id, iteration, status, score, has_artifact, record, recorded_at)
     SELECT id, $2, $3, $4, $5, $6::json, redraft_now_ms() FROM run
     ON CONFLICT (run_id, iteration) DO UPDATE SET
         status = excluded.status, score = excluded.score, has_artifact = excluded.has_artifact,
         record = excluded.record, recorded_at = excluded.recorded_at
     RETURNING iteration";

/// Store `run` on its own: queued (without `holder`), or running under `holder`. One statement:
/// the bound on waiting runs is checked as the row is inserted (approximate under concurrent
/// inserts, by at most the number of API nodes).
async fn insert(pool: &PgPool, channel: &str, run: &QueuedRun, holder: Option<Lease<'_>>) -> Result<(), StoreError> {
    let run_id = run.run_id.as_str();
    let action = || format!("insert run `{run_id}`");
    let (state, worker_id, ttl, max_queued) = match holder {
        Some(lease) => ("running", Some(lease.worker_id), Some(lease_ms(lease.ttl)), None),
        None => ("queued", None, None, run.max_queued),
    };
    let inserted = sqlx::query(
        "INSERT INTO runs (id, state, spec, created_at, updated_at, model, worker_id, lease_until, local, origin)
         SELECT $1, $2, $3::json, redraft_now_ms(), redraft_now_ms(), $4, $5, redraft_now_ms() + $6, $7, $9
         WHERE $8::BIGINT IS NULL OR (SELECT COUNT(*) FROM runs WHERE state = 'queued') < $8::BIGINT
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(run_id)
    .bind(state)
    .bind(&run.spec)
    .bind(&run.model)
    .bind(worker_id)
    .bind(ttl)
    .bind(run.origin.is_local())
    .bind(max_queued)
    .bind(run.origin.as_str())
    .execute(pool)
    .await
    .map_err(|e| failed(action(), e))?;
    if inserted.rows_affected() == 0 {
        let exists = sqlx::query_scalar::<_, i32>("SELECT 1 FROM runs WHERE id = $1")
            .bind(run_id)
            .fetch_optional(pool)
            .await
            .map_err(|e| failed(action(), e))?;
        if exists.is_none() {
            return Err(StoreError::QueueFull { queued: queue_depth(pool).await? });
        }
        return Err(StoreError::Query { action: action(), message: "a run with this id is already stored".into() });
    }
    if holder.is_none() {
        announce(pool, channel).await;
    }
    Ok(())
}

/// Store `run` as queued, on its own.
pub(crate) async fn insert_queued(pool: &PgPool, channel: &str, run: &QueuedRun) -> Result<(), StoreError> {
    insert(pool, channel, run, None).await
}

pub(super) async fn insert_run(store: &PostgresStore, new: &NewRun<'_>) -> Result<(), StoreError> {
    let spec = encode_spec(new.run_id, new.spec)?;
    let run = QueuedRun {
        run_id: new.run_id.to_owned(),
        spec,
        model: model_of_spec(new.spec),
        origin: new.origin,
        max_queued: new.max_queued.map(|m| i64::try_from(m).unwrap_or(i64::MAX)),
    };
    match new.holder {
        // Queued: stored together with the others waiting to be (group commit).
        None => store.inserts.insert(run).await,
        Some(lease) => insert(&store.pool, store.signal.channel(), &run, Some(lease)).await,
    }
}

pub(super) async fn save_attempt(
    store: &PostgresStore,
    run_id: &str,
    worker_id: &str,
    attempt: &AttemptRecord,
) -> Result<(), StoreError> {
    let action = || format!("save attempt {} of run `{run_id}`", attempt.iteration);
    let columns = AttemptColumns::new(run_id, attempt)?;
    let saved = sqlx::query_scalar::<_, i64>(SAVE_ATTEMPT)
        .bind(run_id)
        .bind(columns.iteration)
        .bind(columns.status)
        .bind(columns.score)
        .bind(columns.has_artifact)
        .bind(&columns.record)
        .bind(worker_id)
        .bind(&columns.model)
        .fetch_optional(&store.pool)
        .await
        .map_err(|e| failed(action(), e))?;
    match saved {
        Some(_) => Ok(()),
        None => Err(not_holding(store, run_id, worker_id, false, &action).await),
    }
}

pub(super) async fn finish_run(store: &PostgresStore, result: &RunResult, worker_id: &str) -> Result<(), StoreError> {
    let run_id = result.run_id.as_str();
    let action = || format!("finish run `{run_id}`");
    let finish =
        Finish { run_id: run_id.to_owned(), worker_id: worker_id.to_owned(), columns: ResultColumns::new(result)? };
    if store.finishes.finish(finish).await? {
        Ok(())
    } else {
        Err(not_holding(store, run_id, worker_id, true, &action).await)
    }
}

/// Why worker `worker_id` could not write to run `run_id`: it is not stored, or the worker
/// does not hold it (running, or when `finished` is allowed, finished by it).
async fn not_holding(
    store: &PostgresStore,
    run_id: &str,
    worker_id: &str,
    finished: bool,
    action: &(dyn Fn() -> String + Sync),
) -> StoreError {
    let row = sqlx::query_as::<_, (String, Option<String>)>("SELECT state, worker_id FROM runs WHERE id = $1")
        .bind(run_id)
        .fetch_optional(&store.pool)
        .await;
    match row {
        Err(e) => failed(action(), e),
        // Held after all: the holder changed between the write and this read.
        Ok(row) => crate::rows::check_holder(run_id, row, worker_id, finished)
            .err()
            .unwrap_or_else(|| StoreError::LeaseLost { run_id: run_id.to_owned(), worker_id: worker_id.to_owned() }),
    }
}
