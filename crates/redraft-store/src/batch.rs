//! Group commit for the SQLite store. SQLite has one writer at a time; a server running
//! thousands of runs at once makes three writes per run or more (stored, each attempt,
//! finished). Each write waiting for a transaction of its own makes the writer the
//! bottleneck, so the writes that every run makes go through one task that takes all those
//! waiting and makes them in one transaction: one `BEGIN IMMEDIATE` and one commit for the
//! batch. Each write still succeeds or fails on its own — its checks (the holder of the run,
//! the bound on the queue) run inside the batch, in order, before it changes anything, so a
//! refused write leaves nothing behind; a write that fails halfway (the database failing
//! between two of its statements) rolls the batch back, which is then made again with each
//! write in a savepoint — and no caller is answered before the commit that holds its write: a
//! write acknowledged is a write stored. (Savepoints for every write cost a sixth of the
//! batch: each copies the pages it touches to a journal first.)
//!
//! A batch is made on a blocking thread, with the writer connection's handle locked out of
//! sqlx's worker thread, through rusqlite: every statement then costs a call, not a round
//! trip between two threads (eight of them per run made the thread switches cost more than
//! SQLite itself).

use std::time::{SystemTime, UNIX_EPOCH};

use redraft_core::store::StoreError;
use rusqlite::{Connection, OptionalExtension, Statement, params};
use sqlx::SqlitePool;
use tokio::sync::{mpsc, oneshot};

use crate::rows::{AttemptColumns, failed};
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
        self.jobs.send(Job { write, done }).map_err(|_| closed())?;
        answer.await.unwrap_or_else(|_| Err(closed()))
    }
}

fn closed() -> StoreError {
    StoreError::Query { action: "write".into(), message: "the store is closed".into() }
}

async fn run(writer: SqlitePool, mut queue: mpsc::UnboundedReceiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        commit(&writer, std::mem::take(&mut batch)).await;
    }
}

/// Make the writes of `batch` in one transaction and answer each.
async fn commit(writer: &SqlitePool, batch: Vec<Job>) {
    let writer = writer.clone();
    let runtime = tokio::runtime::Handle::current();
    let made = tokio::task::spawn_blocking(move || {
        let outcomes = runtime.block_on(write_all(&writer, &batch));
        (batch, outcomes)
    })
    .await;
    // A batch whose thread panicked drops its jobs: each caller is told the store is closed.
    let Ok((batch, outcomes)) = made else { return };
    match outcomes {
        Ok(outcomes) => {
            for (job, outcome) in batch.into_iter().zip(outcomes) {
                let _ = job.done.send(outcome);
            }
        }
        Err(e) => {
            for job in batch {
                let _ = job.done.send(Err(copy(&e)));
            }
        }
    }
}

/// Lock the writer connection's handle and make the batch on it: each write's own outcome, or
/// the failure of the batch as a whole (nothing of it committed).
async fn write_all(writer: &SqlitePool, batch: &[Job]) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    let mut connection = writer.acquire().await.map_err(|e| failed("begin a write", e))?;
    let mut locked = connection.lock_handle().await.map_err(|e| failed("begin a write", e))?;
    let handle = locked.as_raw_handle();
    // SAFETY: `locked` keeps sqlx's worker thread off this handle (and its statements) until it
    // is dropped, after `db`: nothing else uses the handle meanwhile. `from_handle` does not
    // take ownership (dropping `db` neither closes the handle nor touches sqlx's statements),
    // and the handle and this rusqlite share one libsqlite3-sys, so the types and the library
    // are the same.
    #[allow(unsafe_code)]
    let db = unsafe { Connection::from_handle(handle.as_ptr()) }.map_err(|e| sql_failed("begin a write", &e))?;
    let outcomes = write_in(&db, batch);
    drop(db);
    drop(locked);
    outcomes
}

/// `BEGIN IMMEDIATE`, each write, `COMMIT` (`ROLLBACK` when that fails); when a write failed
/// halfway, the batch is rolled back and made again with each write in a savepoint.
fn write_in(db: &Connection, batch: &[Job]) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    match transaction(db, batch, Isolate::WhenHalfway) {
        Err(Failure::Halfway) => transaction(db, batch, Isolate::Always).map_err(Failure::into_error),
        made => made.map_err(Failure::into_error),
    }
}

/// Whether a write is made inside a savepoint of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isolate {
    /// Never; a write failing halfway fails the batch with [`Failure::Halfway`].
    WhenHalfway,
    Always,
}

/// Why a batch was not committed.
#[derive(Debug)]
enum Failure {
    /// A write failed after changing something: the batch must be made again, isolating each.
    Halfway,
    Store(StoreError),
}

