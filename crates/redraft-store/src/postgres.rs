//! The PostgreSQL store: several servers and workers share one database.
//!
//! Times come from the database's clock (`redraft_now_ms()`, the transaction's start time), so
//! the leases of workers on different machines are compared against one clock. A claim is one
//! `UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id`: concurrent
//! claimers skip each other's rows instead of waiting or taking the same run.

use std::str::FromStr;
use std::time::Duration;

use redraft_core::record::{AttemptRecord, RunResult};
use redraft_core::store::{RunFilter, RunState, RunSummary, Store, StoreError, StoredRun};
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Postgres, Transaction};

use crate::Queue;
use crate::rows::{
    AttemptColumns, AttemptRow, ResultColumns, RunRow, SummaryRow, encode_spec, failed, lease_ms, model_of_spec,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// Connections per store.
const CONNECTIONS: u32 = 10;
/// How long to wait for a connection before failing.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// Runs listed when the filter sets no limit.
const DEFAULT_LIMIT: u32 = 50;

/// Runs and attempts in a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// The URL without its password.
    location: String,
}

impl PostgresStore {
    /// Connect to `url` (`postgres://user:password@host:port/database`; add
    /// `?options[search_path]=SCHEMA` to use a schema other than `public`) and apply the
    /// migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let location = redact(url);
        let open_error = |message: String| StoreError::Open { location: location.clone(), message };
        let options = PgConnectOptions::from_str(url).map_err(|e| open_error(e.to_string()))?;
        // One connection first: a pool would retry a refused connection until its timeout, and
        // a wrong URL should fail at once.
        let probe = PgConnection::connect_with(&options).await.map_err(|e| open_error(e.to_string()))?;
        probe.close().await.map_err(|e| open_error(e.to_string()))?;
        let pool = PgPoolOptions::new()
            .max_connections(CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await
            .map_err(|e| open_error(e.to_string()))?;
        MIGRATOR.run(&pool).await.map_err(|e| open_error(format!("cannot apply the migrations: {e}")))?;
        tracing::debug!(location, "opened the PostgreSQL store");
        Ok(Self { pool, location })
    }

    /// Where this store is, without the password.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Close the connections, waiting for them to finish.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    async fn write(&self, action: impl Fn() -> String) -> Result<Transaction<'static, Postgres>, StoreError> {
        self.pool.begin().await.map_err(|e| failed(action(), e))
    }

    /// Whether the run exists, locking its row until the transaction ends (writes to one run
    /// are serialized; the run row is always locked before its attempts).
    async fn lock(tx: &mut Transaction<'static, Postgres>, run_id: &str) -> Result<bool, sqlx::Error> {
        let found = sqlx::query_scalar::<_, String>("SELECT id FROM runs WHERE id = $1 FOR UPDATE")
            .bind(run_id)
            .fetch_optional(&mut **tx)
            .await?;
        Ok(found.is_some())
    }
}

/// `url` with the password replaced by `***`, for messages and logs.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let Some((credentials, host)) = authority.rsplit_once('@') else { return url.to_owned() };
    match credentials.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
        None => url.to_owned(),
    }
}

const UPSERT_ATTEMPT: &str =
    "INSERT INTO attempts (run_id, iteration, status, score, has_artifact, record, recorded_at)
     VALUES ($1, $2, $3, $4, $5, $6::json, redraft_now_ms())
     ON CONFLICT (run_id, iteration) DO UPDATE SET
         status = excluded.status, score = excluded.score, has_artifact = excluded.has_artifact,
         record = excluded.record, recorded_at = excluded.recorded_at";

