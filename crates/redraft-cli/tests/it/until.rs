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

    // The outcome is recorded in decisions.md: one dated entry saying what changed.
    let decisions = std::fs::read_to_string(dir.path().join("decisions.md")).unwrap();
    assert!(decisions.starts_with("# Decisions\n"), "{decisions}");
    assert_eq!(decisions.matches("\n## ").count(), 1, "{decisions}");
    let entry = &decisions[decisions.find("\n## ").unwrap()..];
    assert!(entry.contains("UTC — `fix-calc`: converged at iteration 3\n"), "{entry}");
    assert!(entry.contains("- task: Fix calc.sh so that it adds."), "{entry}");
    assert!(entry.contains("- verifier: `sh test.sh`"), "{entry}");
    assert!(entry.contains("- outcome: succeeded after 3 of 3 iteration(s), halted because success"), "{entry}");
    assert!(entry.contains("M calc.sh"), "the fix names the file it changed: {entry}");
    assert!(entry.contains("- report: `.redraft/iterations/fix-calc/final.md`"), "{entry}");
}

/// An agent that never fixes anything, saving each prompt it was given.
const IDLE_AGENT: &str = "#!/bin/sh\ncat > \"$PROMPTS/stdin-$REDRAFT_ITERATION.txt\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_than_three_iterations_need_a_reason_which_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    project(dir.path());
    let agent = write(prompts.path(), "agent.sh", IDLE_AGENT);
    let agent = agent.to_str().unwrap();
    // The agent changes nothing: without the repeat limit, only the cap stops it.
    let base = ["--verify", "sh test.sh", "--task", "idle", "--repeat-limit", "0"];
    let out =
        output(until(dir.path(), prompts.path(), &[&base[..], &["--max-iter", "4", "--", "sh", agent]].concat())).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("`--max-iter 4`") && out.stderr.contains("--reason"), "{}", out.stderr);
    assert!(!prompts.path().join("stdin-1.txt").exists(), "the agent did not run");
    assert!(!dir.path().join("decisions.md").exists());
    // The config's cap counts too.
    write(dir.path(), "redraft.toml", "[policy]\nmax_iterations = 5\n");
    let out = output(until(dir.path(), prompts.path(), &[&base[..], &["--", "sh", agent]].concat())).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("`max_iterations = 5` from the config"), "{}", out.stderr);
    std::fs::remove_file(dir.path().join("redraft.toml")).unwrap();

    let reason = "the parser rewrite touches 4 modules";
    let args =
        [&base[..], &["--max-iter", "4", "--reason", reason, "--decisions", "docs/decisions.md", "--", "sh", agent]]
            .concat();
    let out = output(until(dir.path(), prompts.path(), &args)).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(prompts.path().join("stdin-4.txt").exists(), "four iterations ran");
    let decisions = std::fs::read_to_string(dir.path().join("docs/decisions.md")).unwrap();
    assert!(
        decisions.contains("`idle`: hit the cap at iteration 4 (max_iterations); escalated to a person"),
        "{decisions}"
    );
    assert!(decisions.contains(&format!("- why more than 3 iterations: {reason}")), "{decisions}");
    assert!(decisions.contains("- question: "), "{decisions}");
    assert!(decisions.contains("- recurring issues: "), "{decisions}");

    // Appended, not rewritten; and not at all with --no-decisions.
    let args = [&base[..], &["--max-iter", "1", "--decisions", "docs/decisions.md", "--", "sh", agent]].concat();
    assert_eq!(output(until(dir.path(), prompts.path(), &args)).await.code, 1);
    let again = std::fs::read_to_string(dir.path().join("docs/decisions.md")).unwrap();
    assert!(again.starts_with(&decisions) && again.matches("\n## ").count() == 2, "{again}");
    let args =
        [&base[..], &["--max-iter", "1", "--decisions", "docs/decisions.md", "--no-decisions", "--", "sh", agent]]
            .concat();
    assert_eq!(output(until(dir.path(), prompts.path(), &args)).await.code, 1);
    assert_eq!(std::fs::read_to_string(dir.path().join("docs/decisions.md")).unwrap(), again);
}

