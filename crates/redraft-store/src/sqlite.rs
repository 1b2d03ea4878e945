//! The SQLite store: the default, one file (by default `.redraft/redraft.db`).
//!
//! Writes go through a pool of exactly one connection, each multi-statement write in a
//! `BEGIN IMMEDIATE` transaction, so writers in this process queue in the pool instead of
//! contending for SQLite's lock, and a writer in another process waits up to `busy_timeout`
//! (5 s) instead of failing. Reads use a few connections of their own: in WAL mode they never
//! block the writer nor wait for it.
//!
//! This module holds the store, its [`Store`] impl and the writes every run makes (handed to
//! the batcher, `batch`); the impl hands each other call to the module of its concern: `open`
//! (where the file is, the connections, the migrations), `queue` (claims, leases, cancel
//! requests), `awaiting` (runs awaiting an answer) and `reads`.

use std::time::{SystemTime, UNIX_EPOCH};

use redraft_core::record::{AttemptRecord, PersonReply, RunResult};
use redraft_core::store::{
    Claim, Claimed, Lease, NewRun, Origin, Renewal, RunFilter, RunState, RunSummary, Store, StoreError, StoredRun,
};
use sqlx::sqlite::SqlitePool;
use sqlx::{Sqlite, Transaction};

use crate::batch::Batcher;
use crate::rows::{AttemptColumns, ResultColumns, encode_spec, failed, lease_ms, model_of_spec};

mod awaiting;
mod open;
mod queue;
mod reads;

/// Runs and attempts in a SQLite database.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// Exactly one connection: all writes.
    writer: SqlitePool,
    /// The writes every run makes, made in batches on the writer.
    batch: Batcher,
    /// Reads; the writer itself for an in-memory database.
    reader: SqlitePool,
    location: String,
}

impl SqliteStore {
    /// Where this store was opened, as given.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Close the connections, waiting for them to finish (WAL is checkpointed by the last one).
    pub async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }

    async fn write(&self, action: impl Fn() -> String) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.writer.begin_with("BEGIN IMMEDIATE").await.map_err(|e| failed(action(), e))
    }
}

/// End at once a write that changes nothing. A dropped transaction is rolled back only when its
/// connection is next used, and other processes wait for its write lock until then.
async fn abandon(tx: Transaction<'static, Sqlite>) {
    if let Err(e) = tx.rollback().await {
        tracing::debug!("rolling back a write that changed nothing: {e}");
    }
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn insert_run(&self, new: &NewRun<'_>) -> Result<(), StoreError> {
        let write = Write::Insert {
            run_id: new.run_id.to_owned(),
            spec: encode_spec(new.run_id, new.spec)?,
            model: model_of_spec(new.spec),
            holder: new.holder.map(|lease| (lease.worker_id.to_owned(), lease_ms(lease.ttl))),
            max_queued: if new.holder.is_none() { new.max_queued } else { None },
            origin: new.origin,
        };
        self.batch.write(write).await
    }

    async fn claim_many(&self, lease: &Lease<'_>, limit: usize) -> Result<Vec<Claimed>, StoreError> {
        queue::claim_many(self, lease, limit).await
    }

    async fn claim_run(&self, run_id: &str, lease: &Lease<'_>, force: bool) -> Result<Claim, StoreError> {
        queue::claim_run(self, run_id, lease, force).await
    }

    async fn renew(&self, lease: &Lease<'_>, run_ids: &[String]) -> Result<Renewal, StoreError> {
        queue::renew(self, lease, run_ids).await
    }

    async fn release(&self, run_id: &str, worker_id: &str) -> Result<bool, StoreError> {
        queue::release(self, run_id, worker_id).await
    }

    async fn answer_run(
        &self,
        run_id: &str,
        reply: &PersonReply,
        holder: Option<&Lease<'_>>,
    ) -> Result<(), StoreError> {
        awaiting::answer_run(self, run_id, reply, holder).await
    }

    async fn abort_run(&self, run_id: &str) -> Result<RunResult, StoreError> {
        awaiting::abort_run(self, run_id).await
    }

    async fn request_cancel(&self, run_id: &str) -> Result<RunState, StoreError> {
        queue::request_cancel(self, run_id).await
    }

    async fn withdraw(&self, run_id: &str) -> Result<bool, StoreError> {
        queue::withdraw(self, run_id).await
    }

    async fn save_attempt(&self, run_id: &str, worker_id: &str, attempt: &AttemptRecord) -> Result<(), StoreError> {
        let columns = AttemptColumns::new(run_id, attempt)?;
        self.batch.write(Write::Attempt { run_id: run_id.to_owned(), worker_id: worker_id.to_owned(), columns }).await
    }

    async fn finish_run(&self, result: &RunResult, worker_id: &str) -> Result<(), StoreError> {
        let run_id = result.run_id.as_str();
        let columns = ResultColumns::new(result)?;
        let kept = serde_json::to_string(&columns.iterations_in_history())
            .map_err(|e| StoreError::Query { action: format!("finish run `{run_id}`"), message: e.to_string() })?;
        self.batch
            .write(Write::Finish { run_id: run_id.to_owned(), worker_id: worker_id.to_owned(), columns, kept })
            .await
    }

    async fn run(&self, run_id: &str) -> Result<Option<StoredRun>, StoreError> {
        reads::run(self, run_id).await
    }

    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        reads::list(self, filter).await
    }

    async fn unfinished(&self) -> Result<Vec<String>, StoreError> {
        reads::unfinished(self).await
    }

    async fn states(&self, run_ids: &[String]) -> Result<Vec<(String, RunState)>, StoreError> {
        reads::states(self, run_ids).await
    }

    async fn queue_depth(&self) -> Result<u64, StoreError> {
        queue::queue_depth(self).await
    }
}

/// One of the writes that go through the batcher: those every run makes.
#[derive(Debug)]
pub(crate) enum Write {
    Insert {
        run_id: String,
        spec: String,
        model: Option<String>,
        /// The worker holding it and its lease in milliseconds; `None`: queued.
        holder: Option<(String, i64)>,
        max_queued: Option<u64>,
        /// Where its request came from.
        origin: Origin,
    },
    Attempt {
        run_id: String,
        worker_id: String,
        columns: AttemptColumns,
    },
    Finish {
        run_id: String,
        worker_id: String,
        columns: ResultColumns,
        /// The iterations of the result's history, as a JSON array.
        kept: String,
    },
}

impl Write {
    /// What this write does, for an error.
    pub(crate) fn action(&self) -> String {
        match self {
            Write::Insert { run_id, .. } => format!("insert run `{run_id}`"),
            Write::Attempt { run_id, columns, .. } => format!("save attempt {} of run `{run_id}`", columns.iteration),
            Write::Finish { run_id, .. } => format!("finish run `{run_id}`"),
        }
    }
}
