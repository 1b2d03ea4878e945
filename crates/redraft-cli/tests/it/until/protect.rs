//! `--protect`: a protected file is put back (content and mode) and the iteration rejected; the
//! next honest iteration passes against the original test. Here the protected project and the
//! globs; the cheats each case undoes are in [`super::cheats`].

use std::path::Path;

use super::{CALC_TEST, project, until};
use crate::{output, write};

/// The protected test: executable, and run as `./tests/check.sh`, so its mode matters too.
pub(super) const CHECK: &str = r#"#!/bin/sh
out=$(sh calc.sh 2 3)
if [ "$out" != "5" ]; then
  echo "tests/check.sh: expected 5, got $out"
  exit 1
fi
echo "all tests pass"
"#;

/// What the protection cases run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Repo {
    Plain,
    /// A git repository whose `tests/check.sh` is committed.
    GitTracked,
    /// A git repository where `tests/` was never added.
    GitUntracked,
    /// A git repository whose `.gitignore` lists `tests/`.
    GitIgnored,
}

/// Print a SKIP line where it is seen (test output capture does not hold it back).
pub(super) fn skip(test: &str, reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {reason}");
}

fn git_runs() -> bool {
    std::process::Command::new("git").arg("--version").output().is_ok_and(|o| o.status.success())
}

pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(super) fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

pub(super) fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// `calc.sh` (broken) and the executable `tests/check.sh`, in `repo`. `None` when the test
/// cannot run here (it has said why).
pub(super) fn protected_project(test: &str, dir: &Path, repo: Repo) -> Option<()> {
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
pub(super) fn cheat_then_fix(prompts: &Path, cheat: &str) -> String {
    let script = format!(
        "#!/bin/sh\ncat > \"$PROMPTS/stdin-$REDRAFT_ITERATION.txt\"\nif [ \"$REDRAFT_ITERATION\" = 1 ]; then\n{cheat}\nelse\n  echo 'echo $(( $1 + $2 ))' > calc.sh\nfi\n"
    );
    write(prompts, "agent.sh", &script).to_str().unwrap().to_owned()
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
async fn caches_under_a_protected_glob_are_put_back_without_blame() {
    // An honest agent that runs the tests itself leaves caches beside them: they are not held
    // against it, but the verifier never sees them (they are put back before it runs).
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    if protected_project("caches", dir.path(), Repo::GitTracked).is_none() {
        return;
    }
    write(dir.path(), ".gitignore", "__pycache__/\n");
    let agent = write(
        prompts.path(),
        "fix.sh",
        "#!/bin/sh\ncat > /dev/null\nmkdir -p tests/__pycache__\necho cache > tests/__pycache__/check.pyc\necho 'echo $(( $1 + $2 ))' > calc.sh\n",
    );
    let verify = "test ! -e tests/__pycache__ && ./tests/check.sh";
    let out = output(until(
        dir.path(),
        prompts.path(),
        &["--verify", verify, "--task", "t", "--protect", "tests/**", "--", "sh", agent.to_str().unwrap()],
    ))
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("passes after 1 iteration(s)"), "{}", out.stderr);
    assert!(!out.stderr.contains("protected"), "{}", out.stderr);
    assert_eq!(listing(&dir.path().join("tests")), ["check.sh"]);
}
