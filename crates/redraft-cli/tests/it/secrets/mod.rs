//! Secrets leave by no door, checked on the released binary: a model server that repeats the
//! `Authorization` header it is sent (in its 400 and 500 errors and in its answers) is asked
//! through every face — `/v1/chat`, the proxy (plain, streamed, with a schema), `/v1/iterate`,
//! MCP, `redraft run` — with the server's secrets in its environment, and no secret is found in
//! any answer, error, stored run (read back over the API, with `runs show`, and in the database
//! files themselves), `/metrics`, a run's event stream, or the logs at `RUST_LOG=trace` / `-vv`.
//! Commands started for a network request (a configured `command` provider, an `exec:`
//! verifier) see none of the server's variables; `pass_env` passes exactly the ones it names.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use redraft_testkit::EchoingOpenAi;
use serde_json::{Value, json};

use crate::serve::serve;
use crate::{output, redraft, write};

/// The echoing provider's key: read by redraft (`api_key_env`), sent, echoed back.
const ECHO_KEY: &str = "sk-echo-7f3a9c1e5b2d4f6a8c0e";
/// Keys in the server's environment that no request uses: never read, so only a command that
/// inherited the environment could show them.
const OPENAI_KEY: &str = "sk-openai-unread-4b6d8f0a2c4e";
const ANTHROPIC_KEY: &str = "sk-ant-unread-3c5e7a9b1d2f";
/// The server's bearer token (`REDRAFT_TOKENS`).
const TOKEN: &str = "tok-bearer-9e8d7c6b5a49";
/// What `pass_env` gives one command provider.
const AGENT_TOKEN: &str = "agent-token-1a2b3c4d5e6f";

const SECRETS: [&str; 5] = [ECHO_KEY, OPENAI_KEY, ANTHROPIC_KEY, TOKEN, AGENT_TOKEN];
/// The variables no command started for a request may see.
const SERVER_VARIABLES: [&str; 5] =
    ["ECHO_API_KEY=", "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=", "REDRAFT_TOKENS=", "AGENT_TOKEN="];

const SCHEMA: &str = r#"{"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}"#;

fn write_config(dir: &Path, base_url: &str) {
    write(
        dir,
        "redraft.toml",
        &format!(
            r#"default_model = "echo/m"

[policy]
max_iterations = 1
transport_retries = 0

[server]
exec_allow = ["sh -c 'env; exit 1'"]
command_providers = ["agent", "keyed"]

[providers.echo]
type = "openai"
base_url = "{base_url}"
api_key_env = "ECHO_API_KEY"

[providers.agent]
type = "command"
command = "cat > /dev/null; env"

[providers.keyed]
type = "command"
command = "cat > /dev/null; env; echo \"length=${{#AGENT_TOKEN}}\""
pass_env = ["AGENT_TOKEN"]
"#
        ),
    );
}

/// The server's (and the CLI's) environment: every secret, and logs at their most verbose.
fn environment() -> Vec<(&'static str, &'static str)> {
    vec![
        ("ECHO_API_KEY", ECHO_KEY),
        ("OPENAI_API_KEY", OPENAI_KEY),
        ("ANTHROPIC_API_KEY", ANTHROPIC_KEY),
        ("REDRAFT_TOKENS", TOKEN),
        ("AGENT_TOKEN", AGENT_TOKEN),
        ("RUST_LOG", "trace"),
    ]
}

/// Everything read from redraft, by where it came from, and what was wrong with it: every
/// failure is reported at the end, together.
#[derive(Default)]
struct Seen {
    texts: Vec<(String, String)>,
    problems: Vec<String>,
}

impl Seen {
    fn add(&mut self, place: impl Into<String>, text: impl Into<String>) -> String {
        let text = text.into();
        self.texts.push((place.into(), text.clone()));
        text
    }

    fn expect(&mut self, holds: bool, problem: impl FnOnce() -> String) {
        if !holds {
            self.problems.push(problem());
        }
    }

