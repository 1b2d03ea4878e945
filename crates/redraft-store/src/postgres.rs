//! The PostgreSQL store: several servers and workers share one database.
//!
//! Times come from the database's clock (`redraft_now_ms()`, the transaction's start time), so
//! the leases of workers on different machines are compared against one clock. A claim is one
//! `UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id`: concurrent
//! claimers skip each other's rows instead of waiting or taking the same run.
//!
//! This module holds the store and its [`Store`] impl, which hands each call to the module of
//! its concern: `connect` (the pool and the migrations), `writes` (the writes every run makes),
//! `queue` (claims, leases, cancel requests), `awaiting` (runs awaiting an answer) and `reads`.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Instant;

use redraft_core::record::{AttemptRecord, PersonReply, RunResult};
use redraft_core::store::{
    Claim, Claimed, Lease, NewRun, Renewal, RunFilter, RunState, RunSummary, Store, StoreError, StoredRun,
};
use sqlx::postgres::PgPool;
use sqlx::{Postgres, Transaction};

use crate::pg_batch::Inserts;
use crate::pg_finish::Finishes;
use crate::pg_signal::Signal;
use crate::rows::failed;

mod awaiting;
mod connect;
mod queue;
mod reads;
mod writes;

pub(crate) use writes::insert_queued;

/// Runs and attempts in a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// Queued runs, stored together (group commit).
    inserts: Inserts,
    /// Finished runs, written together (group commit).
    finishes: Finishes,
    /// Runs queued by other processes, as they announce them.
    signal: Arc<Signal>,
    /// Runs finished by other processes, as they announce them.
    finished: Arc<Signal>,
    /// Which worker last looked for expired leases through this store and found no more, and
    /// when (a look skips the looker's own runs, so it says nothing for another worker).
    expired_looked: Arc<Mutex<Option<(String, Instant)>>>,
    /// The URL without its password.
    location: String,
}

impl PostgresStore {
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
}

/// End at once a transaction that changes nothing. A dropped one is rolled back only when its
/// connection is next used, and the row locks it took (`FOR UPDATE`) are held until then:
/// claims (`SKIP LOCKED`) would pass the row over, and writes to it would wait.
async fn abandon(tx: Transaction<'static, Postgres>) {
    if let Err(e) = tx.rollback().await {
        tracing::debug!("rolling back a transaction that changed nothing: {e}");
    }
}

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn insert_run(&self, new: &NewRun<'_>) -> Result<(), StoreError> {
        writes::insert_run(self, new).await
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
        writes::save_attempt(self, run_id, worker_id, attempt).await
    }

    async fn finish_run(&self, result: &RunResult, worker_id: &str) -> Result<(), StoreError> {
        writes::finish_run(self, result, worker_id).await
    }

    async fn run(&self, run_id: &str) -> Result<Option<StoredRun>, StoreError> {
        reads::run(self, run_id).await
    }

    async fn results(&self, run_ids: &[String]) -> Result<Vec<(String, RunResult)>, StoreError> {
        reads::results(self, run_ids).await
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

    async fn queued_elsewhere(&self) {
        self.signal.queued().await;
    }

    async fn finished_elsewhere(&self) -> Option<Vec<String>> {
        self.finished.finished().await
    }

    async fn queue_depth(&self) -> Result<u64, StoreError> {
        queue::queue_depth(&self.pool).await
    }
}
