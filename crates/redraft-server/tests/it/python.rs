//! The proxy through the official Python `openai` client, against the real server on
//! 127.0.0.1:0 (in this process) and a fake upstream.

use std::path::Path;
use std::process::Command;

use redraft_server::Server;
use redraft_testkit::{FakeOpenAi, call, reply, tool_calls};
use serde_json::json;

use crate::{config, write_kind};

/// The Python with `openai` installed: `$REDRAFT_PYTHON`, else `python3`. Never skipped.
pub fn python() -> String {
    let python = std::env::var("REDRAFT_PYTHON").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".into());
    let probe = Command::new(&python).args(["-c", "import openai"]).output();
    match probe {
        Ok(out) if out.status.success() => python,
        Ok(out) => panic!(
            "`{python}` cannot import `openai` ({}).\nRun the tests with `./scripts/test`: it installs the Python clients into .venv and sets REDRAFT_PYTHON.",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!(
            "cannot run `{python}`: {e}.\nRun the tests with `./scripts/test`: it installs the Python clients into .venv and sets REDRAFT_PYTHON."
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_client_gets_schema_valid_json() {
    let python = python();
    let upstream = FakeOpenAi::start(vec![
        reply(r#"{"city": "Toledo"}"#),
        reply(r#"{"city": "Toledo", "state": "OH"}"#),
        reply(
            r#"```json
{"city": "Toledo", "state": "OH"}
```"#,
        ),
        reply(r#"{"city": "A"}"#),
        reply(r#"{"city": "B"}"#),
        reply(r#"{"city": "C"}"#),
        tool_calls(json!([call("c1", "Place", r#"{"city": "Toledo"}"#)])),
        tool_calls(json!([call("c2", "Place", r#"{"city": "Toledo", "state": "OH"}"#)])),
        tool_calls(json!([
            call("c3", "weather", r#"{"city": "Toledo"}"#),
            call("c4", "weather", r#"{"city": "Columbus"}"#)
        ])),
        reply(r#"{"city": "D"}"#),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    write_kind(dir.path());
    let server = Server::bind(config(&upstream.base_url(), dir.path()), Some("127.0.0.1:0"), vec!["test-token".into()])
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let serving = tokio::spawn(server.run(stop.clone().cancelled_owned()));

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/proxy_client.py");
    let base_url = format!("http://{addr}/v1");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python).arg(script).arg(base_url).arg("test-token").env("NO_PROXY", "*").output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the Python client failed:\n{stdout}\n{stderr}");
    for expected in [
        r#"checked: ok {"city": "Toledo", "state": "OH"} attempts=2"#,
        "failed: ok max_iterations attempts=3",
        r#"tool forced: ok {"city":"Toledo","state":"OH"} attempts=2"#,
        "tools passed through: ok 2 calls",
        "models: ok ['fake/m']",
        "stream failed: ok max_iterations attempts=1",
        "refused by name: ok logprobs",
        "auth: ok",
    ] {
        assert!(stdout.lines().any(|l| l == expected), "missing `{expected}` in:\n{stdout}");
    }
    assert!(stdout.lines().any(|l| l.starts_with(r#"streamed: ok {"city": "Toledo", "state": "OH"}"#)), "{stdout}");
    assert_eq!(upstream.calls().await, 11, "2 + 1 + 3 + 2 + 1 + 1 attempts and one list of models, nothing more");
    let sent = upstream.bodies().await;
    // The SDK's strict function tool reached the backend strict, and forced.
    assert_eq!(sent[6]["tools"][0]["function"]["strict"], true, "{}", sent[6]);
    assert_eq!(sent[6]["tool_choice"]["function"]["name"], "Place");
    assert_eq!((sent[9]["seed"].as_u64(), sent[9]["top_p"].as_f64()), (Some(7), Some(0.5)), "{}", sent[9]);
    assert!(sent[9].get("redraft").is_none());

    stop.cancel();
    serving.await.unwrap().unwrap();
}
