//! `redraft serve` as a process: the address it prints, a crash (SIGKILL) mid-run and the
//! restart that resumes it, graceful shutdown on SIGTERM, and the loopback rule.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use redraft_testkit::processes::eventually_async;
use redraft_testkit::{FakeOpenAi, reply, slow};
use serde_json::{Value, json};

use crate::{output, redraft, write};

const SPEC: &str = r#"{"prompt": "Which city?", "schema": {"type": "object", "required": ["city"], "properties": {"city": {"const": "Toledo"}}}}"#;

fn write_config(dir: &Path, base_url: &str) {
    write(
        dir,
        "redraft.toml",
        &format!(
            "default_model = \"fake/m\"\n\n[server]\ngrace_period = \"20s\"\n\n[queue]\nlease = \"1s\"\n\n[providers.fake]\ntype = \"openai\"\nbase_url = \"{base_url}\"\n"
        ),
    );
}

/// `redraft serve` started in `dir`, and the address it printed.
pub struct Serving {
    child: Child,
    pub base: String,
    log: std::sync::mpsc::Receiver<String>,
    /// What it logged before the address.
    early: Vec<String>,
}

pub fn serve(dir: &Path, extra_env: &[(&str, &str)], addr: &str) -> Serving {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("redraft"));
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .args(["serve", "--addr", addr])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, log) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Log lines (with `RUST_LOG` set) may come before the address.
    let mut early = Vec::new();
    let base = loop {
        let line =
            log.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("serve printed no address: {early:?}"));
        match line.strip_prefix("redraft: listening on ") {
            Some(base) => break base.to_owned(),
            None if extra_env.iter().any(|(k, _)| *k == "RUST_LOG") => early.push(line),
            None => panic!("unexpected first line: {line}"),
        }
    };
    assert!(base.starts_with("http://127.0.0.1:") || base.starts_with("http://0.0.0.0:"), "{base}");
    Serving { base, child, log, early }
}

