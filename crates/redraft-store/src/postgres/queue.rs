//! The queue: claiming runs (expired leases first, then the oldest queued), renewing and
//! releasing leases, cancel requests, withdrawals and the queue's depth.

use std::time::{Duration, Instant};

use redraft_core::store::{Claim, Claimed, Lease, Renewal, RunState, StoreError};
use sqlx::postgres::PgPool;
use sqlx::{Postgres, Transaction};

use super::reads::{RunWithAttempts, run_with_attempts_columns};
use super::{PostgresStore, abandon};
use crate::pg_signal::announce;
use crate::rows::{decide_claim, failed, lease_ms, renewal};

/// Leases renewed per statement.
const RENEW_SLICE: usize = 128;
/// How often at most a claimer looks for runs whose lease expired, when its last look found
/// none: each look reads every running run (thousands in a burst) to find the few, if any,
/// whose worker died, and a claim is made for every batch of free slots.
const LOOK_FOR_EXPIRED_EVERY: Duration = Duration::from_millis(500);

/// Claim the oldest runs (at most `$3`) whose worker stopped renewing its lease (never the
/// claimer's own: it is alive, so it is still running it), and read them with their attempts.
const CLAIM_EXPIRED: &str = concat!(
    "UPDATE runs SET state = 'running', worker_id = $1, lease_until = redraft_now_ms() + $2,
         updated_at = redraft_now_ms()
     WHERE id IN (SELECT id FROM runs
                  WHERE state = 'running' AND (lease_until IS NULL OR lease_until < redraft_now_ms()) AND NOT local
                      AND worker_id IS DISTINCT FROM $1
                  ORDER BY created_at, seq LIMIT $3 FOR UPDATE SKIP LOCKED)
     RETURNING ",
    run_with_attempts_columns!()
);

/// Claim the oldest queued runs (at most `$3`), and read them.
const CLAIM_QUEUED: &str = concat!(
    "UPDATE runs SET state = 'running', worker_id = $1, lease_until = redraft_now_ms() + $2,
         updated_at = redraft_now_ms()
     WHERE id IN (SELECT id FROM runs WHERE state = 'queued' AND NOT local ORDER BY created_at, seq
                  LIMIT $3 FOR UPDATE SKIP LOCKED)
     RETURNING ",
    run_with_attempts_columns!()
);

/// Make `run_id` running under `lease`.
async fn take(tx: &mut Transaction<'static, Postgres>, run_id: &str, lease: &Lease<'_>) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE runs SET state = 'running', worker_id = $2, lease_until = redraft_now_ms() + $3,
             updated_at = redraft_now_ms()
         WHERE id = $1",
    )
    .bind(run_id)
    .bind(lease.worker_id)
    .bind(lease_ms(lease.ttl))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub(super) async fn claim_many(
    store: &PostgresStore,
    lease: &Lease<'_>,
    limit: usize,
) -> Result<Vec<Claimed>, StoreError> {
    let worker_id = lease.worker_id;
    let action = || format!("claim runs for worker `{worker_id}`");
    let mut left = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut claimed = Vec::new();
    // Runs whose worker stopped renewing first (they are older), then the queue; rows
    // another claimer has locked are skipped, never waited for.
    for (statement, takeover) in [(CLAIM_EXPIRED, true), (CLAIM_QUEUED, false)] {
        if left <= 0 {
            break;
        }
        let looked = || store.expired_looked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let recent = |(by, at): &(String, Instant)| by == worker_id && at.elapsed() < LOOK_FOR_EXPIRED_EVERY;
        if takeover && looked().as_ref().is_some_and(recent) {
            continue;
        }
        let rows = sqlx::query_as::<_, RunWithAttempts>(statement)
            .bind(worker_id)
            .bind(lease_ms(lease.ttl))
            .bind(left)
            .fetch_all(&store.pool)
            .await
            .map_err(|e| failed(action(), e))?;
        let found = i64::try_from(rows.len()).unwrap_or(0);
        if takeover {
            // Found fewer than asked for: none left until a lease expires again.
            *looked() = (found < left).then(|| (worker_id.to_owned(), Instant::now()));
        }
        left -= found;
        for row in rows {
            let run_id = row.run.id.clone();
            // A run that cannot be read here is still claimed: reading it again reports why.
            let run = row.into_stored().ok().map(Box::new);
            claimed.push(Claimed { run_id, takeover, run });
        }
    }
    Ok(claimed)
}

