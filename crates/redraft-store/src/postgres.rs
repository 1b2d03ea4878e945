//! The PostgreSQL store: several servers and workers share one database.
//!
//! Times come from the database's clock (`redraft_now_ms()`, the transaction's start time), so
//! the leases of workers on different machines are compared against one clock. A claim is one
//! `UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id`: concurrent
//! claimers skip each other's rows instead of waiting or taking the same run.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redraft_core::record::{AttemptRecord, PersonReply, RunResult};
use redraft_core::store::{
    Claim, Claimed, Lease, NewRun, Renewal, RunFilter, RunState, RunSummary, Store, StoreError, StoredRun,
};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Postgres, Transaction};

use crate::pg_batch::{Inserts, QueuedRun};
use crate::pg_finish::{Finish, Finishes};
use crate::pg_signal::{Signal, announce};
use crate::rows::{
    AttemptColumns, AttemptRow, ResultColumns, RunRow, SummaryRow, decide_claim, encode_spec, failed, lease_ms,
    model_of_spec, renewal,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// Connections per store.
const CONNECTIONS: u32 = 32;
/// How long a connection may stay unused before it is closed: a burst opens every connection
/// of the pool, and each keeps its buffers and statement cache here and a backend process on
/// the database until closed (the database's connection slots are shared by every node).
const CLOSE_IDLE_AFTER: Duration = Duration::from_secs(30);
/// How long a connection is used before it is closed and, when needed, opened again. A
/// connection keeps read and write buffers as large as the largest statement or result it
/// carried (a batch of finishes is up to 8 MiB), and a worker's claims go round every idle
/// connection of its pool (about 7 after a burst of 10,000 runs), so none stays unused long
/// enough for [`CLOSE_IDLE_AFTER`]: without a lifetime, what a burst grew is kept for good.
/// Reopening a connection a minute costs the database a few milliseconds.
const RECYCLE_AFTER: Duration = Duration::from_secs(60);
/// How long to wait for a connection before failing.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// Leases renewed per statement.
const RENEW_SLICE: usize = 128;
/// How often at most a claimer looks for runs whose lease expired, when its last look found
/// none: each look reads every running run (thousands in a burst) to find the few, if any,
/// whose worker died, and a claim is made for every batch of free slots.
const LOOK_FOR_EXPIRED_EVERY: Duration = Duration::from_millis(500);
/// Runs listed when the filter sets no limit.
const DEFAULT_LIMIT: u32 = 50;

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
            .idle_timeout(CLOSE_IDLE_AFTER)
            .max_lifetime(RECYCLE_AFTER)
            .connect_with(options)
            .await
            .map_err(|e| open_error(e.to_string()))?;
        MIGRATOR.run(&pool).await.map_err(|e| open_error(format!("cannot apply the migrations: {e}")))?;
        tracing::debug!(location, "opened the PostgreSQL store");
        let schema = sqlx::query_scalar::<_, Option<String>>("SELECT current_schema()")
            .fetch_one(&pool)
            .await
            .map_err(|e| open_error(e.to_string()))?
            .unwrap_or_else(|| "public".into());
        let channel = crate::pg_signal::channel(&schema);
        let inserts = Inserts::start(pool.clone(), channel.clone());
        let finish_channel = crate::pg_signal::finish_channel(&schema);
        let finishes = Finishes::start(pool.clone(), finish_channel.clone());
        let signal = Signal::queue(pool.clone(), channel);
        let finished = Signal::finish(pool.clone(), finish_channel);
        Ok(Self { pool, inserts, finishes, signal, finished, expired_looked: Arc::default(), location })
    }

    /// Where this store is, without the password.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Close the connections, waiting for them to finish.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Why worker `worker_id` could not write to run `run_id`: it is not stored, or the worker
    /// does not hold it (running, or when `finished` is allowed, finished by it).
    async fn not_holding(
        &self,
        run_id: &str,
        worker_id: &str,
        finished: bool,
        action: &(dyn Fn() -> String + Sync),
    ) -> StoreError {
        let row = sqlx::query_as::<_, (String, Option<String>)>("SELECT state, worker_id FROM runs WHERE id = $1")
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await;
        match row {
            Err(e) => failed(action(), e),
            // Held after all: the holder changed between the write and this read.
            Ok(row) => crate::rows::check_holder(run_id, row, worker_id, finished).err().unwrap_or_else(|| {
                StoreError::LeaseLost { run_id: run_id.to_owned(), worker_id: worker_id.to_owned() }
            }),
        }
    }

    async fn write(&self, action: impl Fn() -> String) -> Result<Transaction<'static, Postgres>, StoreError> {
        self.pool.begin().await.map_err(|e| failed(action(), e))
    }
}

