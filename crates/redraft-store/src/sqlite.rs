//! The SQLite store: the default, one file (by default `.redraft/redraft.db`).
//!
//! Writes go through a pool of exactly one connection, each multi-statement write in a
//! `BEGIN IMMEDIATE` transaction, so writers in this process queue in the pool instead of
//! contending for SQLite's lock, and a writer in another process waits up to `busy_timeout`
//! (5 s) instead of failing. Reads use a few connections of their own: in WAL mode they never
//! block the writer nor wait for it.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redraft_core::record::{AttemptRecord, PersonReply, RunResult};
use redraft_core::store::{
    Claim, Claimed, Lease, NewRun, Renewal, RunFilter, RunState, RunSummary, Store, StoreError, StoredRun,
};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, Transaction};

use crate::batch::Batcher;
use crate::rows::{
    AttemptColumns, AttemptRow, ResultColumns, RunRow, SummaryRow, decide_claim, encode_spec, failed, lease_ms,
    model_of_spec, renewal,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// How long a statement waits for another process's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections for reads (file databases).
const READERS: u32 = 4;
/// A file database's connections close after this long unused (opened again when needed):
/// each holds a page cache of up to 2 MiB, which an idle server gives back.
const CLOSE_IDLE_AFTER: Duration = Duration::from_secs(30);
/// Runs listed when the filter sets no limit.
const DEFAULT_LIMIT: u32 = 50;

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

/// Where the database is.
#[derive(Debug, PartialEq)]
enum Location {
    Memory,
    File(PathBuf),
}

impl SqliteStore {
    /// Open (creating the file and its parent directories if needed) and migrate the database
    /// at `location`: a path, a `sqlite://PATH` URL (`sqlite:///abs/path` for an absolute one),
    /// or `:memory:` / `sqlite::memory:` for a private in-memory database (one connection; it
    /// lives as long as this store).
    pub async fn open(location: &str) -> Result<Self, StoreError> {
        // Two processes creating a new file at once (a server and `redraft runs list`) can find
        // it locked while the other switches it to WAL or applies the migrations: try again.
        let mut tries = 0;
        loop {
            match Self::open_once(location).await {
                Err(StoreError::Open { message, .. }) if tries < 5 && is_contention(&message) => {
                    tries += 1;
                    tracing::debug!(location, "the new store is busy ({message}); trying again");
                    tokio::time::sleep(Duration::from_millis(50 * tries)).await;
                }
                opened => return opened,
            }
        }
    }

    async fn open_once(location: &str) -> Result<Self, StoreError> {
        let open_error = |message: String| StoreError::Open { location: location.to_owned(), message };
        let (options, place) = parse_location(location).map_err(|e| open_error(e.to_string()))?;
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true)
            .synchronous(SqliteSynchronous::Normal);

        let (writer, reader) = match &place {
            Location::Memory => {
                // Each connection to `:memory:` would see its own database: keep exactly one, forever.
                let pool = SqlitePoolOptions::new()
                    .max_connections(1)
                    .min_connections(1)
                    .idle_timeout(None)
                    .max_lifetime(None)
                    .connect_with(options)
                    .await
                    .map_err(|e| open_error(e.to_string()))?;
                migrate(&pool, location).await?;
                (pool.clone(), pool)
            }
            Location::File(path) => {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    tokio::fs::create_dir_all(parent)
                        .await
                        .map_err(|e| open_error(format!("cannot create the directory `{}`: {e}", parent.display())))?;
                }
                let writer = SqlitePoolOptions::new()
                    .max_connections(1)
                    .idle_timeout(CLOSE_IDLE_AFTER)
                    .connect_with(options.clone())
                    .await
                    .map_err(|e| open_error(e.to_string()))?;
                migrate(&writer, location).await?;
                let reader = SqlitePoolOptions::new()
                    .max_connections(READERS)
                    .idle_timeout(CLOSE_IDLE_AFTER)
                    .connect_with(options)
                    .await
                    .map_err(|e| open_error(e.to_string()))?;
                (writer, reader)
            }
        };
        tracing::debug!(location, "opened the SQLite store");
        let batch = Batcher::start(writer.clone());
        Ok(Self { writer, reader, batch, location: location.to_owned() })
    }

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

async fn migrate(pool: &SqlitePool, location: &str) -> Result<(), StoreError> {
    MIGRATOR.run(pool).await.map_err(|e| StoreError::Open {
        location: location.to_owned(),
        message: format!("cannot apply the migrations: {e}"),
    })
}

/// Whether opening failed because another process was creating the same file: it was locked,
/// or the loser of a race to apply the migrations found a table or column the winner just
/// created.
fn is_contention(message: &str) -> bool {
    ["database is locked", "database is busy", "already exists", "duplicate column name"]
        .iter()
        .any(|m| message.contains(m))
}

