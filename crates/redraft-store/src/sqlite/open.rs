//! Opening a SQLite store: where it is (a path, a `sqlite:` URL or `:memory:`), its
//! connections (one writer, a few readers, WAL), the migrations, and trying again while
//! another process creates the same file.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use redraft_core::store::StoreError;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};

use super::SqliteStore;
use crate::batch::Batcher;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// How long a statement waits for another process's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections for reads (file databases).
const READERS: u32 = 4;
/// A file database's connections close after this long unused (opened again when needed):
/// each holds a page cache of up to 2 MiB, which an idle server gives back.
const CLOSE_IDLE_AFTER: Duration = Duration::from_secs(30);

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
                refuse_links(path).map_err(open_error)?;
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
}

/// The files SQLite keeps beside a database, by suffix.
const SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Refuse a database reached through a symbolic link: the file, one SQLite keeps beside it, or a
/// `.redraft` directory holding it. A link a program put in the working directory (an agent
/// `redraft until` ran) would otherwise make the next run create and write its database wherever
/// the link points.
fn refuse_links(path: &Path) -> Result<(), String> {
    let mut suspects = vec![path.to_owned()];
    for suffix in SIDE_FILES {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        suspects.push(PathBuf::from(side));
    }
    if let Some(dir) = path.parent().filter(|d| d.file_name().is_some_and(|n| n == ".redraft")) {
        suspects.push(dir.to_owned());
    }
    for suspect in suspects {
        if std::fs::symlink_metadata(&suspect).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(format!(
                "`{0}` is a symbolic link; the database is never opened through one (it would be written wherever the link points)\nhint: remove the link (`rm {0}`) and run again, or set `database_url` to where the database is",
                suspect.display()
            ));
        }
    }
    Ok(())
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
