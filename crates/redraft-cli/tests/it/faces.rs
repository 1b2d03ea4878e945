//! Every face that takes requests from outside — the HTTP API, the OpenAI-compatible proxy,
//! `/v1/chat` and MCP — refuses each thing the guard refuses, as the released binary: a model
//! reading a file the request names, a command provider nobody opened to the network, a schema
//! file outside the working directory, an `exec:` command or `http:` URL not in the allow-lists,
//! an agent command. Nothing reaches the model, nothing runs, each refusal names its face.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use redraft_testkit::FakeOpenAi;
use serde_json::{Value, json};

use crate::serve::serve;
use crate::write;

fn write_config(dir: &Path, base_url: &str) {
    write(
        dir,
        "redraft.toml",
        &format!(
            "default_model = \"fake/m\"\n\n[server]\nexec_allow = [\"true\"]\nhttp_allow = [\"http://127.0.0.1:9/ok/*\"]\n\n[providers.fake]\ntype = \"openai\"\nbase_url = \"{base_url}\"\n\n[providers.agent]\ntype = \"command\"\ncommand = \"touch {}\"\n",
            dir.join("agent-ran").display()
        ),
    );
}

/// What each guard is tested with: the run-request fields that trip it, and a marker that
/// would exist had anything run.
fn cases(dir: &Path) -> Vec<(&'static str, Value)> {
    let mark = dir.join("exec-ran").display().to_string();
    vec![
        ("a mock model naming a file", json!({"model": "mock//etc/passwd"})),
        ("a mock model climbing out", json!({"model": "mock/../../../../etc/passwd"})),
        ("a command provider", json!({"model": "agent/x"})),
        ("a command provider by command/", json!({"model": "command/agent"})),
        ("a schema file outside", json!({"evaluator": "schema:/etc/passwd"})),
        ("an exec command not allowed", json!({"evaluator": format!("exec:true; touch {mark}")})),
        ("an http URL not allowed", json!({"evaluator": "http:http://127.0.0.1:9/ok/../admin"})),
        ("an agent command", json!({"agent": ["touch", mark]})),
    ]
}

fn with(prompt_fields: &Value, extra: &Value) -> Value {
    let mut body = json!({"prompt": "Which city?", "max_iterations": 1});
    for (k, v) in prompt_fields.as_object().unwrap().iter().chain(extra.as_object().unwrap()) {
        body[k] = v.clone();
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_network_face_refuses_what_the_guard_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeOpenAi::start(vec![]).await;
    write_config(dir.path(), &model.base_url());
    let server = serve(dir.path(), &[], "127.0.0.1:0");
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| {
        http.post(format!("{}{path}", server.base)).header("content-type", "application/json").json(&body).send()
    };

    let mut refusals = 0;
    for (what, fields) in cases(dir.path()) {
        // The JSON API, synchronous and in the background.
        for path in ["/v1/iterate", "/v1/runs"] {
            let answer = post(path, with(&fields, &json!({}))).await.unwrap();
            let status = answer.status().as_u16();
            let body: Value = answer.json().await.unwrap();
            assert_eq!(status, 403, "{path} {what}: {body}");
            assert!(body["error"]["code"].as_str().unwrap().ends_with("_not_allowed"), "{path} {what}: {body}");
            assert!(
                body["error"]["message"].as_str().unwrap().contains("not allowed over HTTP"),
                "{path} {what}: {body}"
            );
            refusals += 1;
        }
        // The proxy and /v1/chat name only a model.
        if let Some(model_name) = fields.get("model") {
            let completion = json!({"model": model_name, "messages": [{"role": "user", "content": "Which city?"}]});
            for (path, body) in [
                ("/v1/chat/completions", completion.clone()),
                ("/v1/chat/completions", with(&completion, &json!({"response_format": {"type": "json_object"}}))),
                ("/v1/chat", json!({"model": model_name, "prompt": "Which city?"})),
            ] {
                let answer = post(path, body).await.unwrap();
                let status = answer.status().as_u16();
                let body: Value = answer.json().await.unwrap();
                assert_eq!(status, 403, "{path} {what}: {body}");
                assert!(
                    body["error"]["message"].as_str().unwrap().contains("not allowed over HTTP"),
                    "{path} {what}: {body}"
                );
                refusals += 1;
            }
        }
    }
    let runs: Value = http.get(format!("{}/v1/runs", server.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(runs["runs"], json!([]), "nothing was recorded");
    server.signal("-TERM");
    server.exit().await;

    // MCP, over stdio as a host starts it.
    let mut mcp = Command::new(assert_cmd::cargo::cargo_bin("redraft"))
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join(".config"))
        .args(["mcp", "--no-store"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = mcp.stdin.take().unwrap();
    let mut stdout = BufReader::new(mcp.stdout.take().unwrap());
    let mut rpc = |id: u64, method: &str, params: Value| -> Value {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{line}").unwrap();
        if method == "initialize" {
            writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
        }
        loop {
            let mut reply = String::new();
            assert!(stdout.read_line(&mut reply).unwrap() > 0, "redraft mcp closed stdout");
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
    for (i, (what, fields)) in cases(dir.path()).into_iter().enumerate() {
        let result =
            rpc(i as u64 + 1, "tools/call", json!({"name": "iterate", "arguments": with(&fields, &json!({}))}));
        assert_eq!(result["isError"], true, "MCP {what}: {result}");
        let text = result["content"][0]["text"].as_str().unwrap();
        // `agent` is not even an argument of the MCP tool.
        let refused = text.contains("not allowed over MCP") || (what == "an agent command" && text.contains("`agent`"));
        assert!(refused, "MCP {what}: {text}");
        refusals += 1;
    }
    drop(stdin);
    mcp.wait().unwrap();

    assert_eq!(refusals, 8 * 2 + 4 * 3 + 8, "every face was asked every applicable question");
    assert_eq!(model.calls().await, 0, "nothing was sent to the model");
    assert!(!dir.path().join("exec-ran").exists() && !dir.path().join("agent-ran").exists(), "something ran");
}