impl Serving {
    async fn get(&self, path: &str) -> Value {
        reqwest::get(format!("{}{path}", self.base)).await.unwrap().json().await.unwrap()
    }

    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// Wait for the process to exit; its code and the rest of its stderr.
    pub async fn exit(mut self) -> (Option<i32>, String) {
        let status = tokio::task::spawn_blocking(move || {
            let status = self.child.wait().unwrap();
            let mut rest = std::mem::take(&mut self.early);
            rest.extend(self.log.try_iter());
            (status, rest)
        })
        .await
        .unwrap();
        (status.0.code(), status.1.join("\n"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_run_resumes_it_on_restart_with_nothing_lost_or_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeOpenAi::start(vec![
        reply(r#"{"city": "Louisville"}"#),
        slow(r#"{"city": "Dayton"}"#, Duration::from_secs(60)),
        reply(r#"{"city": "Toledo"}"#),
    ])
    .await;
    write_config(dir.path(), &model.base_url());
    let server = serve(dir.path(), &[], "127.0.0.1:0");
    let client = reqwest::Client::new();
    let accepted = client
        .post(format!("{}/v1/runs", server.base))
        .header("content-type", "application/json")
        .body(SPEC)
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status(), 202);
    let run_id = accepted.json::<Value>().await.unwrap()["run_id"].as_str().unwrap().to_owned();
    // Attempt 1 recorded, attempt 2 in flight.
    let in_flight = eventually_async(Duration::from_secs(10), || async {
        server.get(&format!("/v1/runs/{run_id}")).await["iterations"] == 1 && model.calls().await >= 2
    })
    .await;
    assert!(in_flight, "attempt 1 was not recorded with attempt 2 in flight");
    assert_eq!(model.calls().await, 2);
    server.signal("-KILL");
    let (code, _) = server.exit().await;
    assert_eq!(code, None, "killed by a signal");
    let listed = output({
        let mut c = redraft(dir.path());
        c.args(["runs", "list", "--json"]);
        c
    })
    .await;
    let runs: Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!((runs[0]["state"].as_str(), runs[0]["iterations"].as_u64()), (Some("running"), Some(1)), "{runs}");

    // The restarted server takes it over once the dead server's lease has expired (1 s here).
    let server = serve(dir.path(), &[], "127.0.0.1:0");
    let halted = eventually_async(Duration::from_secs(10), || async {
        server.get(&format!("/v1/runs/{run_id}")).await.get("status").is_some()
    })
    .await;
    let result = server.get(&format!("/v1/runs/{run_id}")).await;
    assert!(halted, "the run was not taken over: {result}");
    assert_eq!(result["status"], "succeeded", "{result}");
    let cities: Vec<&str> =
        result["history"].as_array().unwrap().iter().map(|a| a["artifact"]["city"].as_str().unwrap()).collect();
    assert_eq!(cities, ["Louisville", "Toledo"], "attempt 1 kept, attempt 2 made once");
    assert_eq!(result["iterations"], 2);
    assert_eq!(model.calls().await, 3, "the interrupted call, and the remade attempt 2");
    let events = reqwest::get(format!("{}/v1/runs/{run_id}/events", server.base)).await.unwrap().text().await.unwrap();
    assert_eq!(events.matches("event: attempt_finished").count(), 2, "{events}");

    server.signal("-TERM");
    let (code, rest) = server.exit().await;
    assert_eq!(code, Some(0), "{rest}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_run_in_flight_finish_then_exits() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeOpenAi::start(vec![slow(r#"{"city": "Toledo"}"#, Duration::from_millis(1500))]).await;
    write_config(dir.path(), &model.base_url());
    let server = serve(dir.path(), &[], "127.0.0.1:0");
    let base = server.base.clone();
    let waiting = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{base}/v1/iterate"))
            .header("content-type", "application/json")
            .body(SPEC)
            .send()
            .await
            .unwrap()
    });
    let in_flight = eventually_async(Duration::from_secs(10), || async { model.calls().await >= 1 }).await;
    assert!(in_flight, "the run never reached the model");
    server.signal("-TERM");
    let response = waiting.await.unwrap();
    assert_eq!(response.status(), 200, "the run in flight finished and was answered");
    let result: Value = response.json().await.unwrap();
    assert_eq!(result["status"], "succeeded");
    let (code, rest) = server.exit().await;
    assert_eq!(code, Some(0), "{rest}");
    assert!(rest.contains("redraft: stopped"), "{rest}");
    let listed = output({
        let mut c = redraft(dir.path());
        c.args(["runs", "list", "--json"]);
        c
    })
    .await;
    assert!(listed.stdout.contains("\"succeeded\""), "{}", listed.stdout);
}

#[tokio::test]
async fn without_tokens_it_refuses_a_non_loopback_address() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "http://127.0.0.1:9/v1");
    let out = output({
        let mut c = redraft(dir.path());
        c.args(["serve", "--addr", "0.0.0.0:0"]);
        c
    })
    .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("refusing to listen on `0.0.0.0:0` without tokens"), "{}", out.stderr);
    assert!(out.stderr.contains("set `REDRAFT_TOKENS`"), "{}", out.stderr);
    let out = output({
        let mut c = redraft(dir.path());
        c.args(["serve", "--addr", "nowhere"]);
        c
    })
    .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("`nowhere` is not an address to listen on"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tokens_it_listens_anywhere_and_asks_for_one() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "http://127.0.0.1:9/v1");
    let server = serve(dir.path(), &[("REDRAFT_TOKENS", "t1, t2")], "0.0.0.0:0");
    let port = server.base.rsplit(':').next().unwrap().to_owned();
    let url = format!("http://127.0.0.1:{port}/v1/runs");
    let client = reqwest::Client::new();
    assert_eq!(client.get(&url).send().await.unwrap().status(), 401);
    assert_eq!(client.get(&url).bearer_auth("t2").send().await.unwrap().status(), 200);
    let health: Value = reqwest::get(format!("http://127.0.0.1:{port}/healthz")).await.unwrap().json().await.unwrap();
    assert_eq!(health, json!({"status": "ok", "runs_in_flight": 0}));
    server.signal("-TERM");
    let (code, rest) = server.exit().await;
    assert_eq!(code, Some(0), "{rest}");
}

/// With no config at all, only `OPENAI_BASE_URL`: the backend's models are listed, and a bare
/// model name goes to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_env_only_setup_lists_the_backends_models_and_takes_bare_names() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let backend = MockServer::start().await;
    let list = json!({"object": "list", "data": [{"id": "gpt-4o-mini", "object": "model"}, {"id": "qwen2.5-7b", "object": "model"}]});
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(list))
        .mount(&backend)
        .await;
    let mut answer = redraft_testkit::completion(r#"{"city": "Toledo"}"#);
    answer["model"] = json!("gpt-4o-mini-2024-07-18");
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer))
        .mount(&backend)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let base_url = format!("{}/v1", backend.uri());
    let server = serve(dir.path(), &[("OPENAI_BASE_URL", &base_url), ("OPENAI_API_KEY", "sk-test")], "127.0.0.1:0");
    let models = server.get("/v1/models").await;
    let ids: Vec<&str> = models["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["openai/gpt-4o-mini", "openai/qwen2.5-7b"]);
    let schema = json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}});
    let body = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Which city?"}],
                      "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}}});
    let answer: Value = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", server.base))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["model"], "gpt-4o-mini-2024-07-18", "{answer}");
    assert_eq!(answer["choices"][0]["message"]["content"], r#"{"city":"Toledo"}"#);
    server.signal("-TERM");
    let (code, _) = server.exit().await;
    assert_eq!(code, Some(0));
}
