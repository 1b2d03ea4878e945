#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! One contract, every store. Each case is a plain `async fn(Arc<dyn Store>)` in the module of
//! its topic; the `contract!` macro runs it against:
//!
//! - SQLite, always (a fresh file in a temp dir, opened through `redraft_store::open`);
//! - PostgreSQL when `DATABASE_URL` is a `postgres://` URL, each case in a schema of its own
//!   (`redraft_test_<case>`, dropped afterwards). CI sets `DATABASE_URL` (`.ci/run` starts a
//!   throwaway cluster); without it each PostgreSQL case prints a visible `SKIP` line (which
//!   fails CI) and runs on SQLite only.
//!
//! Tests that only make sense for one backend (reopening a file, `:memory:`) are in
//! `sqlite_only` and `postgres_only`; the values the cases are made of in `values`.

use std::sync::Arc;

use redraft_store::{Store, StoreError};

mod awaiting;
mod concurrency;
mod leases;
mod lifecycle;
mod listing;
mod postgres_only;
mod queue;
mod reads;
mod secrets;
mod sqlite_only;
mod values;

// ---------------------------------------------------------------------------------------------
// The backends

/// A fresh SQLite store in a temp dir (kept alive by the returned guard).
async fn sqlite_store() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("redraft.db");
    let store = redraft_store::open(path.to_str().unwrap()).await.unwrap();
    (store, dir)
}

/// `DATABASE_URL` when it names PostgreSQL.
fn postgres_url() -> Option<String> {
    std::env::var("DATABASE_URL").ok().filter(|url| redraft_store::is_postgres_url(url))
}

/// A schema of one test case, dropped by [`PgSchema::drop`].
struct PgSchema {
    url: String,
    name: String,
}

impl PgSchema {
    async fn execute(url: &str, sql: String) {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
    }

    async fn drop(self) {
        Self::execute(&self.url, format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name)).await;
    }

    /// The URL of a store in this schema.
    fn store_url(url: &str, name: &str) -> String {
        let separator = if url.contains('?') { '&' } else { '?' };
        format!("{url}{separator}options[search_path]={name}")
    }

    /// Another store on this schema, as another process would open it.
    async fn another_store(&self) -> Arc<dyn Store> {
        redraft_store::open(&Self::store_url(&self.url, &self.name)).await.unwrap()
    }
}

/// A PostgreSQL store in a fresh schema named after the case, or `None` when `DATABASE_URL`
/// is not set to a PostgreSQL URL.
async fn postgres_store(case: &str) -> Option<(Arc<dyn Store>, PgSchema)> {
    let Some(url) = postgres_url() else {
        // Written past the test harness's capture, so the skip is seen (and CI, which sets
        // DATABASE_URL, fails on any SKIP line).
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIP {case} on PostgreSQL: DATABASE_URL is not a postgres:// URL (it ran on SQLite only)"
        );
        return None;
    };
    let name = format!("redraft_test_{case}");
    PgSchema::execute(&url, format!("DROP SCHEMA IF EXISTS {name} CASCADE")).await;
    PgSchema::execute(&url, format!("CREATE SCHEMA {name}")).await;
    let store = redraft_store::open(&PgSchema::store_url(&url, &name)).await.unwrap();
    Some((store, PgSchema { url, name }))
}

/// One test per case and backend: `sqlite::<case>` and `postgres::<case>`, for each
/// `<topic>::<case>`.
macro_rules! contract {
    ($($topic:ident::$case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let (store, _dir) = super::sqlite_store().await;
                    super::$topic::$case(store).await;
                }
            )*
        }

        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let Some((store, schema)) = super::postgres_store(stringify!($case)).await else { return };
                    super::$topic::$case(store).await;
                    schema.drop().await;
                }
            )*
        }
    };
}

contract!(
    lifecycle::lifecycle_is_written_as_it_happens,
    lifecycle::failed_run_keeps_its_whole_history,
    lifecycle::a_last_attempt_is_written_with_the_result,
    lifecycle::attempt_times_are_kept,
    lifecycle::unknown_runs_are_not_found,
    reads::results_of_many_runs_in_one_read,
    reads::json_reads_back_verbatim,
    reads::raw_text_reads_back_as_the_artifact,
    listing::list_orders_filters_and_limits,
    listing::list_filters_by_model_kind_and_text_and_pages,
    listing::unfinished_runs_oldest_first,
    queue::claims_are_exclusive,
    queue::cancel_withdraw_and_a_full_queue,
    leases::expired_leases_are_taken_over,
    leases::renewals_racing_results_all_succeed,
    concurrency::concurrent_runs_never_lock,
    concurrency::runs_queued_at_once_are_each_answered_for_themselves,
    concurrency::refused_writes_among_many_leave_the_others_stored,
    concurrency::results_written_at_once_are_each_written_or_refused,
    awaiting::a_run_awaiting_an_answer,
    secrets::known_secrets_are_never_written,
);

// ---------------------------------------------------------------------------------------------
// PostgreSQL without a server

/// A PostgreSQL URL that cannot be reached is an `Open` error without the password.
#[tokio::test]
async fn an_unreachable_postgres_is_an_open_error_without_its_password() {
    let err = redraft_store::open("postgres://app:s3cret@127.0.0.1:1/app").await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert!(text.starts_with("cannot open the store `postgres://app:***@127.0.0.1:1/app`: "), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}
