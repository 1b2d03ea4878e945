//! Crashes at the worst moments, as an operator causes them: `kill -9` of workers sharing a
//! PostgreSQL queue while runs are in flight, and of `redraft serve` (SQLite) right after it
//! acknowledged a run and in the middle of the work. Every acknowledged run must finish, every
//! attempt must be recorded exactly once, and the model must be asked at most once per
//! recorded attempt plus the calls that were in flight when a process died.
//!
//! Kills of workers and servers mid-run are in [`kills`]; an API node and its workers sharing a
//! queue, one of them stopped, in [`queue`]; a server near its open-files limit in
//! [`descriptors`]. Here the processes, the fake model's script and the checks they share.

mod descriptors;
mod kills;
mod queue;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use redraft_testkit::ByAttempt;
use redraft_testkit::processes::{eventually, eventually_async};
use serde_json::Value;

use crate::write;

/// Attempt 1: no JSON; attempt 2: the wrong shape; attempt 3: valid.
const ANSWERS: [&str; 3] = ["I think the city is Toledo.", r#"{"town": "Toledo"}"#, r#"{"city": "Toledo"}"#];
const SPEC: &str = r#"{"prompt": "Which city?", "schema": {"type": "object", "required": ["city"], "properties": {"city": {"const": "Toledo"}}}, "max_iterations": 3}"#;
/// How long the fake model takes to answer.
const DELAY: Duration = Duration::from_millis(300);

fn write_config(dir: &Path, model: &ByAttempt, database_url: Option<&str>) {
    let database = database_url.map(|url| format!("database_url = \"{url}\"\n")).unwrap_or_default();
    write(
        dir,
        "redraft.toml",
        &format!(
            "default_model = \"fake/m\"\n{database}\n[server]\nmax_concurrent_runs = 16\ngrace_period = \"5s\"\n\n\
             [queue]\nlease = \"2s\"\nheartbeat = \"200ms\"\npoll = \"100ms\"\nmax_wait = \"120s\"\n\n\
             [providers.fake]\ntype = \"openai\"\nbase_url = \"{}\"\n",
            model.base_url()
        ),
    );
}

fn redraft_process(dir: &Path, args: &[&str], log: &str) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("redraft"));
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("RUST_LOG", "warn")
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(log)).unwrap());
    cmd
}

/// A child process killed when dropped, so that a failing test leaves no worker behind to
/// claim the runs of the next one.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `redraft worker` in `dir`, logging to `NAME.log`, and its worker id (which it prints first).
async fn worker(dir: &Path, name: &str) -> (Proc, String) {
    let log = dir.join(format!("{name}.log"));
    let child = Proc(redraft_process(dir, &["worker"], &format!("{name}.log")).spawn().unwrap());
    let mut id = None;
    let printed = eventually(Duration::from_secs(30), || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        // Only whole lines: the log may be read while a line is half written.
        id = text
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .find_map(|l| l.strip_prefix("redraft: worker "))
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned);
        id.is_some()
    })
    .await;
    assert!(printed, "the worker printed no id: {}", std::fs::read_to_string(&log).unwrap_or_default());
    (child, id.unwrap())
}

/// `redraft serve` in `dir` with `extra` arguments, and its base URL.
fn serve(dir: &Path, extra: &[&str], name: &str) -> (Proc, String) {
    let mut args = vec!["serve", "--addr", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut cmd = redraft_process(dir, &args, &format!("{name}.log"));
    cmd.stderr(Stdio::piped());
    spawn_serving(cmd, dir, name)
}

/// Start `cmd` (a `redraft serve`), wait for the address it prints, and keep its stderr
/// flowing into `NAME.log`.
fn spawn_serving(mut cmd: Command, dir: &Path, name: &str) -> (Proc, String) {
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(30)).expect("serve printed nothing");
    let base = first.strip_prefix("redraft: listening on ").unwrap_or_else(|| panic!("{first}")).to_owned();
    // Keep draining its stderr into its log, so it never blocks on a full pipe.
    let mut log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let second = rx.recv_timeout(Duration::from_secs(30)).expect("serve printed one line only");
    {
        use std::io::Write;
        writeln!(log, "{first}\n{second}").unwrap();
    }
    std::thread::spawn(move || {
        use std::io::Write;
        while let Ok(line) = rx.recv() {
            let _ = writeln!(log, "{line}");
        }
    });
    (Proc(child), base)
}

fn kill9(child: &mut Proc) {
    child.0.kill().unwrap();
    child.0.wait().unwrap();
}

fn terminate(child: &mut Proc) -> Option<i32> {
    let status = Command::new("kill").args(["-TERM", &child.0.id().to_string()]).status().unwrap();
    assert!(status.success());
    child.0.wait().unwrap().code()
}