/// Connect options and kind of place for a path or `sqlite:` URL.
fn parse_location(location: &str) -> Result<(SqliteConnectOptions, Location), sqlx::Error> {
    let trimmed = location.trim();
    if trimmed.is_empty() {
        return Err(sqlx::Error::Configuration("the location is empty; give a path or a `sqlite://` URL".into()));
    }
    if trimmed == ":memory:" {
        return Ok((SqliteConnectOptions::from_str(":memory:")?, Location::Memory));
    }
    let Some(rest) = trimmed.strip_prefix("sqlite:") else {
        return Ok((SqliteConnectOptions::new().filename(trimmed), Location::File(PathBuf::from(trimmed))));
    };
    let options = SqliteConnectOptions::from_str(trimmed)?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (database, params) = rest.split_once('?').unwrap_or((rest, ""));
    let memory = database == ":memory:" || params.split('&').any(|p| p == "mode=memory");
    if memory {
        Ok((options, Location::Memory))
    } else if database.is_empty() {
        Err(sqlx::Error::Configuration("the URL names no file; use `sqlite://PATH`".into()))
    } else {
        let path = options.get_filename().to_path_buf();
        Ok((options, Location::File(path)))
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
            local: new.local,
        };
        self.batch.write(write).await
    }

    async fn claim_many(&self, lease: &Lease<'_>, limit: usize) -> Result<Vec<Claimed>, StoreError> {
        let worker_id = lease.worker_id;
        let action = || format!("claim runs for worker `{worker_id}`");
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let now = now_ms();
        let mut tx = self.write(action).await?;
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

    async fn claim_run(&self, run_id: &str, lease: &Lease<'_>, force: bool) -> Result<Claim, StoreError> {
        let action = || format!("claim run `{run_id}` for worker `{}`", lease.worker_id);
        let now = now_ms();
        let mut tx = self.write(action).await?;
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

    async fn renew(&self, lease: &Lease<'_>, run_ids: &[String]) -> Result<Renewal, StoreError> {
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
        .fetch_all(&self.writer)
        .await
        .map_err(|e| failed(format!("renew the leases of worker `{worker_id}`"), e))?;
        Ok(renewal(rows))
    }

    async fn release(&self, run_id: &str, worker_id: &str) -> Result<bool, StoreError> {
        let released = sqlx::query(
            "UPDATE runs SET state = 'queued', worker_id = NULL, lease_until = NULL, updated_at = $3
             WHERE id = $1 AND worker_id = $2 AND state = 'running'",
        )
        .bind(run_id)
        .bind(worker_id)
        .bind(now_ms())
        .execute(&self.writer)
        .await
        .map_err(|e| failed(format!("put run `{run_id}` back in the queue"), e))?;
        Ok(released.rows_affected() > 0)
    }

    async fn answer_run(
        &self,
        run_id: &str,
        reply: &PersonReply,
        holder: Option<&Lease<'_>>,
    ) -> Result<(), StoreError> {
        let action = || format!("answer run `{run_id}`");
        let mut tx = self.write(action).await?;
        let row = sqlx::query_as::<_, (String, Option<String>)>("SELECT state, answers FROM runs WHERE id = $1")
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
            "UPDATE runs SET state = $2, worker_id = $3, lease_until = $6 + $4, answers = $5, result = NULL,
                 halted_because = NULL, cancel_requested = 0, local = CASE WHEN $3 IS NULL THEN 0 ELSE local END,
                 updated_at = $6
             WHERE id = $1 AND state = 'awaiting_input'",
        )
        .bind(run_id)
        .bind(state)
        .bind(worker_id)
        .bind(lease)
        .bind(answers)
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .map_err(|e| failed(action(), e))?;
        tx.commit().await.map_err(|e| failed(action(), e))
    }

    async fn abort_run(&self, run_id: &str) -> Result<RunResult, StoreError> {
        let action = || format!("abort run `{run_id}`");
        let mut tx = self.write(action).await?;
        let row = sqlx::query_as::<_, (String, Option<String>)>("SELECT state, result FROM runs WHERE id = $1")
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
            "UPDATE runs SET state = 'failed', result = $2, updated_at = $3 WHERE id = $1 AND state = 'awaiting_input'",
        )
        .bind(run_id)
        .bind(result)
        .bind(now_ms())
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

    async fn withdraw(&self, run_id: &str) -> Result<bool, StoreError> {
        let removed = sqlx::query("DELETE FROM runs WHERE id = $1 AND state = 'queued'")
            .bind(run_id)
            .execute(&self.writer)
            .await
            .map_err(|e| failed(format!("withdraw run `{run_id}`"), e))?;
        Ok(removed.rows_affected() > 0)
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
        let action = || format!("read run `{run_id}`");
        // One read transaction: the run and its attempts from the same snapshot.
        let mut tx = self.reader.begin().await.map_err(|e| failed(action(), e))?;
        let row = sqlx::query_as::<_, RunRow>(
            "SELECT id, state, spec, created_at, updated_at, result, worker_id, lease_until, answers FROM runs WHERE id = $1",
        )
        .bind(run_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| failed(action(), e))?;
        let Some(row) = row else { return Ok(None) };
        let attempts = sqlx::query_as::<_, AttemptRow>(
            "SELECT iteration, record FROM attempts WHERE run_id = $1 ORDER BY iteration",
        )
        .bind(run_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| failed(action(), e))?;
        tx.commit().await.map_err(|e| failed(action(), e))?;
        row.into_stored(attempts).map(Some)
    }

    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        let mut query = sqlx::QueryBuilder::new(
            "SELECT id, state, created_at, updated_at, iterations, halted_because, best_score, model, json_extract(spec, '$.kind') AS kind
             FROM runs WHERE TRUE",
        );
        if let Some(state) = filter.state {
            query.push(" AND state = ").push_bind(state.as_str());
        }
        if let Some(model) = &filter.model {
            query.push(" AND model = ").push_bind(model.clone());
        }
        if let Some(kind) = &filter.kind {
            query.push(" AND json_extract(spec, '$.kind') = ").push_bind(kind.clone());
        }
        if let Some(text) = filter.text.as_deref().filter(|t| !t.is_empty()) {
            query
                .push(" AND instr(lower(id || ' ' || coalesce(model, '') || ' ' || coalesce(json_extract(spec, '$.kind'), '') || ' ' || coalesce(json_extract(spec, '$.prompt'), '')), lower(")
                .push_bind(text.to_owned())
                .push(")) > 0");
        }
        query
            .push(" ORDER BY created_at DESC, seq DESC LIMIT ")
            .push_bind(i64::from(filter.limit.unwrap_or(DEFAULT_LIMIT)))
            .push(" OFFSET ")
            .push_bind(i64::from(filter.offset.unwrap_or(0)));
        let rows =
            query.build_query_as::<SummaryRow>().fetch_all(&self.reader).await.map_err(|e| failed("list runs", e))?;
        rows.into_iter().map(SummaryRow::into_summary).collect()
    }

    async fn unfinished(&self) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar::<_, String>(
            "SELECT id FROM runs WHERE state IN ('running', 'queued') ORDER BY created_at, seq",
        )
        .fetch_all(&self.reader)
        .await
        .map_err(|e| failed("list unfinished runs", e))
    }

    async fn states(&self, run_ids: &[String]) -> Result<Vec<(String, RunState)>, StoreError> {
        if run_ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids = serde_json::to_string(run_ids)
            .map_err(|e| StoreError::Query { action: "read the states of runs".into(), message: e.to_string() })?;
        let rows = sqlx::query_as::<_, (String, String)>(
            "SELECT id, state FROM runs WHERE id IN (SELECT value FROM json_each($1))",
        )
        .bind(ids)
        .fetch_all(&self.reader)
        .await
        .map_err(|e| failed("read the states of runs", e))?;
        rows.into_iter().map(|(id, state)| Ok((crate::rows::state(&id, &state)?, id)).map(|(s, id)| (id, s))).collect()
    }

    async fn queue_depth(&self) -> Result<u64, StoreError> {
        let n = sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM runs WHERE state = 'queued'")
            .fetch_one(&self.reader)
            .await
            .map_err(|e| failed("count the queued runs", e))?;
        Ok(u64::try_from(n).unwrap_or(0))
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
        local: bool,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn place(location: &str) -> Location {
        parse_location(location).map(|(_, place)| place).unwrap_or_else(|e| panic!("{location}: {e}"))
    }

    #[test]
    fn locations_are_paths_or_urls() {
        assert_eq!(place(".redraft/redraft.db"), Location::File(".redraft/redraft.db".into()));
        assert_eq!(place("/tmp/x/r.db"), Location::File("/tmp/x/r.db".into()));
        assert_eq!(place("sqlite://data/r.db"), Location::File("data/r.db".into()));
        assert_eq!(place("sqlite:///tmp/r.db"), Location::File("/tmp/r.db".into()));
        assert_eq!(place("sqlite:r.db"), Location::File("r.db".into()));
        assert_eq!(place(":memory:"), Location::Memory);
        assert_eq!(place("sqlite::memory:"), Location::Memory);
        assert_eq!(place("sqlite://:memory:"), Location::Memory);
        assert_eq!(place("sqlite://r.db?mode=memory"), Location::Memory);
        assert!(parse_location("").is_err());
        assert!(parse_location("sqlite://").is_err());
        assert!(parse_location("sqlite://r.db?color=blue").is_err());
    }
}
