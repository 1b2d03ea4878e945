//! What only the SQLite store has: a file reopened, shared and created by many at once, WAL,
//! `:memory:`, databases and rows of earlier versions, and writes failing halfway.

use std::sync::Arc;

use redraft_core::HaltReason;
use redraft_core::record::{RunResult, RunStatus};
use redraft_store::{RunState, SqliteStore, Store, StoreError};
use serde_json::{Value, json};

use crate::values::{SPEC, W, attempt, held, lease, now_ms, queued, result, spec, text_attempt};

/// Open, write, close and drop; reopen (through a `sqlite://` URL) and read everything back.
#[tokio::test]
async fn a_file_store_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a").join("b").join("redraft.db");
    let history = vec![attempt(1, 0.5, Some(json!({"k": 1}))), attempt(2, 1.0, Some(json!({"k": 2})))];
    let finished = result("done", RunStatus::Succeeded, history.clone());
    {
        let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
        store.insert_run(&held("done", &spec("p"))).await.unwrap();
        for a in &history {
            store.save_attempt("done", W, a).await.unwrap();
        }
        store.finish_run(&finished, W).await.unwrap();
        store.insert_run(&held("interrupted", &spec("q"))).await.unwrap();
        store.save_attempt("interrupted", W, &history[0]).await.unwrap();
        store.close().await;
    }
    assert!(path.is_file(), "the file and its parent directories were created");

    let store = redraft_store::open(&format!("sqlite://{}", path.display())).await.unwrap();
    let done = store.run("done").await.unwrap().unwrap();
    assert_eq!((done.state, done.result), (RunState::Succeeded, Some(finished)));
    assert_eq!(store.unfinished().await.unwrap(), ["interrupted"]);
    assert_eq!(store.run("interrupted").await.unwrap().unwrap().attempts, history[..1]);
}

/// A database made by an earlier version (the first two migrations, with runs and attempts
/// in it) is brought up to date on open with nothing lost: making `runs` again to let a run
/// await an answer leaves every attempt where it was.
#[tokio::test]
async fn an_older_database_is_upgraded_with_its_runs_and_attempts() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old-migrations");
    std::fs::create_dir(&old).unwrap();
    let migrations = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite");
    for name in ["0001_runs_and_attempts.sql", "0002_queue.sql"] {
        std::fs::copy(migrations.join(name), old.join(name)).unwrap();
    }
    let path = dir.path().join("redraft.db");
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let history = [attempt(1, 0.5, Some(json!({"k": 1}))), attempt(2, 0.7, Some(json!({"k": 2})))];
    {
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::migrate::Migrator::new(old.as_path()).await.unwrap().run(&mut conn).await.unwrap();
        sqlx::query(
            "INSERT INTO runs (id, seq, state, spec, created_at, updated_at, iterations, worker_id, lease_until)
             VALUES ('old', 1, 'running', $1, 1, 1, 2, $2, 9000000000000000)",
        )
        .bind(spec("p").to_string())
        .bind(W)
        .execute(&mut conn)
        .await
        .unwrap();
        for a in &history {
            sqlx::query(
                "INSERT INTO attempts (run_id, iteration, status, score, has_artifact, record, recorded_at) VALUES ('old', $1, 'rejected', $2, 1, $3, 1)",
            )
            .bind(i64::from(a.iteration))
            .bind(a.score.get())
            .bind(serde_json::to_string(a).unwrap())
            .execute(&mut conn)
            .await
            .unwrap();
        }
        conn.close().await.unwrap();
    }
    let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
    let run = store.run("old").await.unwrap().unwrap();
    assert_eq!((run.state, run.attempts.as_slice()), (RunState::Running, &history[..]));
    assert!(run.answers.is_empty());
    // And the new state is usable.
    let mut waiting = result("old", RunStatus::AwaitingInput, history.to_vec());
    waiting.halted_because = HaltReason::MaxIterations;
    store.finish_run(&waiting, W).await.unwrap();
    assert_eq!(store.run("old").await.unwrap().unwrap().state, RunState::AwaitingInput);
}

/// The raw text of a text-mode run is stored once: not again as the attempt's artifact, nor
/// as the result's.
#[tokio::test]
async fn raw_text_is_stored_once() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redraft.db");
    let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
    store.insert_run(&held("big", &spec("p"))).await.unwrap();
    let raw = "a long answer. ".repeat(200_000); // 3 MB
    let history = vec![text_attempt(1, &raw, 1.0)];
    store.save_attempt("big", W, &history[0]).await.unwrap();
    store.finish_run(&result("big", RunStatus::Succeeded, history.clone()), W).await.unwrap();

    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    let stored: i64 = sqlx::query_scalar(
        "SELECT (SELECT SUM(LENGTH(record)) FROM attempts) + (SELECT SUM(LENGTH(result)) FROM runs)",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    let raw_len = i64::try_from(raw.len()).unwrap();
    assert!(stored >= raw_len && stored < raw_len + 4096, "{stored} bytes stored for {raw_len} bytes of raw text");
    let back = store.run("big").await.unwrap().unwrap();
    assert_eq!(back.attempts, history);
    assert_eq!(back.result.unwrap().artifact, Some(Value::String(raw)));
}

