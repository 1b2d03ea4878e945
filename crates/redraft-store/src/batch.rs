//! Group commit for the SQLite store. SQLite has one writer at a time; a server running
//! thousands of runs at once makes three writes per run or more (stored, each attempt,
//! finished). Each write waiting for a transaction of its own makes the writer the
//! bottleneck, so the writes that every run makes go through one task that takes all those
//! waiting and makes them in one transaction: one `BEGIN IMMEDIATE` and one commit for the
//! batch. Each write still succeeds or fails on its own (its checks — the holder of the run,
//! the bound on the queue — run inside the batch, in order), and no caller is answered before
//! the commit that holds its write: a write acknowledged is a write stored.

use std::time::{SystemTime, UNIX_EPOCH};

use redraft_core::store::StoreError;
use sqlx::SqlitePool;
use tokio::sync::{mpsc, oneshot};

use crate::rows::failed;
use crate::sqlite::Write;

/// The most writes in one transaction (a bound on how long one commit keeps the others out).
const MAX_BATCH: usize = 512;

struct Job {
    write: Write,
    done: oneshot::Sender<Result<(), StoreError>>,
}

/// Where writes are sent to be batched.
#[derive(Debug, Clone)]
pub(crate) struct Batcher {
    jobs: mpsc::UnboundedSender<Job>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job").field("write", &self.write).finish_non_exhaustive()
    }
}

impl Batcher {
    /// Start the batching task over `writer` (the pool of the one writer connection). It ends
    /// when every `Batcher` is dropped.
    pub(crate) fn start(writer: SqlitePool) -> Self {
        let (jobs, queue) = mpsc::unbounded_channel();
        tokio::spawn(run(writer, queue));
        Self { jobs }
    }

    /// Make `write` in the next batch; answered once that batch is committed.
    pub(crate) async fn write(&self, write: Write) -> Result<(), StoreError> {
        let (done, answer) = oneshot::channel();
        let closed = || StoreError::Query { action: "write".into(), message: "the store is closed".into() };
        self.jobs.send(Job { write, done }).map_err(|_| closed())?;
        answer.await.unwrap_or_else(|_| Err(closed()))
    }
}

async fn run(writer: SqlitePool, mut queue: mpsc::UnboundedReceiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        commit(&writer, std::mem::take(&mut batch)).await;
    }
}

/// Make the writes of `batch` in one transaction and answer each.
async fn commit(writer: &SqlitePool, batch: Vec<Job>) {
    let mut tx = match writer.begin_with("BEGIN IMMEDIATE").await {
        Ok(tx) => tx,
        Err(e) => {
            let e = failed("begin a write", e);
            for job in batch {
                let _ = job.done.send(Err(copy(&e)));
            }
            return;
        }
    };
    let now = now_ms();
    let mut outcomes = Vec::with_capacity(batch.len());
    for job in &batch {
        outcomes.push(job.write.apply(&mut tx, now).await);
    }
    match tx.commit().await {
        Ok(()) => {
            for (job, outcome) in batch.into_iter().zip(outcomes) {
                let _ = job.done.send(outcome);
            }
        }
        Err(e) => {
            let e = failed("commit the writes", e);
            for job in batch {
                let _ = job.done.send(Err(copy(&e)));
            }
        }
    }
}

/// The same failure, for each caller of a batch that failed as a whole.
fn copy(e: &StoreError) -> StoreError {
    match e {
        StoreError::Query { action, message } => StoreError::Query { action: action.clone(), message: message.clone() },
        other => StoreError::Query { action: "write".into(), message: other.to_string() },
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