    /// `env_output` is the output of `env` in a command started for a request: no variable of
    /// the server's is there.
    fn expect_clean_environment(&mut self, place: &str, env_output: &str) {
        self.expect(env_output.contains("PATH="), || format!("{place}: not the output of `env`: {env_output:.2000}"));
        for variable in SERVER_VARIABLES {
            let line = env_output.lines().find(|l| l.starts_with(variable));
            self.expect(line.is_none(), || format!("{place}: a command started for a request sees `{line:?}`"));
        }
    }

    fn assert_no_secret(self) {
        self.assert_none_of(&SECRETS);
    }

    fn assert_none_of(mut self, secrets: &[&str]) {
        for (place, text) in &self.texts {
            for &secret in secrets {
                if let Some(at) = text.find(secret) {
                    let from = text.floor_char_boundary(at.saturating_sub(300));
                    let to = text.ceil_char_boundary((at + 300).min(text.len()));
                    self.problems.push(format!("{place} holds the secret `{secret}`: …{}…", &text[from..to]));
                }
            }
        }
        assert!(self.problems.is_empty(), "{} problem(s):\n\n{}", self.problems.len(), self.problems.join("\n\n"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_leaves_by_any_face_and_commands_see_only_what_the_config_names() {
    let dir = tempfile::tempdir().unwrap();
    let model = EchoingOpenAi::start().await;
    write_config(dir.path(), &model.base_url());
    write(dir.path(), "schema.json", SCHEMA);
    let mut seen = Seen::default();

    let server = serve(dir.path(), &environment(), "127.0.0.1:0");
    let http = reqwest::Client::new();
    let base = server.base.clone();
    let post = |path: &str, body: Value| http.post(format!("{base}{path}")).bearer_auth(TOKEN).json(&body).send();
    let get = |path: &str| http.get(format!("{base}{path}")).bearer_auth(TOKEN).send();

    // /v1/chat: the 400 and the 500 (errors), then an answer repeating the key.
    for (prompt, status) in [("status 400", 502), ("status 500", 502), ("Which city?", 200)] {
        let answer = post("/v1/chat", json!({"prompt": prompt})).await.unwrap();
        assert_eq!(answer.status().as_u16(), status, "/v1/chat {prompt}");
        let text = seen.add(format!("/v1/chat {prompt}"), answer.text().await.unwrap());
        seen.expect(text.contains("Bearer [redacted]"), || format!("/v1/chat {prompt}: {text}"));
    }

    // The proxy: passed through, streamed, and as a run (with a schema).
    let completion = |prompt: &str| json!({"model": "echo/m", "messages": [{"role": "user", "content": prompt}]});
    for prompt in ["status 400", "status 500", "Which city?"] {
        for body in [
            completion(prompt),
            {
                let mut b = completion(prompt);
                b["stream"] = json!(true);
                b
            },
            {
                let mut b = completion(prompt);
                b["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "c", "schema": serde_json::from_str::<Value>(SCHEMA).unwrap()}});
                b
            },
        ] {
            let answer = post("/v1/chat/completions", body.clone()).await.unwrap();
            let status = answer.status().as_u16();
            let text = seen.add(format!("/v1/chat/completions {body}"), answer.text().await.unwrap());
            seen.expect(text.contains("[redacted]"), || format!("/v1/chat/completions {body} ({status}): {text}"));
        }
    }

    // A recorded run whose model fails, and one whose answer repeats the key.
    let mut run_ids = Vec::new();
    for prompt in ["Which city? status 400", "Which city?"] {
        let answer =
            post("/v1/iterate", json!({"prompt": prompt, "schema": serde_json::from_str::<Value>(SCHEMA).unwrap()}))
                .await
                .unwrap();
        let text = seen.add(format!("/v1/iterate {prompt}"), answer.text().await.unwrap());
        let result: Value = serde_json::from_str(&text).unwrap();
        seen.expect(text.contains("[redacted]"), || format!("/v1/iterate {prompt}: {text}"));
        run_ids.push(result["run_id"].as_str().unwrap().to_owned());
    }
    let succeeded: Value = serde_json::from_str(&seen.texts.last().unwrap().1).unwrap();
    seen.expect(succeeded["artifact"] == json!({"city": "Bearer [redacted]"}), || format!("the artifact: {succeeded}"));
    for id in &run_ids {
        for path in [format!("/v1/runs/{id}"), format!("/v1/runs/{id}/events")] {
            let text = seen.add(&path, get(&path).await.unwrap().text().await.unwrap());
            seen.expect(text.contains("[redacted]"), || format!("{path}: {text:.2000}"));
        }
    }
    seen.add("/v1/runs", get("/v1/runs").await.unwrap().text().await.unwrap());
    seen.add("/metrics", get("/metrics").await.unwrap().text().await.unwrap());

    // Commands started for the request: a configured command provider, an `exec:` verifier.
    let plain: Value =
        post("/v1/chat", json!({"model": "agent/x", "prompt": "hi"})).await.unwrap().json().await.unwrap();
    let env = seen.add("agent's env", plain["text"].as_str().unwrap_or_default());
    seen.expect_clean_environment("a command provider", &env);
    seen.expect(env.contains("REDRAFT_PROMPT_FILE="), || format!("redraft's own variables are given: {env}"));
    let keyed: Value =
        post("/v1/chat", json!({"model": "keyed/x", "prompt": "hi"})).await.unwrap().json().await.unwrap();
    let env = seen.add("keyed agent's env", keyed["text"].as_str().unwrap_or_default());
    seen.expect(env.contains(&format!("length={}", AGENT_TOKEN.len())), || {
        format!("pass_env passes the variable: {env}")
    });
    let others: Vec<&str> =
        env.lines().filter(|l| SERVER_VARIABLES.iter().any(|v| l.starts_with(v) && *v != "AGENT_TOKEN=")).collect();
    seen.expect(others.is_empty(), || format!("pass_env passes only what it names: {others:?}"));
    let verified = post(
        "/v1/iterate",
        json!({"prompt": "Which city?", "evaluator": "exec:sh -c 'env; exit 1'", "max_iterations": 1}),
    )
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    let verified = seen.add("exec: verifier's env", verified);
    seen.expect_clean_environment("an exec: verifier", &verified.replace("\\n", "\n"));

    server.signal("-TERM");
    let (code, log) = server.exit().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("TRACE") || log.contains("DEBUG"), "the server logged at trace level: {log:.2000}");
    seen.add("the server's log", log);

    // MCP, as a host starts it, recording its runs in the same store.
    seen.add_mcp(dir.path());

    // The CLI: a run that fails and one that repeats the key, at -vv; then the stored runs.
    for prompt in ["Which city? status 400", "Which city?"] {
        let mut cmd = redraft(dir.path());
        for (k, v) in environment() {
            cmd.env(k, v);
        }
        cmd.args(["run", "-vv", "--schema", "schema.json", "--prompt", prompt]);
        let out = output(cmd).await;
        seen.add(format!("redraft run {prompt}: stdout"), out.stdout);
        seen.add(format!("redraft run {prompt}: stderr"), out.stderr);
    }
    // A configured command provider gets a clean environment on the CLI too: the config, not
    // the face, says what passes.
    let mut cmd = redraft(dir.path());
    for (k, v) in environment() {
        cmd.env(k, v);
    }
    cmd.args(["run", "--text", "--model", "agent/x", "--max-iterations", "1", "--prompt", "hi"]);
    let out = output(cmd).await;
    let env = seen.add("the agent's env on the CLI", out.stdout.clone() + &out.stderr);
    seen.expect_clean_environment("a command provider on the CLI", &env);
    for id in &run_ids {
        let mut cmd = redraft(dir.path());
        cmd.args(["runs", "show", id]);
        let out = output(cmd).await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        seen.add(format!("redraft runs show {id}"), out.stdout);
    }
    // The database itself, every file of it (the write-ahead log included).
    for entry in std::fs::read_dir(dir.path().join(".redraft")).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        seen.add(path.display().to_string(), String::from_utf8_lossy(&bytes));
    }
    assert!(model.calls().await > 10, "the model was asked: {}", model.calls().await);
    seen.assert_no_secret();
}

impl Seen {
    /// An MCP session over stdio: a failing and a succeeding `iterate`, then the process's logs.
    fn add_mcp(&mut self, dir: &Path) {
        let mut mcp = Command::new(assert_cmd::cargo::cargo_bin("redraft"));
        mcp.current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("XDG_CONFIG_HOME", dir.join(".config"))
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in environment() {
            mcp.env(k, v);
        }
        let mut mcp = mcp.spawn().unwrap();
        let mut stderr = mcp.stderr.take().unwrap();
        let log = std::thread::spawn(move || {
            let mut log = String::new();
            std::io::Read::read_to_string(&mut stderr, &mut log).unwrap();
            log
        });
        let mut stdin = mcp.stdin.take().unwrap();
        let mut stdout = BufReader::new(mcp.stdout.take().unwrap());
        let mut transcript = String::new();
        let mut rpc = |id: u64, method: &str, params: Value| -> Value {
            let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            writeln!(stdin, "{line}").unwrap();
            if method == "initialize" {
                writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
            }
            loop {
                let mut reply = String::new();
                assert!(stdout.read_line(&mut reply).unwrap() > 0, "redraft mcp closed stdout");
                transcript.push_str(&reply);
                let reply: Value = serde_json::from_str(&reply).unwrap();
                if reply["id"] == json!(id) {
                    return reply["result"].clone();
                }
            }
        };
        rpc(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        );
        for (i, prompt) in ["Which city? status 400", "Which city?", "Which city? status 500"].iter().enumerate() {
            let arguments = json!({"prompt": prompt, "schema": serde_json::from_str::<Value>(SCHEMA).unwrap()});
            let result = rpc(i as u64 + 1, "tools/call", json!({"name": "iterate", "arguments": arguments}));
            self.expect(result.to_string().contains("[redacted]"), || format!("MCP iterate {prompt}: {result}"));
        }
        let arguments =
            json!({"prompt": "hi", "model": "agent/x", "schema": serde_json::from_str::<Value>(SCHEMA).unwrap()});
        let agent = rpc(9, "tools/call", json!({"name": "iterate", "arguments": arguments}));
        self.expect_clean_environment("a command provider over MCP", &agent.to_string().replace("\\n", "\n"));
        drop(stdin);
        let status = mcp.wait().unwrap();
        assert!(status.success(), "redraft mcp: {status}");
        self.add("MCP's messages", transcript);
        self.add("MCP's log", log.join().unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_password_is_a_secret_from_the_moment_it_is_read() {
    const PASSWORD: &str = "db-password-5f4e3d2c";
    let dir = tempfile::tempdir().unwrap();
    let url = format!("postgres://app:{PASSWORD}@127.0.0.1:1/redraft");
    for args in [&["config", "show"][..], &["runs", "list"][..]] {
        let mut cmd = redraft(dir.path());
        cmd.env("REDRAFT_DATABASE_URL", &url).env("RUST_LOG", "trace").args(args);
        let out = output(cmd).await;
        for text in [&out.stdout, &out.stderr] {
            assert!(!text.contains(PASSWORD), "redraft {args:?}: {text:.3000}");
        }
        if args[0] == "config" {
            assert!(out.stdout.contains("postgres://app:[redacted]@127.0.0.1:1/redraft"), "{}", out.stdout);
        }
    }
}

mod named;
