//! `redraft mcp` driven by the official MCP Python SDK's stdio client
//! (`crates/redraft-mcp/tests/python/mcp_client.py`), as an MCP host would start it.

use std::path::{Path, PathBuf};
use std::process::Command;

use redraft_testkit::{FakeOpenAi, reply};
use serde_json::{Value, json};

use crate::{output, redraft, repo, write};

/// The Python that has the `mcp` package: `REDRAFT_PYTHON`, else `python3`. A Python without it
/// fails the test (it is never skipped).
fn python() -> String {
    let python = std::env::var("REDRAFT_PYTHON").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".into());
    let probe = Command::new(&python).args(["-c", "import mcp"]).output();
    match probe {
        Ok(out) if out.status.success() => python,
        Ok(out) => panic!(
            "`{python}` cannot import the official MCP Python package (`mcp`): {}\nrun ./scripts/test, which installs it into .venv and sets REDRAFT_PYTHON",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!(
            "cannot run `{python}`: {e}\nrun ./scripts/test, which installs the Python clients into .venv and sets REDRAFT_PYTHON"
        ),
    }
}

fn script() -> PathBuf {
    repo().join("crates/redraft-mcp/tests/python/mcp_client.py")
}

fn redraft_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("redraft")
}

/// Run the Python client against `server` (a command line) in `dir`.
async fn client(dir: &Path, extra: &[&str], server: &[String]) -> crate::Output {
    let mut cmd = assert_cmd::Command::new(python());
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("NO_COLOR", "1")
        .arg(script())
        .arg("--cwd")
        .arg(dir)
        .args(extra)
        .arg("--")
        .args(server);
    output(cmd).await
}

fn config(dir: &Path, server: &FakeOpenAi) -> PathBuf {
    write(
        dir,
        "mcp.toml",
        &format!(
            "default_model = \"fake/small\"\n\n[providers.fake]\ntype = \"openai\"\nbase_url = \"{}\"\n",
            server.base_url()
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_drives_every_tool() {
    let server = FakeOpenAi::start(vec![
        reply(r#"{"city": "Toledo", "state": "Ohio"}"#),
        reply("```json\n{\"city\": \"Toledo\", \"state\": \"OH\"}\n```"),
        reply(r#"{"city": "Louisville", "state": "Kentucky"}"#),
        reply(r#"{"city": "Toledo", "state": "OH"}"#),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &server);
    let kinds = repo().join("examples/staffing/kinds");
    let context = std::fs::read_to_string(repo().join("examples/staffing/contexts/toledo-welders.json")).unwrap();
    let command = [
        redraft_bin().display().to_string(),
        "--config".into(),
        config.display().to_string(),
        "mcp".into(),
        "--kinds".into(),
        kinds.display().to_string(),
    ];
    let out = client(dir.path(), &["--context", context.trim()], &command).await;
    assert_eq!(out.code, 0, "the client failed:\n{}\n{}", out.stderr, out.stdout);
    let report: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(report["server"], "redraft");
    assert_eq!(report["tools"], json!(["answer", "decide", "example", "iterate", "submit", "validate"]));
    assert_eq!(report["iterate"]["status"], "succeeded");
    assert_eq!(report["iterate"]["iterations"], 2);
    assert_eq!(report["validate"]["issues"][0]["code"], "rule:city_matches");
    assert_eq!(report["example"]["example_source"], "example.json");
    let submits: Vec<&str> = report["submit"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert!(submits[0].starts_with("Attempt 1 of 3: rejected."), "{}", submits[0]);
    assert!(submits[0].contains("1. /fills/0/worker_id: city 'Louisville' doesn't match contract city 'Toledo'"));
    assert!(submits[1].starts_with("Attempt 2 of 3: rejected."), "{}", submits[1]);
    assert_eq!(submits[2], "Attempt 3 of 3: accepted.");
    assert_eq!(report["decide"]["action"], "escalate");
    assert_eq!(report["answer"], json!({"status": "succeeded", "iterations": 2, "reply": "C-8 is in Toledo, OH."}));
    let told = redraft_testkit::last_user_message(&server.bodies().await[3]);
    assert!(told.contains("Answer: C-8 is in Toledo, OH."), "{told}");
    assert_eq!(server.calls().await, 4);

    // The run was recorded in the store, as `redraft run` records its runs.
    let run_id = report["iterate"]["run_id"].as_str().unwrap();
    let mut show = redraft(dir.path());
    show.args(["--config", &config.display().to_string(), "runs", "show", run_id, "--json"]);
    let shown = output(show).await;
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let stored: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(stored["status"], "succeeded");
    assert_eq!(stored["iterations"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_catches_anything_on_stdout_that_is_not_protocol() {
    // Proof that the test above would catch a stray print: the same server behind a wrapper
    // that writes one log line to stdout first.
    let server = FakeOpenAi::start(Vec::new()).await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &server);
    let command = [
        "sh".into(),
        "-c".into(),
        "echo 'INFO starting redraft'; exec \"$0\" \"$@\"".into(),
        redraft_bin().display().to_string(),
        "--config".into(),
        config.display().to_string(),
        "mcp".into(),
        "--no-store".into(),
    ];
    let out = client(dir.path(), &["--stray-check-only"], &command).await;
    assert_eq!(out.code, 1, "a stray line on stdout went unnoticed:\n{}\n{}", out.stderr, out.stdout);
    assert!(out.stderr.contains("not protocol on stdout"), "{}", out.stderr);
    // And without the wrapper the same check passes.
    let command = [redraft_bin().display().to_string(), "--config".into(), config.display().to_string(), "mcp".into()];
    let out = client(dir.path(), &["--stray-check-only"], &command).await;
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
}