/// Rows written by earlier versions (every attempt and result whole) read back as they were.
#[tokio::test]
async fn rows_of_earlier_versions_read_back() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redraft.db");
    let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
    store.insert_run(&held("old", &spec("p"))).await.unwrap();
    let history = vec![text_attempt(1, "an old answer", 1.0)];
    let finished = result("old", RunStatus::Succeeded, history.clone());
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    sqlx::query(
        "INSERT INTO attempts (run_id, iteration, status, score, has_artifact, record, recorded_at)
         VALUES ('old', 1, 'accepted', 1.0, 1, $1, 0)",
    )
    .bind(serde_json::to_string(&history[0]).unwrap())
    .execute(&mut conn)
    .await
    .unwrap();
    let whole = RunResult { history: Vec::new(), ..finished.clone() };
    sqlx::query("UPDATE runs SET state = 'succeeded', result = $1 WHERE id = 'old'")
        .bind(serde_json::to_string(&whole).unwrap())
        .execute(&mut conn)
        .await
        .unwrap();
    let back = store.run("old").await.unwrap().unwrap();
    assert_eq!(back.attempts, history);
    assert_eq!(back.result, Some(finished));
}

/// An attempt's `recorded_at` is when it was saved: writing the run's result later keeps it.
#[tokio::test]
async fn recorded_at_is_when_the_attempt_was_saved() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redraft.db");
    let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
    store.insert_run(&held("t", &json!({"prompt": "p"}))).await.unwrap();
    let history = vec![attempt(1, 0.5, Some(json!(1))), attempt(2, 1.0, Some(json!(2)))];
    store.save_attempt("t", W, &history[0]).await.unwrap();
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    const TIMES: &str = "SELECT recorded_at FROM attempts WHERE run_id = 't' ORDER BY iteration";
    let saved: Vec<i64> = sqlx::query_scalar(TIMES).fetch_all(&mut conn).await.unwrap();
    // Wait for the clock to move on, so that a rewrite would show.
    while now_ms() <= saved[0] + 5 {
        tokio::task::yield_now().await;
    }
    store.finish_run(&result("t", RunStatus::Succeeded, history), W).await.unwrap();
    let after: Vec<i64> = sqlx::query_scalar(TIMES).fetch_all(&mut conn).await.unwrap();
    assert_eq!(after[0], saved[0], "attempt 1 keeps the time it was saved");
    assert!(after[1] > saved[0], "attempt 2 was first recorded with the result: {after:?}");
}

/// Several processes opening a new file at once (a server and `redraft runs list`) all get
/// a working store: the migrations are applied once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stores_opened_at_once_on_a_new_file_all_work() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redraft.db").to_str().unwrap().to_owned();
    let opening: Vec<_> = (0..8)
        .map(|_| {
            let path = path.clone();
            tokio::spawn(async move { SqliteStore::open(&path).await })
        })
        .collect();
    for (i, store) in opening.into_iter().enumerate() {
        let store = store.await.unwrap().unwrap();
        store.insert_run(&queued(&format!("r{i}"), &SPEC)).await.unwrap();
    }
    assert_eq!(SqliteStore::open(&path).await.unwrap().queue_depth().await.unwrap(), 8);
}

/// The file is in WAL mode with foreign keys enforced.
#[tokio::test]
async fn the_file_is_in_wal_mode() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redraft.db");
    let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
    store.insert_run(&held("r", &json!({"prompt": "p"}))).await.unwrap();
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode").fetch_one(&mut conn).await.unwrap();
    assert_eq!(mode, "wal");
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\' ORDER BY name",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(tables, ["attempts", "runs"]);
}

/// `:memory:` works with concurrent writers (one connection, so one database).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_store_is_one_database() {
    let store: Arc<dyn Store> = redraft_store::open(":memory:").await.unwrap();
    store.insert_run(&queued("m", &spec("p"))).await.unwrap();
    assert_eq!(store.claim_next(&lease(W)).await.unwrap().map(|c| c.run_id).as_deref(), Some("m"));
    let tasks: Vec<_> = (1..=10)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.save_attempt("m", W, &attempt(i, 0.1, Some(json!(i)))).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(store.run("m").await.unwrap().unwrap().attempts.len(), 10);
    let other = SqliteStore::open("sqlite::memory:").await.unwrap();
    assert!(other.run("m").await.unwrap().is_none(), "each memory store is its own database");
}