/// `--on-cap ask`: at the cap the escalation is shown and a person's answer (here on stdin)
/// goes to the agent for as many iterations again; an empty answer stops the loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_cap_ask_continues_with_the_persons_answer() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    project(dir.path());
    let agent = write(prompts.path(), "agent.sh", FIXING_AGENT);
    let agent = agent.to_str().unwrap();
    let mut cmd = until(
        dir.path(),
        prompts.path(),
        &["--verify", "sh test.sh", "--task", "ask", "--max-iter", "2", "--on-cap", "ask", "--json", "--", "sh", agent],
    );
    cmd.write_stdin("calc.sh must print the sum of its two arguments\n");
    let out = output(cmd).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("Your answer, given to the agent for 2 more iteration(s)"), "{}", out.stderr);
    let result: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!((result["status"].as_str(), result["iterations"].as_u64()), (Some("succeeded"), Some(3)));
    assert_eq!(result["history"][2]["reply"]["answer"], "calc.sh must print the sum of its two arguments");
    let third = std::fs::read_to_string(prompts.path().join("stdin-3.txt")).unwrap();
    assert!(third.contains("Answer: calc.sh must print the sum of its two arguments"), "{third}");
    let second = std::fs::read_to_string(prompts.path().join("stdin-2.txt")).unwrap();
    assert!(!second.contains("Answer:"), "{second}");
    let report = std::fs::read_to_string(dir.path().join(".redraft/iterations/ask/3.md")).unwrap();
    assert!(report.starts_with("# Iteration 3 of 4 — accepted"), "the answer raised the cap: {report}");
    let decisions = std::fs::read_to_string(dir.path().join("decisions.md")).unwrap();
    assert!(decisions.contains("converged at iteration 3"), "{decisions}");
    assert!(decisions.contains("- a person answered after iteration 2: calc.sh must print the sum"), "{decisions}");

    // No answer: the loop stops, escalated.
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    let mut cmd = until(
        dir.path(),
        prompts.path(),
        &["--verify", "sh test.sh", "--max-iter", "1", "--on-cap", "ask", "--", "sh", agent],
    );
    cmd.write_stdin("\n");
    let out = output(cmd).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("no answer: the loop stops here"), "{}", out.stderr);
    let decisions = std::fs::read_to_string(dir.path().join("decisions.md")).unwrap();
    assert!(decisions.contains("hit the cap at iteration 1 (max_iterations); escalated to a person"), "{decisions}");
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
    let decisions = std::fs::read_to_string(dir.path().join("decisions.md")).unwrap();
    assert!(decisions.contains("`cheat`: hit the cap at iteration"), "{decisions}");
    assert!(decisions.contains("protected_file_modified"), "the recurring issue: {decisions}");
    assert!(decisions.contains("- question: "), "{decisions}");
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
    let pids: Vec<u32> = std::fs::read_to_string(&pids).unwrap().lines().map(|p| p.trim().parse().unwrap()).collect();
    assert_eq!(pids.len(), 2);
    let gone = redraft_testkit::processes::eventually(std::time::Duration::from_secs(5), || {
        pids.iter().all(|&pid| !redraft_testkit::processes::alive(pid))
    })
    .await;
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
    assert_eq!(
        String::from_utf8_lossy(&status.stdout),
        " M calc.sh\n?? .redraft/\n?? decisions.md\n",
        "the user's index is untouched; the loop's entry in decisions.md is theirs to commit"
    );
    // The fix in decisions.md is git's diff stat.
    let decisions = std::fs::read_to_string(dir.path().join("decisions.md")).unwrap();
    assert!(decisions.contains("calc.sh | 2 +-"), "{decisions}");
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
    let agent_pid: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    let gone = redraft_testkit::processes::eventually(std::time::Duration::from_secs(5), || {
        !redraft_testkit::processes::alive(agent_pid)
    })
    .await;
    assert!(gone, "the agent {agent_pid} survived");
}