impl Failure {
    fn into_error(self) -> StoreError {
        match self {
            Failure::Store(e) => e,
            Failure::Halfway => {
                StoreError::Query { action: "write".into(), message: "a write failed halfway through a batch".into() }
            }
        }
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}

fn transaction(db: &Connection, batch: &[Job], isolate: Isolate) -> Result<Vec<Result<(), StoreError>>, Failure> {
    db.execute_batch("BEGIN IMMEDIATE").map_err(|e| sql_failed("begin a write", &e))?;
    let outcomes = Prepared::new(db).map_err(Failure::from).and_then(|mut prepared| {
        let now = now_ms();
        batch.iter().map(|job| prepared.write(&job.write, now, isolate)).collect::<Result<Vec<_>, _>>()
    });
    let committed = outcomes.and_then(|outcomes| {
        db.execute_batch("COMMIT").map_err(|e| sql_failed("commit the writes", &e))?;
        Ok(outcomes)
    });
    if committed.is_err() && !db.is_autocommit() {
        let _ = db.execute_batch("ROLLBACK");
    }
    committed
}

/// The statements of a batch, prepared once for all its writes.
struct Prepared<'c> {
    /// Whether the write being made has changed something yet.
    changed: bool,
    savepoint: Statement<'c>,
    release: Statement<'c>,
    rollback: Statement<'c>,
    count_queued: Statement<'c>,
    insert: Statement<'c>,
    holder: Statement<'c>,
    save_attempt: Statement<'c>,
    keep_attempt: Statement<'c>,
    attempt_totals: Statement<'c>,
    finish: Statement<'c>,
    prune: Statement<'c>,
}

/// Inserting an attempt sets its `recorded_at`; saving it again (a resumed run remakes an
/// interrupted attempt) moves it to the new time.
const SAVE_ATTEMPT: &str = "INSERT INTO attempts (run_id, iteration, status, score, has_artifact, record, recorded_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
     ON CONFLICT (run_id, iteration) DO UPDATE SET
         status = excluded.status, score = excluded.score, has_artifact = excluded.has_artifact,
         record = excluded.record, recorded_at = excluded.recorded_at";

/// Writing a result's history keeps the time each attempt was first recorded, and leaves an
/// attempt stored as it is alone (the usual case: each was saved as it happened), so its row
/// is not written twice.
const KEEP_ATTEMPT: &str = "INSERT INTO attempts (run_id, iteration, status, score, has_artifact, record, recorded_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
     ON CONFLICT (run_id, iteration) DO UPDATE SET
         status = excluded.status, score = excluded.score, has_artifact = excluded.has_artifact,
         record = excluded.record
     WHERE attempts.record IS NOT excluded.record
         OR attempts.status IS NOT excluded.status
         OR attempts.score IS NOT excluded.score
         OR attempts.has_artifact IS NOT excluded.has_artifact";

