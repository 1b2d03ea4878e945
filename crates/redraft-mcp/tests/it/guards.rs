//! The guards over MCP: the hostile `exec:` corpus is refused and none of it runs; a `mock/`
//! model naming a file, a schema path outside the working directory, an unlisted `http:` URL
//! and an inline sandbox passing variables through are refused, each saying "over MCP".

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use redraft_testkit::hostile::{EXEC_ALLOW, EXEC_ALLOWED, FAKE_PYTHON, exec_payloads};
use redraft_testkit::{FakeOpenAi, reply};
use serde_json::json;

use crate::{Client, config};

fn fake_python(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("python3");
    std::fs::write(&path, FAKE_PYTHON).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

async fn client(model: &FakeOpenAi, work: &Path) -> Client {
    client_with(model, work, "schema_dir = \".\"\n").await
}

async fn client_with(model: &FakeOpenAi, work: &Path, server: &str) -> Client {
    let allow = EXEC_ALLOW.iter().map(|e| format!("'{}'", e.replace('\'', "\\'"))).collect::<Vec<_>>().join(", ");
    let cfg = config(&format!(
        "default_model = \"fake/small\"\n[server]\nexec_allow = [{allow}]\nhttp_allow = [\"http://127.0.0.1:9/ok/*\"]\n{server}[providers.fake]\ntype = \"openai\"\nbase_url = \"{}\"\n",
        model.base_url()
    ));
    let setup = redraft_mcp::McpSetup::new(cfg, work.to_owned()).unwrap();
    Client::start(setup).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_hostile_command_runs_over_mcp() {
    let model = FakeOpenAi::start(vec![]).await;
    let work = tempfile::tempdir().unwrap();
    fake_python(work.path());
    fake_python(&work.path().join("bin"));
    let marks = work.path().join("marks");
    std::fs::create_dir(&marks).unwrap();
    let mut client = client(&model, work.path()).await;
    let payloads = exec_payloads(
        |i| marks.join(format!("m{i}")).display().to_string(),
        &work.path().join("bin").display().to_string(),
    );
    assert!(payloads.len() >= 40, "the corpus has {} payloads", payloads.len());
    for (what, command) in &payloads {
        let err = client.error("iterate", json!({"prompt": "x", "evaluator": format!("exec:{command}")})).await;
        assert!(err.contains("is not allowed over MCP") && err.contains("exec_allow"), "{what}: {command:?}: {err}");
    }
    let left: Vec<_> = std::fs::read_dir(&marks).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "payloads ran: {left:?}");
    assert!(!work.path().join("ran").exists() && !work.path().join("bin/ran").exists(), "a fake python3 ran");
    assert_eq!(model.calls().await, 0, "nothing was sent to the model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_the_allow_list_admits_run_over_mcp() {
    let model = FakeOpenAi::start(EXEC_ALLOWED.iter().map(|_| reply(r#"{"city": "Toledo"}"#)).collect()).await;
    let work = tempfile::tempdir().unwrap();
    let mut client = client(&model, work.path()).await;
    for command in EXEC_ALLOWED {
        let run = client.ok("iterate", json!({"prompt": "x", "evaluator": format!("exec:{command}")})).await;
        assert_eq!(run["status"], "succeeded", "{command}: {run}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_urls_models_and_sandboxes_a_request_names_are_refused_over_mcp() {
    let model = FakeOpenAi::start(vec![]).await;
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("ok.json"), r#"{"type": "object"}"#).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", work.path().join("link.json")).unwrap();
    let mut client = client(&model, work.path()).await;
    let cases = [
        json!({"prompt": "x", "model": "mock//etc/passwd"}),
        json!({"prompt": "x", "model": "mock/../../etc/passwd"}),
        json!({"prompt": "x", "provider": "mock", "model": "/etc/passwd"}),
        json!({"prompt": "x", "evaluator": "schema:/etc/passwd"}),
        json!({"prompt": "x", "evaluator": "schema:../x.json"}),
        json!({"prompt": "x", "evaluator": "schema:link.json"}),
        json!({"prompt": "x", "evaluator": "http:http://169.254.169.254/latest/meta-data"}),
        json!({"prompt": "x", "evaluator": "http:http://127.0.0.1:9/ok/../admin"}),
        json!({"prompt": "x", "evaluator": "http:http://x@127.0.0.1:9/ok/a"}),
        json!({"prompt": "x", "evaluator": "exec:true", "sandbox": {"env": ["OPENAI_API_KEY"]}}),
        json!({"prompt": "x", "evaluator": "exec:true", "sandbox": {"workdir": "/"}}),
        json!({"prompt": "x", "model": "command/agent"}),
    ];
    for args in cases {
        let err = client.error("iterate", args.clone()).await;
        assert!(err.contains("not allowed over MCP") && err.contains("hint:"), "{args}: {err}");
        assert!(!err.contains("root:"), "{args}: the file's content leaked: {err}");
    }
    // A file that is not there is named as it was asked for, not where the server looked.
    let err = client.error("iterate", json!({"prompt": "x", "evaluator": "schema:missing.json"})).await;
    let place = work.path().canonicalize().unwrap();
    assert!(err.contains("`missing.json`") && !err.contains(&*place.to_string_lossy()), "{err}");
    // Without a `schema_dir`, no file is read for a request, not even one in the working
    // directory (`creds.json` could be any JSON file the server can read).
    std::fs::write(work.path().join("creds.json"), r#"{"api_key": "sk-do-not-show"}"#).unwrap();
    let mut client = client_with(&model, work.path(), "").await;
    for file in ["creds.json", "ok.json", "./ok.json"] {
        let err = client.error("iterate", json!({"prompt": "x", "evaluator": format!("schema:{file}")})).await;
        assert!(err.contains("not allowed over MCP") && err.contains("schema_dir"), "{file}: {err}");
        assert!(!err.contains("sk-do-not-show"), "{file}: the file's content leaked: {err}");
    }
    assert_eq!(model.calls().await, 0, "nothing was sent to the model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ref_in_an_allowed_schema_file_cannot_reach_outside_the_working_directory() {
    let model = FakeOpenAi::start(vec![reply(r#"{"city": "Toledo"}"#)]).await;
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(root.path().join("secret.json"), r#"{"type": "object"}"#).unwrap();
    std::fs::write(work.join("escape.json"), r#"{"$ref": "../secret.json"}"#).unwrap();
    std::fs::write(work.join("city.json"), r#"{"type": "object", "required": ["city"]}"#).unwrap();
    std::fs::write(work.join("order.json"), r#"{"$ref": "city.json"}"#).unwrap();
    let mut client = client(&model, &work).await;
    let err = client.error("iterate", json!({"prompt": "x", "evaluator": "schema:escape.json"})).await;
    assert!(err.contains("`../secret.json` is outside the schema file's directory") && err.contains("hint:"), "{err}");
    assert_eq!(model.calls().await, 0, "nothing was sent to the model");
    // A reference that stays inside is followed.
    let run = client.ok("iterate", json!({"prompt": "x", "evaluator": "schema:order.json"})).await;
    assert_eq!(run["status"], "succeeded", "{run}");
}
