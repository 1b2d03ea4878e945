//! The store through the CLI: runs are recorded as they happen, listed, shown and resumed
//! after a crash with no attempt lost or repeated.

use std::time::Duration;

use redraft_testkit::{FakeOpenAi, last_user_message, reply, slow};
use serde_json::Value;

use crate::{output, redraft, write};

const SCHEMA: &str = r#"{"type": "object", "required": ["city"], "properties": {"city": {"const": "Toledo"}}}"#;

async fn runs_json(dir: &std::path::Path) -> Vec<Value> {
    let out = output({
        let mut c = redraft(dir);
        c.args(["runs", "list", "--json"]);
        c
    })
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// `redraft run` against `model`, in the background.
fn spawn_run(dir: &std::path::Path, model: &FakeOpenAi) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("redraft"))
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("OPENAI_BASE_URL", model.base_url())
        .args(["run", "--model", "openai/fake", "--schema", "s.json", "--prompt", "Which city?"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_mid_attempt_is_resumed_with_nothing_lost_or_repeated() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "s.json", SCHEMA);
    let model = FakeOpenAi::start(vec![
        reply(r#"{"city": "Louisville"}"#),
        slow(r#"{"city": "Dayton"}"#, Duration::from_secs(60)),
        reply(r#"{"city": "Toledo"}"#),
    ])
    .await;
    let mut child = spawn_run(dir.path(), &model);
    // Wait until the first attempt is recorded and the second is in flight.
    let mut run = Value::Null;
    for _ in 0..200 {
        if dir.path().join(".redraft/redraft.db").exists() {
            let runs = runs_json(dir.path()).await;
            if let Some(r) = runs.first().filter(|r| r["iterations"] == 1) {
                run = r.clone();
                if model.calls().await >= 2 {
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(run["state"], "running", "{run}");
    child.kill().unwrap(); // SIGKILL: no chance to write anything more
    child.wait().unwrap();
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    assert_eq!(runs_json(dir.path()).await[0]["state"], "running", "the crash leaves the run running");

    let mut c = redraft(dir.path());
    c.env("OPENAI_BASE_URL", model.base_url()).args(["runs", "resume", &run_id, "--json"]);
    let out = output(c).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["run_id"], run_id.as_str());
    let cities: Vec<&str> =
        result["history"].as_array().unwrap().iter().map(|a| a["artifact"]["city"].as_str().unwrap()).collect();
    assert_eq!(cities, ["Louisville", "Toledo"], "attempt 1 kept, attempt 2 made once");
    assert_eq!(model.calls().await, 3);
    // The resumed attempt carried the feedback on attempt 1.
    let resumed = last_user_message(&model.bodies().await[2]);
    assert!(resumed.starts_with("Attempt 2 of 3."), "{resumed}");
    assert!(resumed.contains("Louisville"), "{resumed}");

    let runs = runs_json(dir.path()).await;
    assert_eq!((runs[0]["state"].as_str(), runs[0]["iterations"].as_u64()), (Some("succeeded"), Some(2)));
    let shown = output({
        let mut c = redraft(dir.path());
        c.args(["runs", "show", &run_id, "--json"]);
        c
    })
    .await;
    let rebuilt: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(rebuilt, result, "the SPEC 3 result rebuilt from the store");
}

/// A run whose process is alive holds a lease: `runs resume` refuses it, naming the holder, and
/// nothing is asked of the model; `--force` breaks the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_run_that_is_alive_elsewhere_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "s.json", SCHEMA);
    let model =
        FakeOpenAi::start(vec![slow(r#"{"city": "Dayton"}"#, Duration::from_secs(60)), reply(r#"{"city": "Toledo"}"#)])
            .await;
    let mut child = spawn_run(dir.path(), &model);
    let mut run_id = String::new();
    for _ in 0..200 {
        if model.calls().await >= 1
            && dir.path().join(".redraft/redraft.db").exists()
            && let Some(r) = runs_json(dir.path()).await.first()
        {
            run_id = r["run_id"].as_str().unwrap().to_owned();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!run_id.is_empty(), "the run was never recorded");

    let mut c = redraft(dir.path());
    c.env("OPENAI_BASE_URL", model.base_url()).args(["runs", "resume", &run_id]);
    let out = output(c).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    let holder = format!(":{}:", child.id());
    assert!(out.stderr.contains("is being run by worker") && out.stderr.contains(&holder), "{}", out.stderr);
    assert!(out.stderr.contains("--force"), "{}", out.stderr);
    assert_eq!(model.calls().await, 1, "nothing was sent to the model");

    let mut c = redraft(dir.path());
    c.env("OPENAI_BASE_URL", model.base_url()).args(["runs", "resume", &run_id, "--force", "--json"]);
    let out = output(c).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "succeeded", "{result}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn runs_are_recorded_unless_asked_not_to_and_listed_by_state() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "s.json", SCHEMA);
    write(dir.path(), "good.jsonl", "\"{\\\"city\\\": \\\"Toledo\\\"}\"\n");
    write(dir.path(), "bad.jsonl", "\"{\\\"city\\\": \\\"X\\\"}\"\n\"{\\\"city\\\": \\\"X\\\"}\"\n");
    for (script, extra) in [("good.jsonl", None), ("bad.jsonl", None), ("good.jsonl", Some("--no-store"))] {
        let mut c = redraft(dir.path());
        c.args(["run", "--model", &format!("mock/{script}"), "--schema", "s.json", "--prompt", "city?"]);
        if let Some(flag) = extra {
            c.arg(flag);
        }
        output(c).await;
    }
    let runs = runs_json(dir.path()).await;
    assert_eq!(runs.len(), 2, "--no-store runs are not recorded");
    assert_eq!(runs[0]["state"], "failed");
    assert_eq!(runs[0]["halted_because"], "stagnation");
    assert_eq!(runs[1]["state"], "succeeded");
    let out = output({
        let mut c = redraft(dir.path());
        c.args(["runs", "list", "--status", "succeeded"]);
        c
    })
    .await;
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    let out = output({
        let mut c = redraft(dir.path());
        c.args(["runs", "list", "--status", "done"]);
        c
    })
    .await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("`done` is not a run state"), "{}", out.stderr);
    let out = output({
        let mut c = redraft(dir.path());
        c.args(["runs", "show", "nope"]);
        c
    })
    .await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("run `nope` is not in the store"), "{}", out.stderr);
}
