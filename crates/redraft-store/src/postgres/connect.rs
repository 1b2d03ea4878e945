//! Connecting to PostgreSQL: the pool and its limits, the migrations, the channels the store
//! listens on, and a URL's password kept out of messages.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use redraft_core::store::StoreError;
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};

use super::PostgresStore;
use crate::pg_batch::Inserts;
use crate::pg_finish::Finishes;
use crate::pg_signal::Signal;

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

impl PostgresStore {
    /// Connect to `url` (`postgres://user:password@host:port/database`; add
    /// `?options[search_path]=SCHEMA` to use a schema other than `public`) and apply the
    /// migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        // The password is a known secret from here on: no error, log or stored text shows it.
        redraft_core::secrets::register_url(url);
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
