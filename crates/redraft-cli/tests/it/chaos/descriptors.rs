//! A server near its open-files limit: new connections are shed with 503 and `Retry-After`
//! rather than running out of descriptors, and runs take the descriptors connections leave.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redraft_testkit::ByAttempt;
use serde_json::Value;

use super::{ANSWERS, Proc, SPEC, all_finished_once_each, redraft_process, spawn_serving, terminate, write_config};
use crate::write;

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
    // The model holds each call 6 s: a loaded machine still submits every run before the first
    // answers, so the peak measures the budget, not the machine's speed.
    let Some((dir, model, mut server, base)) = limited_server(LIMIT, RUNS, 600, Duration::from_secs(6)).await else {
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
