//! `redraft until` with fake agents (shell scripts) and real verifiers.

use std::path::Path;

use crate::{output, redraft, write};

const CALC_TEST: &str = r#"out=$(sh calc.sh 2 3)
if [ "$out" != "5" ]; then
  echo "test.sh:2: expected 5, got $out"
  exit 1
fi
echo "all tests pass"
"#;

/// An agent that needs three iterations to fix `calc.sh`, saving each prompt it was given.
const FIXING_AGENT: &str = r#"#!/bin/sh
cat > "$PROMPTS/stdin-$REDRAFT_ITERATION.txt"
cp "$REDRAFT_PROMPT_FILE" "$PROMPTS/file-$REDRAFT_ITERATION.txt"
case "$REDRAFT_ITERATION" in
  1) echo 'echo $(( $1 - $2 ))' > calc.sh ;;
  2) echo 'echo $(( $1 + $2 + 1 ))' > calc.sh ;;
  *) echo 'echo $(( $1 + $2 ))' > calc.sh ;;
esac
echo "edited calc.sh (iteration $REDRAFT_ITERATION of $REDRAFT_MAX_ITERATIONS)"
"#;

fn project(dir: &Path) {
    write(dir, "calc.sh", "echo 0\n");
    write(dir, "test.sh", CALC_TEST);
}

fn until(dir: &Path, prompts: &Path, args: &[&str]) -> assert_cmd::Command {
    let mut c = redraft(dir);
    c.env("PROMPTS", prompts).arg("until").args(args);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_fixes_the_project_in_three_iterations_passes() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    project(dir.path());
    let agent = write(prompts.path(), "agent.sh", FIXING_AGENT);
    let agent = agent.to_str().unwrap();
    let out = output(until(
        dir.path(),
        prompts.path(),
        &[
            "--verify",
            "sh test.sh",
            "--task",
            "fix-calc",
            "--prompt",
            "Fix calc.sh so that it adds.",
            "--",
            "sh",
            agent,
        ],
    ))
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("passes after 3 iteration(s)"), "{}", out.stderr);
    let reports = dir.path().join(".redraft/iterations/fix-calc");
    for i in 1..=3 {
        assert!(reports.join(format!("{i}.md")).is_file(), "iteration file {i}");
    }
    assert!(reports.join("final.md").is_file());
    assert!(!reports.join("escalation.md").exists());
    assert!(!dir.path().join(".redraft/until.lock").exists(), "the lock is released");

    let first = std::fs::read_to_string(reports.join("1.md")).unwrap();
    assert!(first.starts_with("# Iteration 1 of 3 — rejected"), "{first}");
    assert!(first.contains("- verifier: `sh test.sh` — exit 1"), "{first}");
    assert!(first.contains("test.sh:2: expected 5, got -1"), "{first}");
    assert!(first.contains("calc.sh"), "the iteration's changes are listed: {first}");
    let third = std::fs::read_to_string(reports.join("3.md")).unwrap();
    assert!(third.starts_with("# Iteration 3 of 3 — accepted"), "{third}");
    assert!(third.contains("all tests pass"), "{third}");

    // The agent got the task, the verifier and, from iteration 2, the feedback — on stdin,
    // and the same text in $REDRAFT_PROMPT_FILE.
    let p1 = std::fs::read_to_string(prompts.path().join("stdin-1.txt")).unwrap();
    assert!(p1.starts_with("Fix calc.sh so that it adds."), "{p1}");
    assert!(p1.contains("`sh test.sh`"), "{p1}");
    let p2 = std::fs::read_to_string(prompts.path().join("stdin-2.txt")).unwrap();
    assert!(p2.contains("Prior attempts:"), "{p2}");
    assert!(p2.contains("test.sh:2: expected 5, got -1"), "{p2}");
    assert!(p2.contains("This is attempt 2 of 3."), "{p2}");
    assert_eq!(p2, std::fs::read_to_string(prompts.path().join("file-2.txt")).unwrap());
    assert_eq!(std::fs::read_to_string(dir.path().join("calc.sh")).unwrap(), "echo $(( $1 + $2 ))\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_edits_the_protected_test_is_rejected_and_escalates() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    project(dir.path());
    write(dir.path(), "redraft.toml", "[decide]\nescalation_includes_diff = true\n");
    let cheat = write(prompts.path(), "cheat.sh", "#!/bin/sh\ncat > /dev/null\necho 'echo all tests pass' > test.sh\n");
    let out = output(until(
        dir.path(),
        prompts.path(),
        &[
            "--verify",
            "sh test.sh",
            "--task",
            "cheat",
            "--protect",
            "test.sh",
            "--json",
            "--",
            "sh",
            cheat.to_str().unwrap(),
        ],
    ))
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(dir.path().join("test.sh")).unwrap(), CALC_TEST, "the test file is unchanged");
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let history = result["history"].as_array().unwrap();
    assert!(!history.is_empty());
    for attempt in history {
        assert_eq!(attempt["status"], "rejected");
        assert_eq!(attempt["issues"][0]["code"], "protected_file_modified");
    }
    let escalation = std::fs::read_to_string(dir.path().join(".redraft/iterations/cheat/escalation.md")).unwrap();
    assert!(escalation.contains("protected_file_modified"), "{escalation}");
    assert!(escalation.contains("## Question"), "{escalation}");
    assert!(escalation.contains("## Changes per iteration"), "escalation_includes_diff: {escalation}");
    assert!(escalation.contains("M test.sh"), "the cheating change is shown: {escalation}");
}

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
            "--attempt-timeout",
            "1s",
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
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pids = std::fs::read_to_string(&pids).unwrap();
    assert_eq!(pids.lines().count(), 2);
    for pid in pids.lines() {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
        let state = stat.rsplit(')').next().unwrap_or("").trim_start().chars().next();
        assert!(stat.is_empty() || state == Some('Z'), "process {pid} survived: {stat}");
    }
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
async fn a_git_repository_gets_git_diffs() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    project(dir.path());
    let git = |args: &[&str]| {
        let ok =
            std::process::Command::new("git").args(args).current_dir(dir.path()).output().unwrap().status.success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"]);
    let fixer = write(prompts.path(), "fix.sh", "#!/bin/sh\ncat > /dev/null\necho 'echo $(( $1 + $2 ))' > calc.sh\n");
    let out = output(until(
        dir.path(),
        prompts.path(),
        &["--verify", "sh test.sh", "--task", "g", "--", "sh", fixer.to_str().unwrap()],
    ))
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report = std::fs::read_to_string(dir.path().join(".redraft/iterations/g/1.md")).unwrap();
    assert!(report.contains("diff --git a/calc.sh b/calc.sh"), "{report}");
    assert!(report.contains("-echo 0\n+echo $(( $1 + $2 ))"), "{report}");
    let status =
        std::process::Command::new("git").args(["status", "--porcelain"]).current_dir(dir.path()).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&status.stdout), " M calc.sh\n?? .redraft/\n", "the user's index is untouched");
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
    for _ in 0..200 {
        if pid_file.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(pid_file.exists(), "the second iteration started");
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
    let agent_pid = std::fs::read_to_string(&pid_file).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", agent_pid.trim())).unwrap_or_default();
    let state = stat.rsplit(')').next().unwrap_or("").trim_start().chars().next();
    assert!(stat.is_empty() || state == Some('Z'), "the agent survived: {stat}");
}