async fn upsert_attempt(
    tx: &mut Transaction<'static, Postgres>,
    run_id: &str,
    attempt: &AttemptColumns,
) -> Result<(), sqlx::Error> {
    sqlx::query(UPSERT_ATTEMPT)
        .bind(run_id)
        .bind(attempt.iteration)
        .bind(attempt.status)
        .bind(attempt.score)
        .bind(attempt.has_artifact)
        .bind(&attempt.record)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn insert_run(&self, run_id: &str, spec: &Value, state: RunState) -> Result<(), StoreError> {
        let action = || format!("insert run `{run_id}`");
        let spec_text = encode_spec(run_id, spec)?;
        let inserted = sqlx::query(
            "INSERT INTO runs (id, state, spec, created_at, updated_at, model)
             VALUES ($1, $2, $3::json, redraft_now_ms(), redraft_now_ms(), $4)
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(run_id)
        .bind(state.as_str())
        .bind(spec_text)
        .bind(model_of_spec(spec))
        .execute(&self.pool)
        .await
        .map_err(|e| failed(action(), e))?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::Query { action: action(), message: "a run with this id is already stored".into() });
        }
        Ok(())
    }

    async fn set_state(&self, run_id: &str, state: RunState) -> Result<(), StoreError> {
        let updated = sqlx::query(
            "UPDATE runs SET state = $2, updated_at = redraft_now_ms(),
                 worker_id = CASE WHEN $2 = 'queued' THEN NULL ELSE worker_id END,
                 lease_until = CASE WHEN $2 = 'running' THEN lease_until ELSE NULL END
             WHERE id = $1",
        )
        .bind(run_id)
        .bind(state.as_str())
        .execute(&self.pool)
        .await
        .map_err(|e| failed(format!("set the state of run `{run_id}` to {}", state.as_str()), e))?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::NotFound { run_id: run_id.to_owned() });
        }
        Ok(())
    }

    async fn save_attempt(&self, run_id: &str, attempt: &AttemptRecord) -> Result<(), StoreError> {
        let action = || format!("save attempt {} of run `{run_id}`", attempt.iteration);
        let columns = AttemptColumns::new(run_id, attempt)?;
        let mut tx = self.write(action).await?;
        if !Self::lock(&mut tx, run_id).await.map_err(|e| failed(action(), e))? {
            return Err(StoreError::NotFound { run_id: run_id.to_owned() });
        }
        upsert_attempt(&mut tx, run_id, &columns).await.map_err(|e| failed(action(), e))?;
        sqlx::query(
            "UPDATE runs SET updated_at = redraft_now_ms(),
                 iterations = (SELECT COUNT(*) FROM attempts WHERE run_id = $1),
                 best_score = (SELECT MAX(score) FROM attempts WHERE run_id = $1 AND has_artifact),
                 model = COALESCE(model, $2)
             WHERE id = $1",
        )
        .bind(run_id)
        .bind(&columns.model)
        .execute(&mut *tx)
        .await
        .map_err(|e| failed(action(), e))?;
        tx.commit().await.map_err(|e| failed(action(), e))
    }

    async fn finish_run(&self, result: &RunResult) -> Result<(), StoreError> {
        let run_id = result.run_id.as_str();
        let action = || format!("finish run `{run_id}`");
        let columns = ResultColumns::new(result)?;
        let mut tx = self.write(action).await?;
        if !Self::lock(&mut tx, run_id).await.map_err(|e| failed(action(), e))? {
            return Err(StoreError::NotFound { run_id: run_id.to_owned() });
        }
        sqlx::query(
            "UPDATE runs SET state = $2, halted_because = $3, iterations = $4, best_score = $5, result = $6::json,
                 updated_at = redraft_now_ms(), lease_until = NULL
             WHERE id = $1",
        )
        .bind(run_id)
        .bind(columns.state)
        .bind(columns.halted_because)
        .bind(columns.iterations)
        .bind(columns.best_score)
        .bind(&columns.result)
        .execute(&mut *tx)
        .await
        .map_err(|e| failed(action(), e))?;
        for attempt in &columns.history {
            upsert_attempt(&mut tx, run_id, attempt).await.map_err(|e| failed(action(), e))?;
        }
        sqlx::query("DELETE FROM attempts WHERE run_id = $1 AND iteration <> ALL($2)")
            .bind(run_id)
            .bind(columns.iterations_in_history())
            .execute(&mut *tx)
            .await
            .map_err(|e| failed(action(), e))?;
        tx.commit().await.map_err(|e| failed(action(), e))
    }

    async fn run(&self, run_id: &str) -> Result<Option<StoredRun>, StoreError> {
        let action = || format!("read run `{run_id}`");
        // One snapshot for the run and its attempts.
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(|e| failed(action(), e))?;
        let row = sqlx::query_as::<_, RunRow>(
            "SELECT id, state, spec::text AS spec, created_at, updated_at, result::text AS result
             FROM runs WHERE id = $1",
        )
        .bind(run_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| failed(action(), e))?;
        let Some(row) = row else { return Ok(None) };
        let attempts = sqlx::query_as::<_, AttemptRow>(
            "SELECT iteration, record::text AS record FROM attempts WHERE run_id = $1 ORDER BY iteration",
        )
        .bind(run_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| failed(action(), e))?;
        tx.commit().await.map_err(|e| failed(action(), e))?;
        row.into_stored(attempts).map(Some)
    }

    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        let limit = i64::from(filter.limit.unwrap_or(DEFAULT_LIMIT));
        let rows = match filter.state {
            Some(state) => {
                sqlx::query_as::<_, SummaryRow>(
                    "SELECT id, state, created_at, updated_at, iterations, halted_because, best_score, model
                     FROM runs WHERE state = $1 ORDER BY created_at DESC, seq DESC LIMIT $2",
                )
                .bind(state.as_str())
                .bind(limit)
                .fetch_all(&self.pool)
                .await
            }
            None => {
                sqlx::query_as::<_, SummaryRow>(
                    "SELECT id, state, created_at, updated_at, iterations, halted_because, best_score, model
                     FROM runs ORDER BY created_at DESC, seq DESC LIMIT $1",
                )
                .bind(limit)
                .fetch_all(&self.pool)
                .await
            }
        }
        .map_err(|e| failed("list runs", e))?;
        rows.into_iter().map(SummaryRow::into_summary).collect()
    }

    async fn unfinished(&self) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar::<_, String>(
            "SELECT id FROM runs WHERE state IN ('running', 'queued') ORDER BY created_at, seq",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|e| failed("list unfinished runs", e))
    }
}