// ---- `--protect`: a protected file is put back (content and mode) and the iteration rejected;
// the next honest iteration passes against the original test.

/// The protected test: executable, and run as `./tests/check.sh`, so its mode matters too.
const CHECK: &str = r#"#!/bin/sh
out=$(sh calc.sh 2 3)
if [ "$out" != "5" ]; then
  echo "tests/check.sh: expected 5, got $out"
  exit 1
fi
echo "all tests pass"
"#;

/// What the protection cases run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repo {
    Plain,
    /// A git repository whose `tests/check.sh` is committed.
    GitTracked,
    /// A git repository where `tests/` was never added.
    GitUntracked,
    /// A git repository whose `.gitignore` lists `tests/`.
    GitIgnored,
}

/// Print a SKIP line where it is seen (test output capture does not hold it back).
fn skip(test: &str, reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {reason}");
}

fn git_runs() -> bool {
    std::process::Command::new("git").arg("--version").output().is_ok_and(|o| o.status.success())
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// `calc.sh` (broken) and the executable `tests/check.sh`, in `repo`. `None` when the test
/// cannot run here (it has said why).
fn protected_project(test: &str, dir: &Path, repo: Repo) -> Option<()> {
    write(dir, "calc.sh", "echo 0\n");
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    set_mode(&write(dir, "tests/check.sh", CHECK), 0o755);
    if repo == Repo::Plain {
        return Some(());
    }
    if !git_runs() {
        skip(test, "`git` is not installed");
        return None;
    }
    git(dir, &["init", "-q"]);
    match repo {
        Repo::GitTracked => {
            git(dir, &["add", "-A"]);
        }
        Repo::GitUntracked => {
            git(dir, &["add", "calc.sh"]);
        }
        Repo::GitIgnored => {
            write(dir, ".gitignore", "tests/\n");
            git(dir, &["add", "-A"]);
            assert!(git(dir, &["status", "--porcelain", "--ignored"]).contains("!! tests/"));
        }
        Repo::Plain => {}
    }
    git(dir, &["commit", "-qm", "start"]);
    Some(())
}

/// An agent that runs `cheat` on iteration 1 and fixes `calc.sh` honestly on iteration 2.
fn cheat_then_fix(prompts: &Path, cheat: &str) -> String {
    let script = format!(
        "#!/bin/sh\ncat > \"$PROMPTS/stdin-$REDRAFT_ITERATION.txt\"\nif [ \"$REDRAFT_ITERATION\" = 1 ]; then\n{cheat}\nelse\n  echo 'echo $(( $1 + $2 ))' > calc.sh\nfi\n"
    );
    write(prompts, "agent.sh", &script).to_str().unwrap().to_owned()
}

/// Run the loop with `--protect <glob>` and an agent cheating with `cheat` on iteration 1, then
/// check what every protection case promises: the cheat is rejected, the verifier judged the
/// code against the original test, the next honest iteration passes, and `tests/` ends as it
/// began — `check.sh` byte for byte, with its mode, and nothing added.
async fn cheat_is_undone(test: &str, repo: Repo, glob: &str, cheat: &str, culprit: &str) {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    if protected_project(test, dir.path(), repo).is_none() {
        return;
    }
    write(prompts.path(), "same-size-cheat.sh", &same_size_cheat());
    let agent = cheat_then_fix(prompts.path(), cheat);
    let out = output(until(
        dir.path(),
        prompts.path(),
        &["--verify", "./tests/check.sh", "--task", "t", "--protect", glob, "--", "sh", &agent],
    ))
    .await;

    let check = dir.path().join("tests/check.sh");
    assert!(std::fs::symlink_metadata(&check).is_ok_and(|m| m.is_file()), "{test}: check.sh is a file again");
    assert_eq!(std::fs::read(&check).unwrap(), CHECK.as_bytes(), "{test}: check.sh is byte-identical");
    assert_eq!(mode(&check), 0o755, "{test}: check.sh keeps its mode");
    assert_eq!(listing(&dir.path().join("tests")), ["check.sh"], "{test}: nothing added under tests/");
    assert_eq!(out.code, 0, "{test}: the honest second iteration passes\n{}", out.stderr);
    assert!(out.stderr.contains("passes after 2 iteration(s)"), "{test}: {}", out.stderr);

    let prompt = std::fs::read_to_string(prompts.path().join("stdin-1.txt")).unwrap();
    assert!(
        prompt.contains(&format!("Do not change, add or delete files matching: `{glob}`")),
        "{test}: the agent is told what is protected: {prompt}"
    );
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.starts_with("# Iteration 1 of 3 — rejected"), "{test}: {first}");
    assert!(first.contains(&format!("`{culprit}` ")), "{test}: the issue names `{culprit}`: {first}");
    assert!(first.contains("[protected_file_modified]"), "{test}: {first}");
    assert!(
        first.contains("tests/check.sh: expected 5, got 0"),
        "{test}: the verifier ran the original test against the unfixed code: {first}"
    );
    if repo == Repo::GitTracked {
        assert_eq!(git(dir.path(), &["status", "--porcelain", "--", "tests"]), "", "{test}: git sees no change");
    }
    assert_eq!(
        std::fs::read_to_string(prompts.path().join("same-size-cheat.sh")).unwrap(),
        same_size_cheat(),
        "{test}: nothing outside the working directory was touched"
    );
}

