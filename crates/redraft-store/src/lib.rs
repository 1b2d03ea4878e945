//! Stores for redraft runs and attempts, behind `redraft-core`'s [`Store`] port: SQLite by
//! default ([`SqliteStore`], a file under `.redraft/`) and PostgreSQL ([`PostgresStore`]) when
//! the URL is `postgres://…`.
//!
//! The key design decisions:
//!
//! - **Written as it happens.** Every call is its own committed transaction: a run is inserted
//!   before its first attempt, each attempt is saved the moment it is judged (saving the same
//!   iteration again replaces it), and the result is written when the run halts, with the last
//!   attempt when the run halts on it (one write, not two). A crash loses at most the attempt
//!   in flight, and [`Store::unfinished`] names the runs to resume.
//! - **One logical schema, two dialects.** `runs` and `attempts` have the same columns in both
//!   databases (`migrations/sqlite`, `migrations/postgres`, embedded and applied on open). JSON
//!   is kept as text (`TEXT` in SQLite, `json` in PostgreSQL rather than `jsonb`, which would
//!   reorder an artifact's keys), so a stored run reads back byte for byte.
//! - **The history is stored once.** Attempts live in `attempts`; the stored result omits its
//!   history, and [`Store::run`] puts the attempts back. `finish_run` writes the result's history
//!   into `attempts` in the same transaction, so the two always agree. Nor is a text stored
//!   twice: a text-mode artifact (the raw text itself) is stored as `raw` only, and a result's
//!   artifact only in its best attempt; both are rebuilt on read (rows written whole by earlier
//!   versions read as they are).
//! - **Summary columns.** `iterations`, `best_score`, `halted_because` and `model` are kept on the
//!   `runs` row by every write, so [`Store::list`] never parses a result.
//! - **The queue is the `runs` table.** A run is inserted `queued` (or `running`, held by the
//!   worker that runs it at once) before it is acknowledged. Claiming sets `running`, the
//!   worker's id and a lease; PostgreSQL claims with `FOR UPDATE SKIP LOCKED`, SQLite within
//!   its single writer's `BEGIN IMMEDIATE` transaction. A worker renews all its leases in one
//!   statement; a run whose lease expired is claimed again (taken over) and resumed from its
//!   recorded attempts. Writes to a running run name its holder and are refused once another
//!   worker took it over (fencing), so an attempt is never recorded twice by two workers.
//! - **Attempt times are kept.** An attempt's `recorded_at` is set when it is saved; writing
//!   the result's history later does not move it.
//!
//! SQLite writes go through one writer connection (`BEGIN IMMEDIATE`, `busy_timeout` 5 s, WAL),
//! reads through a small pool of their own, so many concurrent runs in one server never see
//! "database is locked"; the writes every run makes (stored, each attempt, finished) are group
//! committed, all those waiting in one transaction (`batch`). On PostgreSQL the runs queued at
//! once are stored together, one statement per batch (`pg_batch`), and so are the results
//! written at once (`pg_finish`), both through one queue (`pg_group`).

use std::sync::Arc;

pub use redraft_core::store::{
    Claim, Claimed, Holder, Lease, NewRun, Origin, Renewal, RunFilter, RunState, RunSummary, Store, StoreError,
    StoredRun,
};

mod batch;
mod pg_batch;
mod pg_finish;
mod pg_group;
mod pg_signal;
mod postgres;
mod rows;
mod sqlite;

pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// Where the SQLite store lives when nothing else is configured, relative to the working
/// directory.
pub const DEFAULT_SQLITE_PATH: &str = ".redraft/redraft.db";

/// Open the store at `url`: PostgreSQL for `postgres://` and `postgresql://` URLs, SQLite for
/// anything else (a path, `sqlite://PATH`, `:memory:`). Migrations are applied.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if is_postgres_url(url) {
        Ok(Arc::new(PostgresStore::connect(url).await?))
    } else {
        Ok(Arc::new(SqliteStore::open(url).await?))
    }
}

/// Whether `url` names a PostgreSQL database.
pub fn is_postgres_url(url: &str) -> bool {
    let url = url.trim_start();
    ["postgres://", "postgresql://"]
        .iter()
        .any(|scheme| url.get(..scheme.len()).is_some_and(|head| head.eq_ignore_ascii_case(scheme)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_picks_the_database() {
        assert!(is_postgres_url("postgres://u@h/db"));
        assert!(is_postgres_url("PostgreSQL://u@h/db"));
        assert!(!is_postgres_url("sqlite://.redraft/redraft.db"));
        assert!(!is_postgres_url(DEFAULT_SQLITE_PATH));
        assert!(!is_postgres_url("postgres"));
        assert!(!is_postgres_url(":memory:"));
    }
}