/// Read runs (add the `WHERE`) with their attempts, as [`RunWithAttempts`], in one statement
/// (so one snapshot).
macro_rules! run_with_attempts {
    () => {
        concat!("SELECT ", run_with_attempts_columns!(), " FROM runs")
    };
}

/// The columns of [`RunWithAttempts`], for a `SELECT` or a `RETURNING`.
/// With a `spec` expression, the columns read in its place (`'null'` where the spec is not
/// wanted, so that it is neither sent nor parsed).
macro_rules! run_with_attempts_columns {
    () => {
        run_with_attempts_columns!("spec::text")
    };
    ($spec:literal) => {
        concat!(
            "id, state, ",
            $spec,
            " AS spec, created_at, updated_at, result::text AS result, worker_id, lease_until, answers,
         ARRAY(SELECT iteration FROM attempts WHERE run_id = runs.id ORDER BY iteration) AS iterations,
         ARRAY(SELECT record::text FROM attempts WHERE run_id = runs.id ORDER BY iteration) AS records"
        )
    };
}

/// A run's row and its attempts.
#[derive(sqlx::FromRow)]
struct RunWithAttempts {
    #[sqlx(flatten)]
    run: RunRow,
    iterations: Vec<i64>,
    records: Vec<String>,
}

impl RunWithAttempts {
    fn into_stored(self) -> Result<StoredRun, StoreError> {
        let Self { run, iterations, records } = self;
        let attempts =
            iterations.into_iter().zip(records).map(|(iteration, record)| AttemptRow { iteration, record }).collect();
        run.into_stored(attempts)
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

/// Text PostgreSQL takes as a parameter: it refuses NUL characters, which the listed specs
/// show as U+FFFD (see `list`).
fn no_nul(text: &str) -> String {
    text.replace('\0', "\u{fffd}")
}

/// End at once a transaction that changes nothing. A dropped one is rolled back only when its
/// connection is next used, and the row locks it took (`FOR UPDATE`) are held until then:
/// claims (`SKIP LOCKED`) would pass the row over, and writes to it would wait.
async fn abandon(tx: Transaction<'static, Postgres>) {
    if let Err(e) = tx.rollback().await {
        tracing::debug!("rolling back a transaction that changed nothing: {e}");
    }
}

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
        "INSERT INTO runs (id, state, spec, created_at, updated_at, model, worker_id, lease_until, local)
         SELECT $1, $2, $3::json, redraft_now_ms(), redraft_now_ms(), $4, $5, redraft_now_ms() + $6, $7
         WHERE $8::BIGINT IS NULL OR (SELECT COUNT(*) FROM runs WHERE state = 'queued') < $8::BIGINT
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(run_id)
    .bind(state)
    .bind(&run.spec)
    .bind(&run.model)
    .bind(worker_id)
    .bind(ttl)
    .bind(run.local)
    .bind(max_queued)
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

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn insert_run(&self, new: &NewRun<'_>) -> Result<(), StoreError> {
        let spec = encode_spec(new.run_id, new.spec)?;
        let run = QueuedRun {
            run_id: new.run_id.to_owned(),
            spec,
            model: model_of_spec(new.spec),
            local: new.local,
            max_queued: new.max_queued.map(|m| i64::try_from(m).unwrap_or(i64::MAX)),
        };
        match new.holder {
            // Queued: stored together with the others waiting to be (group commit).
            None => self.inserts.insert(run).await,
            Some(lease) => insert(&self.pool, self.signal.channel(), &run, Some(lease)).await,
        }
    }

    async fn claim_many(&self, lease: &Lease<'_>, limit: usize) -> Result<Vec<Claimed>, StoreError> {
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
            let looked = || self.expired_looked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let recent = |(by, at): &(String, Instant)| by == worker_id && at.elapsed() < LOOK_FOR_EXPIRED_EVERY;
            if takeover && looked().as_ref().is_some_and(recent) {
                continue;
            }
            let rows = sqlx::query_as::<_, RunWithAttempts>(statement)
                .bind(worker_id)
                .bind(lease_ms(lease.ttl))
                .bind(left)
                .fetch_all(&self.pool)
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

    async fn claim_run(&self, run_id: &str, lease: &Lease<'_>, force: bool) -> Result<Claim, StoreError> {
        let action = || format!("claim run `{run_id}` for worker `{}`", lease.worker_id);
        let mut tx = self.write(action).await?;
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

    async fn renew(&self, lease: &Lease<'_>, run_ids: &[String]) -> Result<Renewal, StoreError> {
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
            .fetch_all(&self.pool)
            .await
            .map_err(|e| failed(format!("renew the leases of worker `{worker_id}`"), e))?;
            rows.extend(renewed);
        }
        Ok(renewal(rows))
    }

    async fn release(&self, run_id: &str, worker_id: &str) -> Result<bool, StoreError> {
        let released = sqlx::query(
            "UPDATE runs SET state = 'queued', worker_id = NULL, lease_until = NULL, updated_at = redraft_now_ms()
             WHERE id = $1 AND worker_id = $2 AND state = 'running'",
        )
        .bind(run_id)
        .bind(worker_id)
        .execute(&self.pool)
        .await
        .map_err(|e| failed(format!("put run `{run_id}` back in the queue"), e))?;
        let released = released.rows_affected() > 0;
        if released {
            announce(&self.pool, self.signal.channel()).await;
        }
        Ok(released)
    }

    async fn answer_run(
        &self,
        run_id: &str,
        reply: &PersonReply,
        holder: Option<&Lease<'_>>,
    ) -> Result<(), StoreError> {
        let action = || format!("answer run `{run_id}`");
        let mut tx = self.write(action).await?;
        let row =
            sqlx::query_as::<_, (String, Option<String>)>("SELECT state, answers FROM runs WHERE id = $1 FOR UPDATE")
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
            announce(&self.pool, self.signal.channel()).await;
        }
        Ok(())
    }

    async fn abort_run(&self, run_id: &str) -> Result<RunResult, StoreError> {
        let action = || format!("abort run `{run_id}`");
        let mut tx = self.write(action).await?;
        let row = sqlx::query_as::<_, (String, Option<String>)>(
            "SELECT state, result::text FROM runs WHERE id = $1 FOR UPDATE",
        )
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
        self.run(run_id)
            .await?
            .and_then(|stored| stored.result)
            .ok_or_else(|| StoreError::NotFound { run_id: run_id.to_owned() })
    }

    async fn request_cancel(&self, run_id: &str) -> Result<RunState, StoreError> {
        let action = || format!("cancel run `{run_id}`");
        let mut tx = self.write(action).await?;
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

    async fn withdraw(&self, run_id: &str) -> Result<bool, StoreError> {
        let removed = sqlx::query("DELETE FROM runs WHERE id = $1 AND state = 'queued'")
            .bind(run_id)
            .execute(&self.pool)
            .await
            .map_err(|e| failed(format!("withdraw run `{run_id}`"), e))?;
        Ok(removed.rows_affected() > 0)
    }

    async fn save_attempt(&self, run_id: &str, worker_id: &str, attempt: &AttemptRecord) -> Result<(), StoreError> {
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
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| failed(action(), e))?;
        match saved {
            Some(_) => Ok(()),
            None => Err(self.not_holding(run_id, worker_id, false, &action).await),
        }
    }

    async fn finish_run(&self, result: &RunResult, worker_id: &str) -> Result<(), StoreError> {
        let run_id = result.run_id.as_str();
        let action = || format!("finish run `{run_id}`");
        let finish =
            Finish { run_id: run_id.to_owned(), worker_id: worker_id.to_owned(), columns: ResultColumns::new(result)? };
        if self.finishes.finish(finish).await? {
            Ok(())
        } else {
            Err(self.not_holding(run_id, worker_id, true, &action).await)
        }
    }

    async fn run(&self, run_id: &str) -> Result<Option<StoredRun>, StoreError> {
        // One statement, so one snapshot for the run and its attempts.
        let row = sqlx::query_as::<_, RunWithAttempts>(concat!(run_with_attempts!(), " WHERE id = $1"))
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| failed(format!("read run `{run_id}`"), e))?;
        row.map(RunWithAttempts::into_stored).transpose()
    }

