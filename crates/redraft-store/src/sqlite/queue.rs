//! The queue: claiming runs (expired leases first, then the oldest queued), renewing and
//! releasing leases, cancel requests, withdrawals and the queue's depth.

use redraft_core::store::{Claim, Claimed, Lease, Renewal, RunState, StoreError};
use sqlx::{Sqlite, Transaction};

use super::{SqliteStore, abandon, now_ms};
use crate::rows::{decide_claim, failed, lease_ms, renewal};

/// Make `run_id` running under `lease`.
async fn take(
    tx: &mut Transaction<'static, Sqlite>,
    run_id: &str,
    lease: &Lease<'_>,
    now: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE runs SET state = 'running', worker_id = $2, lease_until = $3, updated_at = $4 WHERE id = $1")
        .bind(run_id)
        .bind(lease.worker_id)
        .bind(now.saturating_add(lease_ms(lease.ttl)))
        .bind(now)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub(super) async fn claim_many(
    store: &SqliteStore,
    lease: &Lease<'_>,
    limit: usize,
) -> Result<Vec<Claimed>, StoreError> {
    let worker_id = lease.worker_id;
    let action = || format!("claim runs for worker `{worker_id}`");
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let now = now_ms();
    let mut tx = store.write(action).await?;
    // Runs whose worker stopped renewing first (they are older), then the queue. Never a
    // run of this worker's own: it is alive (it is asking), so it is still running it.
    let expired = sqlx::query_scalar::<_, String>(
        "SELECT id FROM runs WHERE state = 'running' AND (lease_until IS NULL OR lease_until < $1) AND NOT local
             AND worker_id IS NOT $2
         ORDER BY created_at, seq LIMIT $3",
    )
    .bind(now)
    .bind(worker_id)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await
    .map_err(|e| failed(action(), e))?;
    let left = limit.saturating_sub(i64::try_from(expired.len()).unwrap_or(0));
    let queued = if left > 0 {
        sqlx::query_scalar::<_, String>(
            "SELECT id FROM runs WHERE state = 'queued' AND NOT local ORDER BY created_at, seq LIMIT $1",
        )
        .bind(left)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| failed(action(), e))?
    } else {
        Vec::new()
    };
    let claimed: Vec<Claimed> = expired
        .into_iter()
        .map(|run_id| Claimed { run_id, takeover: true, run: None })
        .chain(queued.into_iter().map(|run_id| Claimed { run_id, takeover: false, run: None }))
        .collect();
    for c in &claimed {
        take(&mut tx, &c.run_id, lease, now).await.map_err(|e| failed(action(), e))?;
    }
    tx.commit().await.map_err(|e| failed(action(), e))?;
    Ok(claimed)
}

pub(super) async fn claim_run(
    store: &SqliteStore,
    run_id: &str,
    lease: &Lease<'_>,
    force: bool,
) -> Result<Claim, StoreError> {
    let action = || format!("claim run `{run_id}` for worker `{}`", lease.worker_id);
    let now = now_ms();
    let mut tx = store.write(action).await?;
    let row = sqlx::query_as::<_, (String, Option<String>, Option<i64>)>(
        "SELECT state, worker_id, lease_until FROM runs WHERE id = $1",
    )
    .bind(run_id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(|e| failed(action(), e))?;
    let Some((state, holder, lease_until)) = row else {
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
    take(&mut tx, run_id, lease, now).await.map_err(|e| failed(action(), e))?;
    tx.commit().await.map_err(|e| failed(action(), e))?;
    Ok(claim)
}

pub(super) async fn renew(store: &SqliteStore, lease: &Lease<'_>, run_ids: &[String]) -> Result<Renewal, StoreError> {
    let worker_id = lease.worker_id;
    if run_ids.is_empty() {
        return Ok(Renewal::default());
    }
    let ids = serde_json::to_string(run_ids).map_err(|e| StoreError::Query {
        action: format!("renew the leases of worker `{worker_id}`"),
        message: e.to_string(),
    })?;
    let rows = sqlx::query_as::<_, (String, bool)>(
        "UPDATE runs SET lease_until = $2
         WHERE worker_id = $1 AND state = 'running' AND id IN (SELECT value FROM json_each($3))
         RETURNING id, cancel_requested",
    )
    .bind(worker_id)
    .bind(now_ms().saturating_add(lease_ms(lease.ttl)))
    .bind(ids)
    .fetch_all(&store.writer)
    .await
    .map_err(|e| failed(format!("renew the leases of worker `{worker_id}`"), e))?;
    Ok(renewal(rows))
}

pub(super) async fn release(store: &SqliteStore, run_id: &str, worker_id: &str) -> Result<bool, StoreError> {
    let released = sqlx::query(
        "UPDATE runs SET state = 'queued', worker_id = NULL, lease_until = NULL, updated_at = $3
         WHERE id = $1 AND worker_id = $2 AND state = 'running'",
    )
    .bind(run_id)
    .bind(worker_id)
    .bind(now_ms())
    .execute(&store.writer)
    .await
    .map_err(|e| failed(format!("put run `{run_id}` back in the queue"), e))?;
    Ok(released.rows_affected() > 0)
}

pub(super) async fn request_cancel(store: &SqliteStore, run_id: &str) -> Result<RunState, StoreError> {
    let action = || format!("cancel run `{run_id}`");
    let mut tx = store.write(action).await?;
    sqlx::query("UPDATE runs SET cancel_requested = 1 WHERE id = $1 AND state IN ('queued', 'running')")
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

pub(super) async fn withdraw(store: &SqliteStore, run_id: &str) -> Result<bool, StoreError> {
    let removed = sqlx::query("DELETE FROM runs WHERE id = $1 AND state = 'queued'")
        .bind(run_id)
        .execute(&store.writer)
        .await
        .map_err(|e| failed(format!("withdraw run `{run_id}`"), e))?;
    Ok(removed.rows_affected() > 0)
}

pub(super) async fn queue_depth(store: &SqliteStore) -> Result<u64, StoreError> {
    let n = sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM runs WHERE state = 'queued'")
        .fetch_one(&store.reader)
        .await
        .map_err(|e| failed("count the queued runs", e))?;
    Ok(u64::try_from(n).unwrap_or(0))
}