/// Runs a dead worker held when it died (read before any other worker can take them over):
/// each had at most one call to the model in flight.
async fn held_by(database: &str, worker_id: &str) -> usize {
    use sqlx::Connection;
    const HELD: &str = "SELECT COUNT(*) FROM runs WHERE state = 'running' AND worker_id = $1";
    let n: i64 = if database.starts_with("postgres") {
        let mut conn = sqlx::PgConnection::connect(database).await.unwrap();
        sqlx::query_scalar(HELD).bind(worker_id).fetch_one(&mut conn).await.unwrap()
    } else {
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{database}")).await.unwrap();
        sqlx::query_scalar(HELD).bind(worker_id).fetch_one(&mut conn).await.unwrap()
    };
    usize::try_from(n).unwrap()
}

/// The worker id a server printed when it started.
fn server_worker_id(dir: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("redraft: worker "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{name} printed no worker id: {text}"))
        .to_owned()
}

async fn submit(client: &reqwest::Client, base: &str) -> String {
    let response = client
        .post(format!("{base}/v1/runs"))
        .header("content-type", "application/json")
        .body(SPEC)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body = response.json::<Value>().await.unwrap();
    assert_eq!(status, 202, "{body}");
    body["run_id"].as_str().unwrap().to_owned()
}

/// Wait until `model` has been called `n` times.
async fn until_calls(model: &ByAttempt, n: usize) {
    let called = eventually(Duration::from_secs(60), || model.calls() >= n).await;
    assert!(called, "the model was called {} times, waited for {n}", model.calls());
}

/// `GET url` as JSON, asked again while the server sheds it (503: it still holds connections a
/// client just closed).
async fn get_json(client: &reqwest::Client, url: &str) -> Value {
    let answer = Mutex::new(None);
    let answered = eventually_async(Duration::from_secs(60), || async {
        let response = client.get(url).send().await.unwrap();
        if response.status() == 503 {
            return false;
        }
        let json: Value = response.json().await.unwrap();
        *answer.lock().unwrap() = Some(json);
        true
    })
    .await;
    assert!(answered, "`GET {url}` was shed for a minute");
    answer.into_inner().unwrap().unwrap()
}

/// How many runs the server at `base` lists in each state.
async fn states(client: &reqwest::Client, base: &str) -> BTreeMap<String, usize> {
    let runs = get_json(client, &format!("{base}/v1/runs?limit=1000")).await;
    let mut states = BTreeMap::new();
    for run in runs["runs"].as_array().unwrap_or_else(|| panic!("{runs}")) {
        *states.entry(run["state"].as_str().unwrap().to_owned()).or_insert(0) += 1;
    }
    states
}

/// Wait until every run in `ids` has halted (at most `within`), then check each: succeeded,
/// attempts 1, 2, 3 each recorded once. Returns the number of recorded attempts.
async fn all_finished_once(base: &str, ids: &[String], within: Duration, dir: &Path) -> usize {
    all_finished_once_each(base, ids, 3, within, dir).await
}

/// [`all_finished_once`] for runs of `attempts` attempts.
async fn all_finished_once_each(base: &str, ids: &[String], attempts: u64, within: Duration, dir: &Path) -> usize {
    let client = reqwest::Client::new();
    let halted = |states: &BTreeMap<String, usize>| {
        states.get("succeeded").copied().unwrap_or(0) + states.get("failed").copied().unwrap_or(0)
    };
    let all_halted = eventually_async(within, || async { halted(&states(&client, base).await) == ids.len() }).await;
    if !all_halted {
        let states = states(&client, base).await;
        let logs: String = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
            .map(|e| format!("--- {}\n{}", e.path().display(), std::fs::read_to_string(e.path()).unwrap()))
            .collect();
        panic!("runs stuck after {within:?}: {states:?}\n{logs}");
    }
    let mut recorded = 0;
    for id in ids {
        let run = get_json(&client, &format!("{base}/v1/runs/{id}")).await;
        assert_eq!(run["status"], "succeeded", "{run}");
        let iterations: Vec<u64> =
            run["history"].as_array().unwrap().iter().map(|a| a["iteration"].as_u64().unwrap()).collect();
        assert_eq!(iterations, (1..=attempts).collect::<Vec<_>>(), "every attempt recorded exactly once: {run}");
        recorded += iterations.len();
    }
    recorded
}

/// A PostgreSQL database for this test alone (a schema of its own), or `None` with a visible
/// SKIP line when `DATABASE_URL` names no PostgreSQL.
async fn postgres(case: &str) -> Option<String> {
    use sqlx::Connection;
    let Some(url) = std::env::var("DATABASE_URL").ok().filter(|u| u.starts_with("postgres")) else {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIP {case}: DATABASE_URL is not a postgres:// URL");
        return None;
    };
    let schema = format!("redraft_chaos_{case}");
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    for sql in [format!("DROP SCHEMA IF EXISTS {schema} CASCADE"), format!("CREATE SCHEMA {schema}")] {
        sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.unwrap();
    }
    conn.close().await.unwrap();
    let separator = if url.contains('?') { '&' } else { '?' };
    Some(format!("{url}{separator}options[search_path]={schema}"))
}