    async fn results(&self, run_ids: &[String]) -> Result<Vec<(String, RunResult)>, StoreError> {
        if run_ids.is_empty() {
            return Ok(Vec::new());
        }
        // The results only: the specs (as long as the prompts) are not read.
        let rows = sqlx::query_as::<_, RunWithAttempts>(concat!(
            "SELECT ",
            run_with_attempts_columns!("'null'"),
            " FROM runs WHERE id = ANY($1) AND state IN ('succeeded', 'failed', 'awaiting_input')"
        ))
        .bind(run_ids)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| failed("read the results of runs", e))?;
        let mut results = Vec::with_capacity(rows.len());
        for row in rows {
            let stored = row.into_stored()?;
            if let Some(result) = stored.result {
                results.push((stored.run_id, result));
            }
        }
        Ok(results)
    }

    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        // The spec is read as `s`, with every `\u0000` in its text made U+FFFD first: PostgreSQL
        // cannot extract a field of JSON holding one, and a single such request (a prompt with
        // a NUL character) would otherwise fail every listing.
        let mut query = sqlx::QueryBuilder::new(
            "SELECT id, state, created_at, updated_at, iterations, halted_because, best_score, model,
                    s->>'kind' AS kind
             FROM runs, LATERAL (SELECT replace(spec::text, '\\u0000', '\\ufffd')::json AS s) AS safe WHERE TRUE",
        );
        if let Some(state) = filter.state {
            query.push(" AND state = ").push_bind(state.as_str());
        }
        if let Some(model) = &filter.model {
            query.push(" AND model = ").push_bind(no_nul(model));
        }
        if let Some(kind) = &filter.kind {
            query.push(" AND (s->>'kind') = ").push_bind(no_nul(kind));
        }
        if let Some(text) = filter.text.as_deref().filter(|t| !t.is_empty()) {
            query
                .push(" AND strpos(lower(id || ' ' || coalesce(model, '') || ' ' || coalesce((s->>'kind'), '') || ' ' || coalesce((s->>'prompt'), '')), lower(")
                .push_bind(no_nul(text))
                .push(")) > 0");
        }
        query
            .push(" ORDER BY created_at DESC, seq DESC LIMIT ")
            .push_bind(i64::from(filter.limit.unwrap_or(DEFAULT_LIMIT)))
            .push(" OFFSET ")
            .push_bind(i64::from(filter.offset.unwrap_or(0)));
        let rows =
            query.build_query_as::<SummaryRow>().fetch_all(&self.pool).await.map_err(|e| failed("list runs", e))?;
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

    async fn states(&self, run_ids: &[String]) -> Result<Vec<(String, RunState)>, StoreError> {
        if run_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query_as::<_, (String, String)>("SELECT id, state FROM runs WHERE id = ANY($1)")
            .bind(run_ids)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| failed("read the states of runs", e))?;
        rows.into_iter().map(|(id, state)| Ok((crate::rows::state(&id, &state)?, id)).map(|(s, id)| (id, s))).collect()
    }

    async fn queued_elsewhere(&self) {
        self.signal.queued().await;
    }

    async fn finished_elsewhere(&self) -> Option<Vec<String>> {
        self.finished.finished().await
    }

    async fn queue_depth(&self) -> Result<u64, StoreError> {
        queue_depth(&self.pool).await
    }
}

/// How many runs wait in the queue.
async fn queue_depth(pool: &PgPool) -> Result<u64, StoreError> {
    let n = sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM runs WHERE state = 'queued'")
        .fetch_one(pool)
        .await
        .map_err(|e| failed("count the queued runs", e))?;
    Ok(u64::try_from(n).unwrap_or(0))
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
