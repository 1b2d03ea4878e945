//! `redraft until` is a run like any other: recorded in the store as it happens, listed and
//! shown by `redraft runs`, never continued by anything but `redraft until`; and an error once
//! the agent has run exits 1, not 2.

use std::path::Path;

use serde_json::Value;

use crate::{output, redraft, write};

const TEST: &str = "[ \"$(cat answer.txt)\" = 42 ] || { echo 'answer.txt: expected 42'; exit 1; }\n";

/// An agent that writes the right answer at its second turn.
const SECOND_TIME: &str = "case \"$REDRAFT_ITERATION\" in 1) echo 41 > answer.txt ;; *) echo 42 > answer.txt ;; esac\n";

/// An agent that never gets it right.
const NEVER: &str = "echo 41 > answer.txt\n";

fn until(dir: &Path, agent: &str, more: &[&str]) -> assert_cmd::Command {
    write(dir, "test.sh", TEST);
    let agent = write(dir, "agent.sh", agent);
    let mut c = redraft(dir);
    c.args(["until", "--verify", "sh test.sh", "--task", "answer", "--no-decisions"]).args(more);
    c.arg("--").arg("sh").arg(agent);
    c
}

async fn runs(dir: &Path, args: &[&str]) -> Value {
    let mut c = redraft(dir);
    c.arg("runs").args(args).arg("--json");
    let out = output(c).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_loop_is_recorded_with_every_iteration() {
    let dir = tempfile::tempdir().unwrap();
    let out = output(until(dir.path(), SECOND_TIME, &["--json"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    let run_id = result["run_id"].as_str().unwrap();

    let listed = runs(dir.path(), &["list"]).await;
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["run_id"], run_id, "{listed:?}");

    let shown = runs(dir.path(), &["show", run_id]).await;
    assert_eq!(shown["status"], "succeeded", "{shown}");
    assert_eq!(shown["iterations"], 2, "{shown}");
    let history = shown["history"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0]["status"], "rejected");
    assert_eq!(history[0]["model"], "command/sh");
    assert!(history[0]["issues"].to_string().contains("expected 42"), "{}", history[0]);
    assert_eq!(history[1]["status"], "accepted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_store_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = output(until(dir.path(), SECOND_TIME, &["--no-store"])).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!dir.path().join(".redraft/redraft.db").exists(), "a store was opened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_nobody_answers_at_its_cap_is_recorded_as_failed_not_awaiting() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = until(dir.path(), NEVER, &["--max-iter", "1", "--on-cap", "ask", "--json"]);
    cmd.write_stdin("\n");
    let out = output(cmd).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    let shown = runs(dir.path(), &["show", result["run_id"].as_str().unwrap()]).await;
    assert_eq!(shown["status"], "failed", "{shown}");
    let waiting = runs(dir.path(), &["list", "--status", "awaiting_input"]).await;
    assert_eq!(waiting, Value::Array(Vec::new()), "nothing is left awaiting an answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_after_the_agent_ran_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    // Where the loop's final report goes, a file: the loop runs, then cannot write it.
    std::fs::create_dir_all(dir.path().join(".redraft/iterations")).unwrap();
    write(dir.path(), ".redraft/iterations/answer", "in the way");
    let out = output(until(dir.path(), SECOND_TIME, &[])).await;
    assert_eq!(out.code, 1, "an agent ran, so not 2: {}", out.stderr);
    assert!(out.stderr.contains("error: "), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(dir.path().join("answer.txt")).unwrap().trim(), "42", "the agent ran");

    // Bad input, found before any agent runs, is still 2.
    let out = output(until(dir.path(), SECOND_TIME, &["--max-iter", "0"])).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verifier_runs_in_the_loops_sandbox() {
    // A sandbox starts commands with a clean environment: the verifier no longer sees the
    // variable it checks for, without one it does.
    let verify = "test -z \"$SECRET\"";
    for (sandbox, code) in [(Some("{}"), 0), (None, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let agent = write(dir.path(), "agent.sh", "echo done\n");
        let mut c = redraft(dir.path());
        c.env("SECRET", "x").args(["until", "--verify", verify, "--task", "t", "--no-decisions", "--no-store"]);
        if let Some(s) = sandbox {
            c.args(["--sandbox", s]);
        }
        c.arg("--").arg("sh").arg(agent);
        let out = output(c).await;
        assert_eq!(out.code, code, "sandbox {sandbox:?}: {}", out.stderr);
    }
}
