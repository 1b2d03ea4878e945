//! The store through the CLI: runs are recorded as they happen, listed, shown and resumed
//! after a crash with no attempt lost or repeated.

use std::time::Duration;

use redraft_testkit::processes::eventually_async;
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
    let in_flight = eventually_async(Duration::from_secs(30), || async {
        dir.path().join(".redraft/redraft.db").exists()
            && runs_json(dir.path()).await.first().is_some_and(|r| r["iterations"] == 1)
            && model.calls().await >= 2
    })
    .await;
    assert!(in_flight, "attempt 1 was not recorded with attempt 2 in flight");
    let run = runs_json(dir.path()).await[0].clone();
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
    assert_eq!(rebuilt, result, "the result rebuilt from the store");
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
    let recorded = eventually_async(Duration::from_secs(30), || async {
        model.calls().await >= 1
            && dir.path().join(".redraft/redraft.db").exists()
            && !runs_json(dir.path()).await.is_empty()
    })
    .await;
    assert!(recorded, "the run was never recorded");
    let run_id = runs_json(dir.path()).await[0]["run_id"].as_str().unwrap().to_owned();

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
    for (filter, found) in [
        (["--model", "mock/good.jsonl"], 1),
        (["--model", "mock/nope.jsonl"], 0),
        (["--search", "CITY?"], 2),
        (["--search", "town"], 0),
        (["--kind", "city"], 0),
    ] {
        let out = output({
            let mut c = redraft(dir.path());
            c.args(["runs", "list"]).args(filter);
            c
        })
        .await;
        assert_eq!((out.code, out.stdout.lines().count()), (0, found), "{filter:?}: {}", out.stdout);
    }
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

/// `run --await`: a run that would fail stops awaiting an answer (exit 1, saying how to answer);
/// `runs answer` continues it here with the answer given to the model, and it succeeds; the
/// history keeps the answer on the attempt that received it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awaiting_run_is_answered_from_the_command_line_and_finishes_on_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "s.json", SCHEMA);
    let model = FakeOpenAi::start(vec![
        reply(r#"{"city": "Louisville"}"#),
        reply(r#"{"city": "Louisville"}"#),
        reply(r#"{"city": "Toledo"}"#),
    ])
    .await;
    let run = |args: &[&str]| {
        let mut c = redraft(dir.path());
        c.env("OPENAI_BASE_URL", model.base_url()).args(args);
        output(c)
    };
    let out = run(&[
        "run",
        "--model",
        "openai/fake",
        "--schema",
        "s.json",
        "--prompt",
        "Which city?",
        "--max-iterations",
        "1",
        "--await",
    ])
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("awaits your answer"), "{}", out.stderr);
    let runs = runs_json(dir.path()).await;
    assert_eq!(runs[0]["state"], "awaiting_input");
    let run_id = runs[0]["run_id"].as_str().unwrap().to_owned();
    assert!(out.stderr.contains(&format!("redraft runs answer {run_id}")), "{}", out.stderr);
    let listed = run(&["runs", "list", "--status", "awaiting_input"]).await;
    assert!(listed.stdout.contains(&run_id), "{}", listed.stdout);

    // Bad answers: exit 2, nothing asked.
    for bad in
        [vec!["runs", "answer", &run_id, "   "], vec!["runs", "answer", &run_id, "Toledo", "--max-iterations", "0"]]
    {
        let out = run(&bad).await;
        assert_eq!(out.code, 2, "{bad:?}: {}", out.stderr);
    }
    assert_eq!(model.calls().await, 1);

    let out =
        run(&["runs", "answer", &run_id, "The contract is in Toledo, OH", "--max-iterations", "2", "--json"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!((result["status"].as_str(), result["iterations"].as_u64()), (Some("succeeded"), Some(3)), "{result}");
    let reply = &result["history"][1]["reply"];
    assert_eq!(
        (reply["answer"].as_str(), reply["after_iteration"].as_u64()),
        (Some("The contract is in Toledo, OH"), Some(1))
    );
    assert!(result["history"][2].get("reply").is_none());
    let told = last_user_message(&model.bodies().await[1]);
    assert!(told.contains("Answer: The contract is in Toledo, OH"), "{told}");
    assert_eq!(model.calls().await, 3);

    // Halted now: a second answer and an abort are refused, exit 2.
    for again in [vec!["runs", "answer", &run_id, "again"], vec!["runs", "abort", &run_id]] {
        let out = run(&again).await;
        assert_eq!(out.code, 2, "{again:?}: {}", out.stderr);
        assert!(out.stderr.contains("not awaiting"), "{again:?}: {}", out.stderr);
    }
}

/// `runs abort` ends an awaiting run as failed, keeping its escalation; `--await` needs the
/// store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awaiting_run_is_aborted_and_await_needs_the_store() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "s.json", SCHEMA);
    let model = FakeOpenAi::start(vec![reply(r#"{"city": "Louisville"}"#)]).await;
    let run = |args: &[&str]| {
        let mut c = redraft(dir.path());
        c.env("OPENAI_BASE_URL", model.base_url()).args(args);
        output(c)
    };
    let base =
        ["run", "--model", "openai/fake", "--schema", "s.json", "--prompt", "Which city?", "--max-iterations", "1"];
    let out = run(&[&base[..], &["--await", "--no-store"]].concat()).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(model.calls().await, 0);
    let out = run(&[&base[..], &["--await"]].concat()).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let run_id = runs_json(dir.path()).await[0]["run_id"].as_str().unwrap().to_owned();
    let out = run(&["runs", "abort", &run_id, "--json"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["status"], "failed");
    assert!(result["escalation"]["question"].is_string(), "{result}");
    assert_eq!(runs_json(dir.path()).await[0]["state"], "failed");
}
