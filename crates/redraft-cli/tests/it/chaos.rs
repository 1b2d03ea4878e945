//! Crashes at the worst moments, as an operator causes them: `kill -9` of workers sharing a
//! PostgreSQL queue while runs are in flight, and of `redraft serve` (SQLite) right after it
//! acknowledged a run and in the middle of the work. Every acknowledged run must finish, every
//! attempt must be recorded exactly once, and the model must be asked at most once per
//! recorded attempt plus the calls that were in flight when a process died.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redraft_testkit::ByAttempt;
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
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        // Only whole lines: the log may be read while a line is half written.
        let id = text
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .find_map(|l| l.strip_prefix("redraft: worker "))
            .and_then(|rest| rest.split_whitespace().next());
        if let Some(id) = id {
            return (child, id.to_owned());
        }
        assert!(Instant::now() < deadline, "the worker printed no id: {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    let deadline = Instant::now() + Duration::from_secs(60);
    while model.calls() < n {
        assert!(Instant::now() < deadline, "the model was called {} times, waited for {n}", model.calls());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Wait until every run in `ids` has halted (at most `within`), then check each: succeeded,
/// attempts 1, 2, 3 each recorded once. Returns the number of recorded attempts.
async fn all_finished_once(base: &str, ids: &[String], within: Duration, dir: &Path) -> usize {
    all_finished_once_each(base, ids, 3, within, dir).await
}

/// [`all_finished_once`] for runs of `attempts` attempts.
async fn all_finished_once_each(base: &str, ids: &[String], attempts: u64, within: Duration, dir: &Path) -> usize {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + within;
    loop {
        let response = client.get(format!("{base}/v1/runs?limit=1000")).send().await.unwrap();
        if response.status() == 503 {
            // Shed while the server still holds connections a client just closed: come back.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let runs: Value = response.json().await.unwrap();
        let mut states = BTreeMap::new();
        for run in runs["runs"].as_array().unwrap_or_else(|| panic!("{runs}")) {
            *states.entry(run["state"].as_str().unwrap().to_owned()).or_insert(0) += 1;
        }
        let halted = states.get("succeeded").copied().unwrap_or(0) + states.get("failed").copied().unwrap_or(0);
        if halted == ids.len() {
            break;
        }
        if Instant::now() > deadline {
            let logs: String = std::fs::read_dir(dir)
                .unwrap()
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
                .map(|e| format!("--- {}\n{}", e.path().display(), std::fs::read_to_string(e.path()).unwrap()))
                .collect();
            panic!("runs stuck after {within:?}: {states:?}\n{logs}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut recorded = 0;
    for id in ids {
        let run: Value = loop {
            let response = client.get(format!("{base}/v1/runs/{id}")).send().await.unwrap();
            if response.status() != 503 {
                break response.json().await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
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

/// Three workers share a PostgreSQL queue fed by an API node that executes nothing itself;
/// twice a random worker is killed with SIGKILL while runs are in flight (and replaced). All
/// 200 runs of 3 attempts finish; no attempt is recorded twice or lost; the model is asked
/// again only for the calls in flight at the kills.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_workers_killed_mid_run_lose_and_repeat_nothing() {
    let Some(url) = postgres("workers").await else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = ByAttempt::start(&ANSWERS, DELAY).await;
    write_config(dir.path(), &model, Some(&url));
    let (mut api, base) = serve(dir.path(), &["--no-worker"], "api");
    let mut workers = Vec::new();
    for i in 0..3 {
        workers.push(worker(dir.path(), &format!("worker{i}")).await);
    }

    let client = reqwest::Client::new();
    let submitting: Vec<_> = (0..200)
        .map(|_| {
            let (client, base) = (client.clone(), base.clone());
            tokio::spawn(async move { submit(&client, &base).await })
        })
        .collect();
    let mut ids = Vec::new();
    for s in submitting {
        ids.push(s.await.unwrap());
    }

    let mut in_flight_at_kills = 0;
    for (k, progress) in [150, 350].into_iter().enumerate() {
        until_calls(&model, progress).await;
        let victim = (std::process::id() as usize + k) % workers.len();
        kill9(&mut workers[victim].0);
        in_flight_at_kills += held_by(&url, &workers[victim].1).await;
        workers[victim] = worker(dir.path(), &format!("replacement{k}")).await;
    }

    let recorded = all_finished_once(&base, &ids, Duration::from_secs(120), dir.path()).await;
    assert_eq!(recorded, 600);
    let calls = model.calls();
    eprintln!("chaos: {calls} model calls, {recorded} recorded attempts, {in_flight_at_kills} runs held at the kills");
    assert!(
        calls <= recorded + in_flight_at_kills,
        "{calls} calls for {recorded} recorded attempts and {in_flight_at_kills} in flight at the kills"
    );
    assert!(in_flight_at_kills > 0, "the kills happened while runs were in flight");

    for (mut w, _) in workers {
        assert_eq!(terminate(&mut w), Some(0));
    }
    assert_eq!(terminate(&mut api), Some(0));
}

/// One `redraft serve` on SQLite, killed with SIGKILL right after it acknowledged a run, then
/// again in the middle of the work, and restarted each time: every acknowledged run is stored,
/// resumed by the restarted server and finished, with no attempt recorded twice or lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sqlite_server_killed_after_a_202_and_mid_run_loses_and_repeats_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = ByAttempt::start(&ANSWERS, DELAY).await;
    write_config(dir.path(), &model, None);
    let db = dir.path().join(".redraft/redraft.db").display().to_string();
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    let mut in_flight_at_kills = 0;

    // Killed at once after acknowledging a run.
    let (mut server, base) = serve(dir.path(), &[], "serve0");
    for _ in 0..20 {
        ids.push(submit(&client, &base).await);
    }
    kill9(&mut server);
    in_flight_at_kills += held_by(&db, &server_worker_id(dir.path(), "serve0")).await;

    // Restarted; more runs; killed in the middle of the work.
    let (mut server, base) = serve(dir.path(), &[], "serve1");
    for _ in 0..40 {
        ids.push(submit(&client, &base).await);
    }
    until_calls(&model, 90).await;
    kill9(&mut server);
    in_flight_at_kills += held_by(&db, &server_worker_id(dir.path(), "serve1")).await;

    let (mut server, base) = serve(dir.path(), &[], "serve2");
    let recorded = all_finished_once(&base, &ids, Duration::from_secs(120), dir.path()).await;
    assert_eq!(recorded, 180);
    let calls = model.calls();
    eprintln!("chaos: {calls} model calls, {recorded} recorded attempts, {in_flight_at_kills} runs held at the kills");
    assert!(
        calls <= recorded + in_flight_at_kills,
        "{calls} calls for {recorded} recorded attempts and {in_flight_at_kills} in flight at the kills"
    );
    assert_eq!(terminate(&mut server), Some(0));
}

/// SIGTERM to a worker whose runs outlast the grace period: it stops claiming, waits the grace
/// period, puts its runs back in the queue at once (no lease to wait out) and exits 0; another
/// worker finishes them.
/// An API node that executes nothing answers requests waiting for their runs (`/v1/iterate`)
/// with the results the workers wrote: each request its own run's whole result, the same one
/// the store holds, whichever worker ran it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_api_node_answers_waiting_requests_with_what_its_workers_wrote() {
    let Some(url) = postgres("waiting").await else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = ByAttempt::start(&ANSWERS, Duration::from_millis(50)).await;
    write_config(dir.path(), &model, Some(&url));
    let (_api, base) = serve(dir.path(), &["--no-worker"], "api");
    let _workers = [worker(dir.path(), "w1").await, worker(dir.path(), "w2").await];
    let client = reqwest::Client::new();
    let waiting: Vec<_> = (0..40)
        .map(|_| {
            let (client, base) = (client.clone(), base.clone());
            tokio::spawn(async move {
                let response = client
                    .post(format!("{base}/v1/iterate"))
                    .header("content-type", "application/json")
                    .body(SPEC)
                    .send()
                    .await
                    .unwrap();
                (response.status(), response.json::<Value>().await.unwrap())
            })
        })
        .collect();
    let mut ids = std::collections::HashSet::new();
    for request in waiting {
        let (status, result) = request.await.unwrap();
        assert_eq!(status, 200, "{result}");
        assert_eq!(result["status"], "succeeded", "{result}");
        assert_eq!(result["artifact"], serde_json::json!({"city": "Toledo"}), "{result}");
        let run_id = result["run_id"].as_str().unwrap().to_owned();
        let stored: Value = client.get(format!("{base}/v1/runs/{run_id}")).send().await.unwrap().json().await.unwrap();
        assert_eq!(stored["history"], result["history"], "the answer is the stored result");
        assert_eq!(result["history"].as_array().map(Vec::len), Some(3), "{result}");
        assert!(ids.insert(run_id), "two requests were answered with one run");
    }
    assert_eq!(model.calls(), 120, "one call per attempt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_worker_puts_its_runs_back_for_another() {
    let dir = tempfile::tempdir().unwrap();
    let model = ByAttempt::start(&[ANSWERS[2]], Duration::from_secs(3)).await;
    write_config(dir.path(), &model, None);
    // A long lease: only the release can hand the runs over within this test's time.
    let config = std::fs::read_to_string(dir.path().join("redraft.toml")).unwrap();
    let config = config
        .replace("lease = \"2s\"", "lease = \"10m\"")
        .replace("grace_period = \"5s\"", "grace_period = \"500ms\"");
    write(dir.path(), "redraft.toml", &config);
    let (mut api, base) = serve(dir.path(), &["--no-worker"], "api");
    let (mut first, _) = worker(dir.path(), "first").await;
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(submit(&client, &base).await);
    }
    until_calls(&model, 4).await;
    let started = Instant::now();
    assert_eq!(terminate(&mut first), Some(0));
    assert!(started.elapsed() < Duration::from_secs(3), "it did not wait for the model past its grace period");
    let log = std::fs::read_to_string(dir.path().join("first.log")).unwrap();
    assert!(log.contains("4 unfinished run(s) went back to the queue"), "{log}");

    let (_second, _) = worker(dir.path(), "second").await;
    let recorded = all_finished_once_each(&base, &ids, 1, Duration::from_secs(30), dir.path()).await;
    assert_eq!(recorded, 4);
    assert_eq!(terminate(&mut api), Some(0));
}

/// A server near its open-files limit sheds new connections with 503 and `Retry-After`
/// instead of running out of descriptors: every request gets an answer (202 or 503, never a
/// reset or a hang), and every run it accepted succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn out_of_descriptors_sheds_with_503_and_fails_no_accepted_run() {
    const LIMIT: u64 = 1024;
    const REQUESTS: usize = 1000;
    let Some((dir, _model, mut server, base)) = limited_server(LIMIT, REQUESTS, 64, Duration::from_millis(50)).await
    else {
        return;
    };

    // Every connection is opened (and held) before any request is sent, so that the server
    // holds them all at once, however fast it answers.
    let addr = base.trim_start_matches("http://").to_owned();
    let mut sockets = Vec::new();
    for _ in 0..REQUESTS {
        sockets.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    let body = SPEC.replace(", \"max_iterations\": 3", "");
    let request = format!(
        "POST /v1/runs HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let requests: Vec<_> = sockets
        .into_iter()
        .map(|mut socket| {
            let request = request.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                // A refused connection may be closed before the request is written: its
                // answer is still there to read.
                let _ = socket.write_all(request.as_bytes()).await;
                let mut answer = Vec::new();
                tokio::time::timeout(Duration::from_secs(60), socket.read_to_end(&mut answer))
                    .await
                    .map_err(|_| "no answer in 60 s".to_owned())?
                    .map_err(|e| format!("{e:?}"))?;
                let answer = String::from_utf8_lossy(&answer).into_owned();
                let status: u16 = answer.get(9..12).and_then(|s| s.parse().ok()).ok_or_else(|| answer.clone())?;
                let retry_after = answer
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("retry-after: ").map(str::to_owned));
                let body: Value = answer
                    .split_once("\r\n\r\n")
                    .and_then(|(_, b)| serde_json::from_str(b).ok())
                    .unwrap_or(Value::Null);
                Ok::<_, String>((status, retry_after, body))
            })
        })
        .collect();
    let mut accepted = Vec::new();
    let mut shed = 0;
    for request in requests {
        match request.await.unwrap() {
            Ok((202, _, body)) => accepted.push(body["run_id"].as_str().unwrap().to_owned()),
            Ok((503, retry_after, _)) => {
                assert_eq!(retry_after.as_deref(), Some("2"));
                shed += 1;
            }
            other => panic!("neither accepted nor shed: {other:?}"),
        }
    }
    assert_eq!(accepted.len() + shed, REQUESTS);
    assert!(shed > 0, "{REQUESTS} connections at once fit in {LIMIT} files?");
    assert!(accepted.len() >= 100, "only {} accepted", accepted.len());
    let recorded = all_finished_once_each(&base, &accepted, 1, Duration::from_secs(60), dir.path()).await;
    assert_eq!(recorded, accepted.len());
    assert_eq!(terminate(&mut server), Some(0));
}

/// Runs and connections share the open-files budget as they come: a server whose clients hang
/// up after the 202 executes as many runs at once as its limit leaves them, not only the third
/// it keeps for runs however many connections arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runs_take_the_descriptors_connections_leave() {
    const LIMIT: u64 = 1024;
    // What the reserve (256) and the commands' sixteenth (64) leave, and the third of it runs
    // always have.
    const FLOOR: usize = (1024 - 256 - 64) / 3;
    const RUNS: usize = 450;
    let Some((dir, model, mut server, base)) = limited_server(LIMIT, RUNS, 600, Duration::from_secs(3)).await else {
        return;
    };

    let body = SPEC.replace(", \"max_iterations\": 3", "");
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    // 25 requests at a time: the connections stay few.
    for _ in 0..RUNS / 25 {
        let batch: Vec<_> = (0..25)
            .map(|_| {
                let request = client.post(format!("{base}/v1/runs")).header("content-type", "application/json");
                tokio::spawn(request.body(body.clone()).send())
            })
            .collect();
        for sent in batch {
            let response = sent.await.unwrap().unwrap();
            assert_eq!(response.status(), 202);
            let accepted: Value = response.json().await.unwrap();
            ids.push(accepted["run_id"].as_str().unwrap().to_owned());
        }
    }
    // Every run reaches the model while the first are still waiting for their answer.
    let mut peak = 0;
    let reached = redraft_testkit::processes::eventually(Duration::from_secs(30), || {
        peak = peak.max(model.in_flight_at(Instant::now()));
        model.calls() >= RUNS
    })
    .await;
    peak = peak.max(model.in_flight_at(Instant::now()));
    assert!(reached, "{} of {RUNS} runs reached the model", model.calls());
    assert!(peak > FLOOR + 100, "at most {peak} runs at once: the budget left them only their floor of {FLOOR}");
    let recorded = all_finished_once_each(&base, &ids, 1, Duration::from_secs(60), dir.path()).await;
    assert_eq!(recorded, RUNS);
    assert_eq!(terminate(&mut server), Some(0));
}

/// A fake model answering after `delay`, and `redraft serve` executing `slots` runs at once
/// under an open-files limit of `limit` (soft and hard, as a container might set it); `None`
/// (the skip said) when this process cannot open the files for `requests` at once.
async fn limited_server(
    limit: u64,
    requests: usize,
    slots: usize,
    delay: Duration,
) -> Option<(tempfile::TempDir, ByAttempt, Proc, String)> {
    let ours = redraft::limits::open_files().unwrap_or(0);
    if ours < requests as u64 + 200 {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIP {}: this process may open only {ours} files", module_path!());
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = ByAttempt::start(&[ANSWERS[2]], delay).await;
    write_config(dir.path(), &model, None);
    let config = std::fs::read_to_string(dir.path().join("redraft.toml")).unwrap();
    let config = config.replace("max_concurrent_runs = 16", &format!("max_concurrent_runs = {slots}"));
    write(dir.path(), "redraft.toml", &config);
    let (server, base) = serve_limited(dir.path(), limit);
    Some((dir, model, server, base))
}

/// `redraft serve` under an open-files limit of `limit` (soft and hard).
fn serve_limited(dir: &Path, limit: u64) -> (Proc, String) {
    let bin = assert_cmd::cargo::cargo_bin("redraft");
    let script = format!("ulimit -n {limit} && exec '{}' serve --addr 127.0.0.1:0", bin.display());
    let env = redraft_process(dir, &[], "serve.log");
    let mut sh = Command::new("sh");
    sh.current_dir(dir).env_clear().envs(env.get_envs().filter_map(|(k, v)| Some((k, v?)))).args(["-c", &script]);
    sh.stdout(Stdio::null()).stderr(Stdio::piped());
    spawn_serving(sh, dir, "serve")
}