impl<'c> Prepared<'c> {
    fn new(db: &'c Connection) -> Result<Self, StoreError> {
        let prepare = |sql: &str| db.prepare(sql).map_err(|e| sql_failed("prepare the writes", &e));
        Ok(Self {
            changed: false,
            savepoint: prepare("SAVEPOINT write")?,
            release: prepare("RELEASE write")?,
            rollback: prepare("ROLLBACK TO write")?,
            count_queued: prepare("SELECT COUNT(*) FROM runs WHERE state = 'queued'")?,
            insert: prepare(
                "INSERT INTO runs (id, seq, state, spec, created_at, updated_at, model, worker_id, lease_until, local, origin)
                 VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM runs), ?2, ?3, ?4, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (id) DO NOTHING",
            )?,
            holder: prepare("SELECT state, worker_id FROM runs WHERE id = ?1")?,
            save_attempt: prepare(SAVE_ATTEMPT)?,
            keep_attempt: prepare(KEEP_ATTEMPT)?,
            attempt_totals: prepare(
                "UPDATE runs SET updated_at = ?2,
                     iterations = (SELECT COUNT(*) FROM attempts WHERE run_id = ?1),
                     best_score = (SELECT MAX(score) FROM attempts WHERE run_id = ?1 AND has_artifact),
                     model = COALESCE(model, ?3)
                 WHERE id = ?1",
            )?,
            finish: prepare(
                "UPDATE runs SET state = ?2, halted_because = ?3, iterations = ?4, best_score = ?5, result = ?6,
                     updated_at = ?7, lease_until = NULL, model = COALESCE(model, ?8)
                 WHERE id = ?1",
            )?,
            prune: prepare(
                "DELETE FROM attempts WHERE run_id = ?1 AND iteration NOT IN (SELECT value FROM json_each(?2))",
            )?,
        })
    }

    /// Make one write, all or nothing: a write refused is refused before it changes anything,
    /// and the batch goes on with its outcome. A write failing after it changed something is
    /// rolled back to where it began when it is in a savepoint (`isolate`), and fails the
    /// batch with [`Failure::Halfway`] when not. When its savepoint cannot be made, undone or
    /// released, the batch fails as a whole (the outer error): committing it could keep half
    /// of that write.
    fn write(&mut self, write: &Write, now: i64, isolate: Isolate) -> Result<Result<(), StoreError>, Failure> {
        let action = || write.action();
        if isolate == Isolate::WhenHalfway {
            self.changed = false;
            let made = self.apply(write, now);
            if made.is_err() && self.changed {
                return Err(Failure::Halfway);
            }
            return Ok(made);
        }
        self.savepoint.execute([]).map_err(|e| sql_failed(action(), &e))?;
        let made = self.apply(write, now);
        if made.is_err() {
            self.rollback.execute([]).map_err(|e| sql_failed(action(), &e))?;
        }
        self.release.execute([]).map_err(|e| sql_failed(action(), &e))?;
        Ok(made)
    }

    fn apply(&mut self, write: &Write, now: i64) -> Result<(), StoreError> {
        let action = || write.action();
        let fail = |e: rusqlite::Error| sql_failed(action(), &e);
        match write {
            Write::Insert { run_id, spec, model, holder, max_queued, origin } => {
                if let Some(max) = max_queued {
                    let queued: i64 = self.count_queued.query_row([], |row| row.get(0)).map_err(fail)?;
                    let queued = u64::try_from(queued).unwrap_or(0);
                    if queued >= *max {
                        return Err(StoreError::QueueFull { queued });
                    }
                }
                let (state, worker_id, lease_until) = match holder {
                    Some((worker_id, ttl)) => ("running", Some(worker_id.as_str()), Some(now.saturating_add(*ttl))),
                    None => ("queued", None, None),
                };
                // One statement: failing, it changes nothing.
                let inserted = self
                    .insert
                    .execute(params![
                        run_id,
                        state,
                        spec,
                        now,
                        model,
                        worker_id,
                        lease_until,
                        origin.is_local(),
                        origin.as_str()
                    ])
                    .map_err(fail)?;
                if inserted == 0 {
                    return Err(StoreError::Query {
                        action: action(),
                        message: "a run with this id is already stored".into(),
                    });
                }
                Ok(())
            }
            Write::Attempt { run_id, worker_id, columns } => {
                self.check_holder(run_id, worker_id, false, &action)?;
                self.changed = true;
                upsert(&mut self.save_attempt, run_id, columns, now).map_err(fail)?;
                self.attempt_totals.execute(params![run_id, now, columns.model]).map_err(fail)?;
                Ok(())
            }
            Write::Finish { run_id, worker_id, columns, kept } => {
                self.check_holder(run_id, worker_id, true, &action)?;
                self.changed = true;
                self.finish
                    .execute(params![
                        run_id,
                        columns.state,
                        columns.halted_because,
                        columns.iterations,
                        columns.best_score,
                        columns.result,
                        now,
                        columns.model()
                    ])
                    .map_err(fail)?;
                for attempt in &columns.history {
                    upsert(&mut self.keep_attempt, run_id, attempt, now).map_err(fail)?;
                }
                self.prune.execute(params![run_id, kept]).map_err(fail)?;
                Ok(())
            }
        }
    }

    /// Fail unless `worker_id` holds the running run `run_id` (or, when `finished` is allowed,
    /// finished it: writing a result again is harmless).
    fn check_holder(
        &mut self,
        run_id: &str,
        worker_id: &str,
        finished: bool,
        action: &dyn Fn() -> String,
    ) -> Result<(), StoreError> {
        let row = self
            .holder
            .query_row([run_id], |row| Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?)))
            .optional()
            .map_err(|e| sql_failed(action(), &e))?;
        crate::rows::check_holder(run_id, row, worker_id, finished)
    }
}

fn upsert(statement: &mut Statement<'_>, run_id: &str, attempt: &AttemptColumns, now: i64) -> rusqlite::Result<usize> {
    statement.execute(params![
        run_id,
        attempt.iteration,
        attempt.status,
        attempt.score,
        attempt.has_artifact,
        attempt.record,
        now
    ])
}

fn sql_failed(action: impl Into<String>, error: &rusqlite::Error) -> StoreError {
    StoreError::Query { action: action.into(), message: error.to_string() }
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