/// A cheating `check.sh` exactly as long as the real one (so size and time say nothing).
fn same_size_cheat() -> String {
    let head = "#!/bin/sh\necho all tests pass\nexit 0\n";
    let cheat = format!("{head}{}\n", "#".repeat(CHECK.len() - head.len() - 1));
    assert_eq!(cheat.len(), CHECK.len());
    cheat
}

const MODIFY: &str = "printf '#!/bin/sh\\necho all tests pass\\n' > tests/check.sh";
/// Same size, and the modification time put back (`touch -r`).
const MODIFY_KEEPING_MTIME: &str = r#"touch -r tests/check.sh "$PROMPTS/stamp"
cp "$PROMPTS/same-size-cheat.sh" tests/check.sh
touch -r "$PROMPTS/stamp" tests/check.sh
cmp -s tests/check.sh "$PROMPTS/same-size-cheat.sh" || exit 1"#;
const DELETE: &str = "rm tests/check.sh";
const DELETE_AND_READD: &str =
    "rm tests/check.sh\nprintf '#!/bin/sh\\necho all tests pass\\n' > tests/check.sh\nchmod 700 tests/check.sh";
const ADD: &str = "printf 'exit 0\\n' > tests/extra.sh";
const CHMOD: &str = "chmod 644 tests/check.sh";
/// A link to a file outside the working directory.
const ADD_SYMLINK: &str = r#"ln -s "$PROMPTS/same-size-cheat.sh" tests/extra.sh"#;

macro_rules! protect_cases {
    ($($name:ident: $repo:expr, $glob:expr, $cheat:expr, $culprit:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            cheat_is_undone(stringify!($name), $repo, $glob, $cheat, $culprit).await;
        }
    )*};
}

