//! Runs awaiting a person's answer: an answer puts the run back in the queue (or with the
//! worker that continues it), an abort ends it as failed.

use redraft_core::record::{PersonReply, RunResult};
use redraft_core::store::{Lease, Store, StoreError};

use super::{PostgresStore, abandon};
use crate::pg_signal::announce;
use crate::rows::{failed, lease_ms};

pub(super) async fn answer_run(
    store: &PostgresStore,
    run_id: &str,
    reply: &PersonReply,
    holder: Option<&Lease<'_>>,
) -> Result<(), StoreError> {
    let action = || format!("answer run `{run_id}`");
    let mut tx = store.write(action).await?;
    let row = sqlx::query_as::<_, (String, Option<String>)>("SELECT state, answers FROM runs WHERE id = $1 FOR UPDATE")
        .bind(run_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| failed(action(), e))?;
    let Some((state, answers)) = row else {
        abandon(tx).await;
        return Err(StoreError::NotFound { run_id: run_id.to_owned() });
    };
    let answers = match crate::rows::answered(run_id, &state, answers.as_deref(), reply) {
        Ok(answers) => answers,
        Err(e) => {
            abandon(tx).await;
            return Err(e);
        }
    };
    // Queued for any worker (a run its own process started too), or held by the one that
    // continues it now.
    let (state, worker_id, lease) = match holder {
        Some(lease) => ("running", Some(lease.worker_id), Some(lease_ms(lease.ttl))),
        None => ("queued", None, None),
    };
    sqlx::query(
        "UPDATE runs SET state = $2, worker_id = $3, lease_until = redraft_now_ms() + $4, answers = $5, result = NULL,
             halted_because = NULL, cancel_requested = FALSE, local = CASE WHEN $3 IS NULL THEN FALSE ELSE local END,
             updated_at = redraft_now_ms()
         WHERE id = $1 AND state = 'awaiting_input'",
    )
    .bind(run_id)
    .bind(state)
    .bind(worker_id)
    .bind(lease)
    .bind(answers)
    .execute(&mut *tx)
    .await
    .map_err(|e| failed(action(), e))?;
    tx.commit().await.map_err(|e| failed(action(), e))?;
    if holder.is_none() {
        announce(&store.pool, store.signal.channel()).await;
    }
    Ok(())
}

pub(super) async fn abort_run(store: &PostgresStore, run_id: &str) -> Result<RunResult, StoreError> {
    let action = || format!("abort run `{run_id}`");
    let mut tx = store.write(action).await?;
    let row =
        sqlx::query_as::<_, (String, Option<String>)>("SELECT state, result::text FROM runs WHERE id = $1 FOR UPDATE")
            .bind(run_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| failed(action(), e))?;
    let Some((state, result)) = row else {
        abandon(tx).await;
        return Err(StoreError::NotFound { run_id: run_id.to_owned() });
    };
    let result = match crate::rows::aborted(run_id, &state, result.as_deref()) {
        Ok(result) => result,
        Err(e) => {
            abandon(tx).await;
            return Err(e);
        }
    };
    sqlx::query(
        "UPDATE runs SET state = 'failed', result = $2::json, updated_at = redraft_now_ms() WHERE id = $1 AND state = 'awaiting_input'",
    )
    .bind(run_id)
    .bind(result)
    .execute(&mut *tx)
    .await
    .map_err(|e| failed(action(), e))?;
    tx.commit().await.map_err(|e| failed(action(), e))?;
    store
        .run(run_id)
        .await?
        .and_then(|stored| stored.result)
        .ok_or_else(|| StoreError::NotFound { run_id: run_id.to_owned() })
}