#[async_trait::async_trait]
impl Queue for PostgresStore {
    async fn claim_queued(&self, worker_id: &str, lease: Duration) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar::<_, String>(
            "UPDATE runs SET state = 'running', worker_id = $1, lease_until = redraft_now_ms() + $2,
                 updated_at = redraft_now_ms()
             WHERE id = (SELECT id FROM runs WHERE state = 'queued' ORDER BY created_at, seq
                         LIMIT 1 FOR UPDATE SKIP LOCKED)
             RETURNING id",
        )
        .bind(worker_id)
        .bind(lease_ms(lease))
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| failed(format!("claim a queued run for worker `{worker_id}`"), e))
    }

    async fn heartbeat(&self, run_id: &str, worker_id: &str, lease: Duration) -> Result<bool, StoreError> {
        let action = || format!("renew the lease of worker `{worker_id}` on run `{run_id}`");
        let mut tx = self.write(action).await?;
        if !Self::lock(&mut tx, run_id).await.map_err(|e| failed(action(), e))? {
            return Err(StoreError::NotFound { run_id: run_id.to_owned() });
        }
        let renewed = sqlx::query(
            "UPDATE runs SET lease_until = redraft_now_ms() + $3, updated_at = redraft_now_ms()
             WHERE id = $1 AND worker_id = $2 AND state = 'running'",
        )
        .bind(run_id)
        .bind(worker_id)
        .bind(lease_ms(lease))
        .execute(&mut *tx)
        .await
        .map_err(|e| failed(action(), e))?;
        tx.commit().await.map_err(|e| failed(action(), e))?;
        Ok(renewed.rows_affected() > 0)
    }

    async fn requeue_expired(&self) -> Result<u64, StoreError> {
        let requeued = sqlx::query(
            "UPDATE runs SET state = 'queued', worker_id = NULL, lease_until = NULL, updated_at = redraft_now_ms()
             WHERE state = 'running' AND lease_until IS NOT NULL AND lease_until < redraft_now_ms()",
        )
        .execute(&self.pool)
        .await
        .map_err(|e| failed("requeue runs whose lease expired", e))?;
        Ok(requeued.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(redact("postgres://app:secret@db:5432/app"), "postgres://app:***@db:5432/app");
        assert_eq!(redact("postgres://app:p@ss@db/app?sslmode=require"), "postgres://app:***@db/app?sslmode=require");
        assert_eq!(redact("postgres://app@db/app"), "postgres://app@db/app");
        assert_eq!(redact("postgresql://db/app"), "postgresql://db/app");
        assert_eq!(redact("not a url"), "not a url");
    }
}