pub(super) async fn claim_run(
    store: &PostgresStore,
    run_id: &str,
    lease: &Lease<'_>,
    force: bool,
) -> Result<Claim, StoreError> {
    let action = || format!("claim run `{run_id}` for worker `{}`", lease.worker_id);
    let mut tx = store.write(action).await?;
    let row = sqlx::query_as::<_, (String, Option<String>, Option<i64>, i64)>(
        "SELECT state, worker_id, lease_until, redraft_now_ms() FROM runs WHERE id = $1 FOR UPDATE",
    )
    .bind(run_id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(|e| failed(action(), e))?;
    let Some((state, holder, lease_until, now)) = row else {
        abandon(tx).await;
        return Err(StoreError::NotFound { run_id: run_id.to_owned() });
    };
    let state = match crate::rows::state(run_id, &state) {
        Ok(state) => state,
        Err(e) => {
            abandon(tx).await;
            return Err(e);
        }
    };
    let claim = match decide_claim(state, holder, lease_until, lease.worker_id, now, force) {
        Ok(claim) => claim,
        Err(other) => {
            abandon(tx).await;
            return Ok(other);
        }
    };
    take(&mut tx, run_id, lease).await.map_err(|e| failed(action(), e))?;
    tx.commit().await.map_err(|e| failed(action(), e))?;
    Ok(claim)
}

pub(super) async fn renew(store: &PostgresStore, lease: &Lease<'_>, run_ids: &[String]) -> Result<Renewal, StoreError> {
    let worker_id = lease.worker_id;
    let mut rows = Vec::with_capacity(run_ids.len());
    // In slices, each its own statement: an update holds the locks of the rows it renewed
    // until it commits, and a run's writes wait for them meanwhile. The rows are locked in
    // the order of their ids, as results written together lock theirs: a renewal and a
    // batch of results sharing runs wait for each other, never deadlock.
    for ids in run_ids.chunks(RENEW_SLICE) {
        let renewed = sqlx::query_as::<_, (String, bool)>(
            "WITH held AS MATERIALIZED (
                 SELECT id FROM runs WHERE worker_id = $1 AND state = 'running' AND id = ANY($3)
                 ORDER BY id FOR UPDATE)
             UPDATE runs SET lease_until = redraft_now_ms() + $2 FROM held
             WHERE runs.id = held.id AND runs.worker_id = $1 AND runs.state = 'running'
             RETURNING runs.id, runs.cancel_requested",
        )
        .bind(worker_id)
        .bind(lease_ms(lease.ttl))
        .bind(ids)
        .fetch_all(&store.pool)
        .await
        .map_err(|e| failed(format!("renew the leases of worker `{worker_id}`"), e))?;
        rows.extend(renewed);
    }
    Ok(renewal(rows))
}

pub(super) async fn release(store: &PostgresStore, run_id: &str, worker_id: &str) -> Result<bool, StoreError> {
    let released = sqlx::query(
        "UPDATE runs SET state = 'queued', worker_id = NULL, lease_until = NULL, updated_at = redraft_now_ms()
         WHERE id = $1 AND worker_id = $2 AND state = 'running'",
    )
    .bind(run_id)
    .bind(worker_id)
    .execute(&store.pool)
    .await
    .map_err(|e| failed(format!("put run `{run_id}` back in the queue"), e))?;
    let released = released.rows_affected() > 0;
    if released {
        announce(&store.pool, store.signal.channel()).await;
    }
    Ok(released)
}

pub(super) async fn request_cancel(store: &PostgresStore, run_id: &str) -> Result<RunState, StoreError> {
    let action = || format!("cancel run `{run_id}`");
    let mut tx = store.write(action).await?;
    sqlx::query("UPDATE runs SET cancel_requested = TRUE WHERE id = $1 AND state IN ('queued', 'running')")
        .bind(run_id)
        .execute(&mut *tx)
        .await
        .map_err(|e| failed(action(), e))?;
    let state = sqlx::query_scalar::<_, String>("SELECT state FROM runs WHERE id = $1")
        .bind(run_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| failed(action(), e))?;
    tx.commit().await.map_err(|e| failed(action(), e))?;
    let state = state.ok_or_else(|| StoreError::NotFound { run_id: run_id.to_owned() })?;
    crate::rows::state(run_id, &state)
}

pub(super) async fn withdraw(store: &PostgresStore, run_id: &str) -> Result<bool, StoreError> {
    let removed = sqlx::query("DELETE FROM runs WHERE id = $1 AND state = 'queued'")
        .bind(run_id)
        .execute(&store.pool)
        .await
        .map_err(|e| failed(format!("withdraw run `{run_id}`"), e))?;
    Ok(removed.rows_affected() > 0)
}

/// How many runs wait in the queue.
pub(super) async fn queue_depth(pool: &PgPool) -> Result<u64, StoreError> {
    let n = sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM runs WHERE state = 'queued'")
        .fetch_one(pool)
        .await
        .map_err(|e| failed("count the queued runs", e))?;
    Ok(u64::try_from(n).unwrap_or(0))
}
