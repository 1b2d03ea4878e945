//! Iterations until the verifier passes: the prompts the agent gets, the reports and the entry
//! in `decisions.md`, the cap and the reason to raise it, a person's answer at the cap, and git
//! diffs in a git repository.

use super::{FIXING_AGENT, project, until};
use crate::{output, write};

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