/// Two stores on one file (a server and `redraft runs …` in another process) write at the
/// same time without "database is locked".
/// A write that fails after changing something (here a trigger refusing to delete an
/// attempt, the last step of writing a result) leaves nothing of itself, and the writes
/// made in the same batch are all stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_failing_halfway_leaves_nothing_and_fails_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redraft.db");
    let store = Arc::new(SqliteStore::open(path.to_str().unwrap()).await.unwrap());
    for r in 0..20 {
        let run_id = format!("h{r:02}");
        store.insert_run(&held(&run_id, &SPEC)).await.unwrap();
        store.save_attempt(&run_id, W, &attempt(1, 0.5, Some(json!(r)))).await.unwrap();
    }
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch(
        "CREATE TRIGGER refuse BEFORE DELETE ON attempts WHEN OLD.run_id = 'h07'
         BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END;",
    )
    .unwrap();
    drop(db);
    // Each result drops attempt 1 (its history is attempt 2 alone): for `h07`, after the
    // run's row was written.
    let results: Vec<RunResult> = (0..20)
        .map(|r| result(&format!("h{r:02}"), RunStatus::Succeeded, vec![attempt(2, 1.0, Some(json!(r)))]))
        .collect();
    let outcomes = futures_util::future::join_all(results.iter().map(|result| store.finish_run(result, W))).await;
    for (r, outcome) in outcomes.into_iter().enumerate() {
        let run_id = format!("h{r:02}");
        let stored = store.run(&run_id).await.unwrap().unwrap();
        if r == 7 {
            let error = outcome.unwrap_err();
            assert!(error.to_string().contains("refused by a trigger"), "{error}");
            assert_eq!(stored.state, RunState::Running, "nothing of the failed write is kept");
            assert_eq!(stored.result, None);
            assert_eq!(stored.attempts, vec![attempt(1, 0.5, Some(json!(r)))]);
        } else {
            outcome.unwrap_or_else(|e| panic!("{run_id}: {e}"));
            assert_eq!(stored.state, RunState::Succeeded, "{run_id}");
            assert_eq!(stored.attempts, results[r].history, "{run_id}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_share_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redraft.db");
    let first = Arc::new(SqliteStore::open(path.to_str().unwrap()).await.unwrap());
    let second = Arc::new(SqliteStore::open(path.to_str().unwrap()).await.unwrap());
    let tasks: Vec<_> = (0..16)
        .map(|r| {
            let store = if r % 2 == 0 { first.clone() } else { second.clone() };
            tokio::spawn(async move {
                let run_id = format!("s{r}");
                store.insert_run(&held(&run_id, &spec("p"))).await?;
                for i in 1..=5 {
                    store.save_attempt(&run_id, W, &attempt(i, 0.5, Some(json!(i)))).await?;
                }
                Ok::<_, StoreError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(first.unfinished().await.unwrap().len(), 16);
    assert_eq!(second.run("s0").await.unwrap().unwrap().attempts.len(), 5);
}

/// A place that cannot hold a database is an `Open` error naming it.
#[tokio::test]
async fn a_bad_location_is_an_open_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "not a directory").unwrap();
    let location = file.join("redraft.db");
    let err = SqliteStore::open(location.to_str().unwrap()).await.unwrap_err();
    assert!(matches!(&err, StoreError::Open { location: l, .. } if l == location.to_str().unwrap()), "{err:?}");
    assert!(err.to_string().starts_with(&format!("cannot open the store `{}`", location.display())), "{err}");

    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, vec![7u8; 8192]).unwrap();
    let err = redraft_store::open(garbage.to_str().unwrap()).await.unwrap_err();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
}

/// A database reached through a symbolic link — the file, its `-wal`, `-shm` or `-journal`, or a
/// `.redraft` directory that is a link — is refused, naming the path and the fix: a link an agent
/// put in the working directory would otherwise make the next run write its database wherever
/// the link points. Nothing is created there.
#[tokio::test]
async fn a_database_reached_through_a_symlink_is_refused() {
    for (case, link) in [
        ("the file", "redraft.db"),
        ("its WAL", "redraft.db-wal"),
        ("its shared memory", "redraft.db-shm"),
        ("its journal", "redraft.db-journal"),
        ("its .redraft directory", ""),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let own = dir.path().join(".redraft");
        if link.is_empty() {
            std::os::unix::fs::symlink(outside.path(), &own).unwrap();
        } else {
            std::fs::create_dir(&own).unwrap();
            std::os::unix::fs::symlink(outside.path().join(link), own.join(link)).unwrap();
        }
        let path = own.join("redraft.db");
        let err = match SqliteStore::open(path.to_str().unwrap()).await {
            Ok(_) => panic!("{case}: opened through a link"),
            Err(e) => e.to_string(),
        };
        let named = if link.is_empty() { own.clone() } else { own.join(link) };
        assert!(err.contains(&format!("`{}` is a symbolic link", named.display())), "{case}: {err}");
        assert!(err.contains("hint: remove the link"), "{case}: {err}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "{case}: nothing created outside");
    }
}