protect_cases! {
    protect_plain_modify: Repo::Plain, "tests/**", MODIFY, "tests/check.sh";
    protect_plain_modify_keeping_mtime: Repo::Plain, "tests/**", MODIFY_KEEPING_MTIME, "tests/check.sh";
    protect_plain_delete: Repo::Plain, "tests/**", DELETE, "tests/check.sh";
    protect_plain_delete_and_readd: Repo::Plain, "tests/**", DELETE_AND_READD, "tests/check.sh";
    protect_plain_add: Repo::Plain, "tests/**", ADD, "tests/extra.sh";
    protect_plain_chmod_only: Repo::Plain, "tests/**", CHMOD, "tests/check.sh";
    protect_git_modify: Repo::GitTracked, "tests/**", MODIFY, "tests/check.sh";
    protect_git_modify_keeping_mtime: Repo::GitTracked, "tests/**", MODIFY_KEEPING_MTIME, "tests/check.sh";
    protect_git_delete: Repo::GitTracked, "tests/**", DELETE, "tests/check.sh";
    protect_git_delete_and_readd: Repo::GitTracked, "tests/**", DELETE_AND_READD, "tests/check.sh";
    protect_git_add: Repo::GitTracked, "tests/**", ADD, "tests/extra.sh";
    protect_git_chmod_only: Repo::GitTracked, "tests/**", CHMOD, "tests/check.sh";
    protect_git_untracked_modify: Repo::GitUntracked, "tests/**", MODIFY, "tests/check.sh";
    protect_git_untracked_delete_and_readd: Repo::GitUntracked, "tests/**", DELETE_AND_READD, "tests/check.sh";
    protect_git_ignored_modify: Repo::GitIgnored, "tests/**", MODIFY, "tests/check.sh";
    protect_git_ignored_delete: Repo::GitIgnored, "tests/**", DELETE, "tests/check.sh";
    protect_exact_path_delete_and_readd: Repo::Plain, "tests/check.sh", DELETE_AND_READD, "tests/check.sh";
    protect_a_directory_by_name: Repo::Plain, "tests", MODIFY, "tests/check.sh";
    protect_plain_add_a_symlink: Repo::Plain, "tests/**", ADD_SYMLINK, "tests/extra.sh";
    protect_git_add_a_symlink: Repo::GitTracked, "tests/**", ADD_SYMLINK, "tests/extra.sh";
    protect_git_add_with_a_non_ascii_name: Repo::GitTracked, "tests/*", "printf 'exit 0\\n' > tests/extra-é.sh", "tests/extra-é.sh";
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protected_file_replaced_by_a_symlink_is_replaced_not_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    protected_project("symlink", dir.path(), Repo::Plain).unwrap();
    let target = write(outside.path(), "target.txt", "a file outside the working directory\n");
    let agent =
        cheat_then_fix(prompts.path(), &format!("rm tests/check.sh\nln -s '{}' tests/check.sh", target.display()));
    let out = output(until(
        dir.path(),
        prompts.path(),
        &["--verify", "./tests/check.sh", "--task", "t", "--protect", "tests/check.sh", "--", "sh", &agent],
    ))
    .await;
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "a file outside the working directory\n",
        "nothing was written through the link"
    );
    let check = dir.path().join("tests/check.sh");
    assert!(std::fs::symlink_metadata(&check).unwrap().is_file(), "the link was replaced by the file");
    assert_eq!(std::fs::read(&check).unwrap(), CHECK.as_bytes());
    assert_eq!(mode(&check), 0o755);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.contains("was replaced by a symlink; it has been put back"), "{first}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protected_directory_replaced_by_a_symlink_is_replaced_not_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    if protected_project("a_protected_directory_replaced_by_a_symlink", dir.path(), Repo::GitTracked).is_none() {
        return;
    }
    write(outside.path(), "check.sh", "#!/bin/sh\necho all tests pass\n");
    write(outside.path(), "notes.sh", "outside\n");
    let agent = cheat_then_fix(prompts.path(), &format!("rm -r tests\nln -s '{}' tests", outside.path().display()));
    let out = output(until(
        dir.path(),
        prompts.path(),
        &["--verify", "./tests/check.sh", "--task", "t", "--protect", "tests/*.sh", "--", "sh", &agent],
    ))
    .await;
    assert_eq!(listing(outside.path()), ["check.sh", "notes.sh"], "nothing deleted or added outside");
    assert_eq!(std::fs::read_to_string(outside.path().join("check.sh")).unwrap(), "#!/bin/sh\necho all tests pass\n");
    assert_eq!(std::fs::read_to_string(outside.path().join("notes.sh")).unwrap(), "outside\n");
    assert!(std::fs::symlink_metadata(dir.path().join("tests")).unwrap().is_dir(), "tests/ is a directory again");
    assert_eq!(listing(&dir.path().join("tests")), ["check.sh"]);
    assert_eq!(std::fs::read(dir.path().join("tests/check.sh")).unwrap(), CHECK.as_bytes());
    assert_eq!(mode(&dir.path().join("tests/check.sh")), 0o755);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.contains("its directory `tests` was replaced by a symlink"), "{first}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protect_glob_that_matches_nothing_is_named_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    protected_project("glob", dir.path(), Repo::Plain).unwrap();
    let agent = write(prompts.path(), "fix.sh", "#!/bin/sh\ncat > /dev/null\necho 'echo $(( $1 + $2 ))' > calc.sh\n");
    let out = output(until(
        dir.path(),
        prompts.path(),
        &[
            "--verify",
            "./tests/check.sh",
            "--task",
            "t",
            "--protect",
            "tests/**",
            "--protect",
            "spec/*.rb",
            "--",
            "sh",
            agent.to_str().unwrap(),
        ],
    ))
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("warning: `--protect spec/*.rb` matches no file"), "{}", out.stderr);
    assert!(out.stderr.contains("hint:"), "{}", out.stderr);
    assert!(!out.stderr.contains("`--protect tests/**`"), "a glob that matches is not named: {}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protect_glob_outside_the_working_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    protected_project("outside", dir.path(), Repo::Plain).unwrap();
    let elsewhere = dir.path().join("../elsewhere.sh");
    let out = output(until(
        dir.path(),
        prompts.path(),
        &["--verify", "./tests/check.sh", "--protect", "../elsewhere.sh", "--", "sh", "-c", "echo ran > ran.txt"],
    ))
    .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("`--protect ../elsewhere.sh` is outside the working directory"), "{}", out.stderr);
    assert!(out.stderr.contains("hint:"), "{}", out.stderr);
    assert!(!dir.path().join("ran.txt").exists(), "nothing ran");
    assert!(!elsewhere.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protected_file_changed_by_an_agent_that_times_out_is_put_back() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    protected_project("timeout", dir.path(), Repo::Plain).unwrap();
    let agent = write(
        prompts.path(),
        "slow.sh",
        "#!/bin/sh\ncat > /dev/null\nprintf '#!/bin/sh\\necho all tests pass\\n' > tests/check.sh\nexec sleep 30\n",
    );
    let out = output(until(
        dir.path(),
        prompts.path(),
        &[
            "--verify",
            "./tests/check.sh",
            "--task",
            "t",
            "--max-iter",
            "1",
            "--attempt-timeout",
            "1s",
            "--protect",
            "tests/**",
            "--",
            "sh",
            agent.to_str().unwrap(),
        ],
    ))
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(std::fs::read(dir.path().join("tests/check.sh")).unwrap(), CHECK.as_bytes());
    assert!(
        out.stderr.contains("`tests/check.sh` is protected and was changed; it has been put back"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_git_ignores_under_a_protected_glob_are_not_counted_as_added() {
    // An honest agent that runs the tests itself leaves caches beside them.
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    if protected_project("files_git_ignores", dir.path(), Repo::GitTracked).is_none() {
        return;
    }
    write(dir.path(), ".gitignore", "__pycache__/\n");
    let agent = write(
        prompts.path(),
        "fix.sh",
        "#!/bin/sh\ncat > /dev/null\nmkdir -p tests/__pycache__\necho cache > tests/__pycache__/check.pyc\necho 'echo $(( $1 + $2 ))' > calc.sh\n",
    );
    let out = output(until(
        dir.path(),
        prompts.path(),
        &["--verify", "./tests/check.sh", "--task", "t", "--protect", "tests/**", "--", "sh", agent.to_str().unwrap()],
    ))
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("passes after 1 iteration(s)"), "{}", out.stderr);
    assert!(dir.path().join("tests/__pycache__/check.pyc").is_file());
}
