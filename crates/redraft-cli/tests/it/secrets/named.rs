//! What the config names is secret from the moment the config is loaded, on the released
//! binary: every provider's key and the ecosystem's default keys, every variable passed through
//! to a command whatever its name, every credential a URL carries (a token as the user, a query
//! value, a password no URL parser reads, the Basic form a client sends), before any request and
//! through every exit — HTTP, MCP, the store, `runs show`, `config show`, errors and logs. A
//! model server is an exit too: what a verifier printed and what a model answered reach it
//! redacted. Stderr holds none: TOML errors quoting a line, panics.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use redraft_testkit::EchoingOpenAi;
use serde_json::{Value, json};

use super::{SCHEMA, Seen};
use crate::serve::serve;
use crate::{output, redraft, write};

const ECHO_KEY: &str = "sk-echo-named-1f2e3d4c5b6a";
const ANT_KEY: &str = "sk-ant-named-2b4d6f8a0c1e";
const OPENAI_KEY: &str = "sk-openai-named-9a8b7c6d5e4f";
/// Passed to a sandbox's commands, under names that do not say they hold credentials.
const PASSED: [(&str, &str); 5] = [
    ("DEPLOY_TOKEN", "deploy-named-0a1b2c3d4e"),
    ("GH_PAT", "ghp-named-5f6a7b8c9d0e"),
    ("PASS", "pass-named-6e5d4c3b2a"),
    ("DSN", "dsn-named-7f8e9d0c1b2a"),
    ("CREDS", "creds-named-3a4b5c6d7e"),
];

fn environment() -> Vec<(&'static str, &'static str)> {
    let mut env = vec![("ECHO_API_KEY", ECHO_KEY), ("ANTHROPIC_API_KEY", ANT_KEY), ("OPENAI_API_KEY", OPENAI_KEY)];
    env.extend(PASSED);
    env.push(("RUST_LOG", "trace"));
    env
}

fn secrets() -> Vec<&'static str> {
    let mut all = vec![ECHO_KEY, ANT_KEY, OPENAI_KEY];
    all.extend(PASSED.iter().map(|(_, v)| *v));
    all
}

/// An `exec:` verifier printing its environment, in the sandbox `ci`.
fn printing_env() -> Value {
    json!({
        "prompt": "Which city?",
        "schema": serde_json::from_str::<Value>(SCHEMA).unwrap(),
        "evaluator": "exec:sh -c 'env; exit 1'",
        "sandbox": "ci",
        "max_iterations": 1,
    })
}

