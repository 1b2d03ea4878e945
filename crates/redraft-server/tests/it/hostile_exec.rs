//! Hostile `exec:` commands over HTTP: every payload of the shared corpus is refused with 403
//! and none runs (no marker file appears, no model is called, no run is stored); the commands
//! the allow-list admits do run.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use redraft_server::{AppState, router};
use redraft_testkit::hostile::{EXEC_ALLOW, EXEC_ALLOWED, FAKE_PYTHON, exec_payloads};
use redraft_testkit::{FakeOpenAi, reply};
use serde_json::json;

use crate::{Harness, config, write_kind};

fn fake_python(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("python3");
    std::fs::write(&path, FAKE_PYTHON).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A server whose working directory is a temp dir holding a fake `python3`, with the corpus's
/// allow-list.
async fn hostile_harness(replies: usize) -> (Harness, tempfile::TempDir) {
    harness_allowing(replies, &EXEC_ALLOW).await
}

async fn harness_allowing(replies: usize, allow: &[&str]) -> (Harness, tempfile::TempDir) {
    let model = FakeOpenAi::start((0..replies).map(|_| reply(r#"{"city": "Toledo"}"#)).collect()).await;
    let dir = tempfile::tempdir().unwrap();
    write_kind(dir.path());
    let work = tempfile::tempdir().unwrap();
    fake_python(work.path());
    fake_python(&work.path().join("bin"));
    std::fs::create_dir(work.path().join("marks")).unwrap();
    let mut cfg = config(&model.base_url(), dir.path());
    cfg.server.exec_allow = allow.iter().map(|s| (*s).to_owned()).collect();
    let store = redraft::store::open(&cfg).await.unwrap();
    let state = AppState::in_dir(cfg, store, vec![], work.path().to_owned()).unwrap();
    let app = router(state.clone());
    (Harness { dir, model, state, app }, work)
}

fn leftovers(work: &Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(work.join("marks"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for ran in [work.join("ran"), work.join("bin/ran")] {
        if ran.exists() {
            found.push(ran.display().to_string());
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_hostile_command_runs_over_http() {
    let (h, work) = hostile_harness(0).await;
    let marks = work.path().join("marks");
    let payloads = exec_payloads(
        |i| marks.join(format!("m{i}")).display().to_string(),
        &work.path().join("bin").display().to_string(),
    );
    assert!(payloads.len() >= 40, "the corpus has {} payloads", payloads.len());
    for (i, (what, command)) in payloads.iter().enumerate() {
        let endpoint = if i % 2 == 0 { "/v1/iterate" } else { "/v1/runs" };
        let a = h.call("POST", endpoint, Some(json!({"prompt": "x", "evaluator": format!("exec:{command}")}))).await;
        assert_eq!(a.status, 403, "{what}: {command:?} was not refused: {}", a.text);
        assert_eq!(a.json["error"]["code"], "exec_not_allowed", "{what}: {}", a.text);
        let message = a.json["error"]["message"].as_str().unwrap();
        assert!(message.contains("not allowed over HTTP") && message.contains("exec_allow"), "{what}: {message}");
    }
    assert_eq!(leftovers(work.path()), Vec::<String>::new(), "some payloads ran");
    assert_eq!(h.model.calls().await, 0, "nothing was sent to the model");
    assert_eq!(h.call("GET", "/v1/runs", None).await.json["runs"], json!([]), "nothing was recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_the_allow_list_admits_run_over_http() {
    let (h, work) = hostile_harness(EXEC_ALLOWED.len()).await;
    for command in EXEC_ALLOWED {
        let a =
            h.call("POST", "/v1/iterate", Some(json!({"prompt": "x", "evaluator": format!("exec:{command}")}))).await;
        assert_eq!(a.status, 200, "{command}: {}", a.text);
        assert_eq!(a.json["status"], "succeeded", "{command}: {}", a.text);
    }
    assert_eq!(leftovers(work.path()), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_commands_started_for_a_request_do_not_see_the_servers_environment() {
    // The command prints its environment into the verdict, which the response carries.
    let (h, _work) = harness_allowing(1, &["sh -c 'env; exit 1'"]).await;
    let a = h
        .call(
            "POST",
            "/v1/iterate",
            Some(json!({"prompt": "x", "evaluator": "exec:sh -c 'env; exit 1'", "max_iterations": 1})),
        )
        .await;
    assert_eq!(a.status, 422, "{}", a.text);
    let printed = a.json["history"][0]["issues"][0]["message"].as_str().unwrap();
    let names: Vec<&str> = printed.lines().filter_map(|l| l.split_once('=').map(|(n, _)| n)).collect();
    assert!(names.contains(&"PATH"), "the command ran and printed its environment: {printed}");
    let passed = ["PATH", "HOME", "LANG", "ARTIFACT", "PWD", "SHLVL", "_", "OLDPWD"];
    let leaked: Vec<&&str> = names.iter().filter(|n| !passed.contains(n)).collect();
    assert!(leaked.is_empty(), "the server's environment reached the command: {leaked:?}");
}
