//! How a loop stops: a verifier past the timeout is killed with its children, a second loop on
//! the same directory is refused, and Ctrl-C stops cleanly and writes what happened.

use std::time::Duration;

use redraft_testkit::processes::eventually;

use super::{project, until};
use crate::{output, write};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_past_the_timeout_is_killed_with_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    project(dir.path());
    let pids = prompts.path().join("pids");
    let verify = format!("sleep 30 & echo $! >> {0}; sleep 30 & echo $! >> {0}; wait", pids.display());
    let out = output(until(
        dir.path(),
        prompts.path(),
        &[
            "--verify",
            &verify,
            "--task",
            "slow",
            "--max-iter",
            "1",
            // Long enough that a loaded machine reads the workspace and starts the verifier
            // within it; far shorter than the verifier's 30 s.
            "--attempt-timeout",
            "3s",
            "--",
            "sh",
            "-c",
            "cat > /dev/null",
        ],
    ))
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let report = std::fs::read_to_string(dir.path().join(".redraft/iterations/slow/1.md")).unwrap();
    assert!(report.contains("timeout"), "{report}");
    let pids: Vec<u32> = std::fs::read_to_string(&pids).unwrap().lines().map(|p| p.trim().parse().unwrap()).collect();
    assert_eq!(pids.len(), 2);
    let gone =
        eventually(Duration::from_secs(5), || pids.iter().all(|&pid| !redraft_testkit::processes::alive(pid))).await;
    assert!(gone, "processes survived: {pids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_loop_on_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    project(dir.path());
    std::fs::create_dir_all(dir.path().join(".redraft")).unwrap();
    std::fs::write(dir.path().join(".redraft/until.lock"), format!("{}\nother-task\n", std::process::id())).unwrap();
    let out = output(until(dir.path(), prompts.path(), &["--verify", "sh test.sh", "--", "true"])).await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("another `redraft until`") && out.stderr.contains("other-task"), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(dir.path().join("calc.sh")).unwrap(), "echo 0\n", "nothing ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_cleanly_and_writes_what_happened() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    project(dir.path());
    // The first iteration fails quickly; the second hangs in the agent until interrupted.
    let agent = write(
        prompts.path(),
        "agent.sh",
        "#!/bin/sh\ncat > /dev/null\nif [ \"$REDRAFT_ITERATION\" = 2 ]; then echo $$ > \"$PROMPTS/agent.pid\"; sleep 60; fi\necho 'echo 6' > calc.sh\n",
    );
    let bin = assert_cmd::cargo::cargo_bin("redraft");
    let child = std::process::Command::new(bin)
        .current_dir(dir.path())
        .env("PROMPTS", prompts.path())
        .args(["until", "--verify", "sh test.sh", "--task", "stopped", "--", "sh", agent.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid_file = prompts.path().join("agent.pid");
    let started = eventually(Duration::from_secs(10), || pid_file.exists()).await;
    assert!(started, "the second iteration started");
    let interrupted = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(interrupted.success());
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("halted because cancelled"), "{stderr}");
    let reports = dir.path().join(".redraft/iterations/stopped");
    assert!(reports.join("1.md").is_file());
    let escalation = std::fs::read_to_string(reports.join("escalation.md")).unwrap();
    assert!(escalation.contains("halted because cancelled"), "{escalation}");
    assert!(!dir.path().join(".redraft/until.lock").exists(), "the lock is released");
    let agent_pid: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    let gone = eventually(Duration::from_secs(5), || !redraft_testkit::processes::alive(agent_pid)).await;
    assert!(gone, "the agent {agent_pid} survived");
}