/// What an answer showing the sandbox's environment must hold: each passed variable, redacted.
fn expect_passed_and_redacted(seen: &mut Seen, place: &str, text: &str) {
    for (name, _) in PASSED.iter().chain([&("ANTHROPIC_API_KEY", ""), &("OPENAI_API_KEY", "")]) {
        let line = format!("{name}=[redacted]");
        seen.expect(text.contains(&line), || format!("{place}: no `{line}` in {text:.3000}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_credential_the_config_names_is_secret_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    let model = EchoingOpenAi::start().await;
    write(
        dir.path(),
        "redraft.toml",
        &format!(
            r#"default_model = "echo/m"

[policy]
max_iterations = 1
transport_retries = 0

[server]
exec_allow = ["sh -c 'env; exit 1'"]
sandboxes = ["ci"]

[providers.echo]
type = "openai"
base_url = "{}"
api_key_env = "ECHO_API_KEY"

[providers.ant]
type = "anthropic"
api_key_env = "ANTHROPIC_API_KEY"

[sandboxes.ci]
env = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DEPLOY_TOKEN", "GH_PAT", "PASS", "DSN", "CREDS"]
"#,
            model.base_url()
        ),
    );
    let mut seen = Seen::default();

    // A fresh server: no `ant/` run, no command provider ever built.
    let server = serve(dir.path(), &environment(), "127.0.0.1:0");
    let http = reqwest::Client::new();
    let answer = http.post(format!("{}/v1/iterate", server.base)).json(&printing_env()).send().await.unwrap();
    let text = seen.add("/v1/iterate in the sandbox ci", answer.text().await.unwrap());
    expect_passed_and_redacted(&mut seen, "/v1/iterate", &text);
    let id = serde_json::from_str::<Value>(&text).unwrap()["run_id"].as_str().unwrap().to_owned();
    for path in [format!("/v1/runs/{id}"), format!("/v1/runs/{id}/events")] {
        let text = http.get(format!("{}{path}", server.base)).send().await.unwrap().text().await.unwrap();
        seen.add(path, text);
    }
    server.signal("-TERM");
    let (code, log) = server.exit().await;
    assert_eq!(code, Some(0), "{log}");
    seen.add("the server's log", log);

    // MCP, started fresh too.
    let (transcript, log) = mcp_iterate(dir.path(), printing_env());
    expect_passed_and_redacted(&mut seen, "MCP iterate", &transcript);
    seen.add("MCP's messages", transcript);
    seen.add("MCP's log", log);

    // The stored run, shown by the CLI, and the database files.
    let mut cmd = redraft(dir.path());
    cmd.args(["runs", "show", &id]);
    let out = output(cmd).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    seen.add("redraft runs show", out.stdout);
    for entry in std::fs::read_dir(dir.path().join(".redraft")).unwrap() {
        let path = entry.unwrap().path();
        seen.add(path.display().to_string(), String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
    }
    seen.assert_none_of(&secrets());
}

/// One `iterate` over MCP: the messages and the log.
fn mcp_iterate(dir: &Path, arguments: Value) -> (String, String) {
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
    let initialize =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}});
    for (id, method, params) in
        [(0, "initialize", initialize), (1, "tools/call", json!({"name": "iterate", "arguments": arguments}))]
    {
        writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap();
        if method == "initialize" {
            writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
        }
        loop {
            let mut reply = String::new();
            assert!(stdout.read_line(&mut reply).unwrap() > 0, "redraft mcp closed stdout");
            transcript.push_str(&reply);
            if serde_json::from_str::<Value>(&reply).unwrap()["id"] == json!(id) {
                break;
            }
        }
    }
    drop(stdin);
    assert!(mcp.wait().unwrap().success());
    (transcript, log.join().unwrap())
}

/// An address on 127.0.0.1 where nothing listens.
fn refused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_credential_in_a_url_is_secret_wherever_the_url_is_named() {
    const TOKEN_USER: &str = "tokuser-named-AAAA1111";
    const QUERY_KEY: &str = "query-named-BBBB2222";
    const QUERY_TOKEN: &str = "tok-named-CCCC3333";
    const ANT_USER: &str = "anttok-named-DDDD4444";
    const BASIC_PASSWORD: &str = "basic-named-EEEE5555";
    /// base64("basicuser:basic-named-EEEE5555"), as reqwest sends it and the server echoes it.
    const BASIC: &str = "YmFzaWN1c2VyOmJhc2ljLW5hbWVkLUVFRUU1NTU1";
    const OTLP_PASSWORD: &str = "otlp-named-FFFF6666";
    const DB_PASSWORD: &str = "pa/ss-named-GGGG7777";
    let dir = tempfile::tempdir().unwrap();
    let model = EchoingOpenAi::start().await;
    let port = refused_port();
    let echo = model.base_url().replace("http://", "");
    write(dir.path(), "schema.json", SCHEMA);
    write(
        dir.path(),
        "redraft.toml",
        &format!(
            r#"[policy]
max_iterations = 1
transport_retries = 0

[providers.tok]
type = "openai"
base_url = "http://{TOKEN_USER}@127.0.0.1:{port}/v1"

[providers.q]
type = "openai"
base_url = "http://127.0.0.1:{port}/v1?key={QUERY_KEY}&token={QUERY_TOKEN}"

[providers.antq]
type = "anthropic"
base_url = "http://{ANT_USER}@127.0.0.1:{port}"

[providers.basic]
type = "openai"
base_url = "http://basicuser:{BASIC_PASSWORD}@{echo}"

[telemetry]
otlp_endpoint = "http://otel:{OTLP_PASSWORD}@127.0.0.1:{port}"
"#
        ),
    );
    let database = format!("postgres://rd:{DB_PASSWORD}@127.0.0.1:{port}/redraft");
    let mut seen = Seen::default();
    let mut run = async |args: &[&str], database: Option<&str>| {
        let mut cmd = redraft(dir.path());
        cmd.env("RUST_LOG", "trace").args(args);
        if let Some(url) = database {
            cmd.env("REDRAFT_DATABASE_URL", url);
        }
        let out = output(cmd).await;
        seen.add(format!("redraft {args:?}: stdout"), out.stdout.clone());
        seen.add(format!("redraft {args:?}: stderr"), out.stderr.clone());
        out
    };
    for args in [&["config", "show"][..], &["config", "show", "--origins"]] {
        let out = run(args, Some(&database)).await;
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.stdout.contains("[redacted]"), "{}", out.stdout);
    }
    let out = run(&["runs", "list"], Some(&database)).await;
    assert_ne!(out.code, 0);
    for model in ["tok/m", "q/m", "antq/m"] {
        let out = run(&["run", "-vv", "--model", model, "--prompt", "Which city?"], None).await;
        assert!(out.stderr.contains("[redacted]"), "{model}: {}", out.stderr);
    }
    let out = run(&["run", "--model", "basic/m", "--schema", "schema.json", "--prompt", "Which city?"], None).await;
    assert!(out.stdout.contains("Basic [redacted]"), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(model.authorizations().await, vec![format!("Basic {BASIC}")], "the credentials were sent");
    seen.assert_none_of(&[
        TOKEN_USER,
        QUERY_KEY,
        QUERY_TOKEN,
        ANT_USER,
        BASIC_PASSWORD,
        BASIC,
        OTLP_PASSWORD,
        DB_PASSWORD,
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_is_never_sent_a_known_secret_in_its_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let model = EchoingOpenAi::start().await;
    write(
        dir.path(),
        "redraft.toml",
        &format!(
            "default_model = \"echo/m\"\n\n[policy]\ntransport_retries = 0\n\n[providers.echo]\ntype = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"ECHO_API_KEY\"\n",
            model.base_url()
        ),
    );
    let mut cmd = redraft(dir.path());
    cmd.env("ECHO_API_KEY", ECHO_KEY).env("OPENAI_API_KEY", OPENAI_KEY).args([
        "run",
        "--prompt",
        "Which city?",
        "--eval",
        r#"exec:sh -c "echo verifier saw $OPENAI_API_KEY; exit 1""#,
        "--max-iterations",
        "2",
    ]);
    let out = output(cmd).await;
    assert!(!out.stdout.contains(OPENAI_KEY) && !out.stderr.contains(OPENAI_KEY), "{}{}", out.stdout, out.stderr);
    let bodies = model.bodies().await;
    assert_eq!(bodies.len(), 2, "{}", out.stderr);
    // The second request holds the verifier's output and the model's first answer (which
    // repeated the key it was sent): both redacted.
    assert!(bodies[1].contains("verifier saw [redacted]"), "{}", bodies[1]);
    for body in &bodies {
        assert!(!body.contains(OPENAI_KEY) && !body.contains(ECHO_KEY), "{body}");
    }
    assert_eq!(model.authorizations().await, vec![format!("Bearer {ECHO_KEY}"); 2], "the key still goes in its header");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_that_does_not_parse_is_reported_without_its_passwords() {
    const UNTERMINATED: &str = "pa/ss-named-HHHH8888";
    const TRAILING: &str = "toml-named-IIII9999";
    for (password, text) in [
        (UNTERMINATED, format!("database_url = \"postgres://rd:{UNTERMINATED}@127.0.0.1:1/redraft\n")),
        (TRAILING, format!("database_url = \"postgres://rd:{TRAILING}@127.0.0.1:1/redraft\" junk\n")),
        (TRAILING, format!("[policy]\nmax_iterations = \"postgres://rd:{TRAILING}@127.0.0.1:1/redraft\"\n")),
    ] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "redraft.toml", &text);
        let mut cmd = redraft(dir.path());
        cmd.args(["config", "show"]);
        let out = output(cmd).await;
        assert_eq!(out.code, 2, "{text}: {}", out.stderr);
        assert!(out.stderr.contains("redraft.toml"), "{}", out.stderr);
        assert!(!out.stderr.contains(password) && !out.stdout.contains(password), "{text}: {}", out.stderr);
    }
}
