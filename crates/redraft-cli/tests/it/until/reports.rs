//! Reports are for people: an agent cannot hide a change from the iteration reports, `final.md`
//! or `decisions.md` by editing ignore files during the loop. The ignore rules of the snapshots
//! are those in force when the loop started, read once before the agent's first turn: a
//! `.gitignore` it adds or edits, a `.git/info/exclude` it appends to, a `.git` it creates to make
//! a directory a repository, change nothing the reports show.

use super::protect::{Repo, cheat_then_fix, protected_project};
use super::until;
use crate::output;

/// Run a loop whose agent fixes `calc.sh` and hides it with `hide` on its first turn; check the
/// change is in the iteration's report, `final.md` and `decisions.md`.
async fn a_hidden_change_is_still_reported(test: &str, repo: Repo, hide: &str) {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    if protected_project(test, dir.path(), repo).is_none() {
        return;
    }
    let agent = cheat_then_fix(prompts.path(), &format!("echo 'echo $(( $1 + $2 ))' > calc.sh\n{hide}"));
    let out =
        output(until(dir.path(), prompts.path(), &["--verify", "./tests/check.sh", "--task", "t", "--", "sh", &agent]))
            .await;
    assert_eq!(out.code, 0, "{test}: {}", out.stderr);
    assert!(out.stderr.contains("passes after 1 iteration(s)"), "{test}: {}", out.stderr);
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.contains("M calc.sh"), "{test}: the iteration's report shows the change: {first}");
    assert!(first.contains("-echo 0\n+echo $(( $1 + $2 ))"), "{test}: {first}");
    let last = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/final.md")).unwrap();
    assert!(last.contains("M calc.sh"), "{test}: final.md shows the change: {last}");
    let decisions = std::fs::read_to_string(dir.path().join("decisions.md")).unwrap();
    assert!(decisions.contains("M calc.sh"), "{test}: decisions.md shows the change: {decisions}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_hidden_by_a_new_git_and_gitignore_is_reported() {
    a_hidden_change_is_still_reported("new_git", Repo::Plain, "mkdir .git\necho calc.sh > .gitignore").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_hidden_by_git_init_and_gitignore_is_reported() {
    a_hidden_change_is_still_reported("git_init", Repo::Plain, "git init -q\nprintf 'calc.sh\\n.git*\\n' > .gitignore")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_hidden_by_the_root_gitignore_is_reported() {
    a_hidden_change_is_still_reported("root_gitignore", Repo::GitTracked, "echo calc.sh >> .gitignore").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_hidden_by_git_info_exclude_is_reported() {
    a_hidden_change_is_still_reported("exclude", Repo::GitTracked, "echo calc.sh >> .git/info/exclude").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_hidden_by_a_gitignore_that_ignores_itself_is_reported() {
    a_hidden_change_is_still_reported("self_ignoring", Repo::GitTracked, "printf '*\\n' > .gitignore").await;
}

/// What the user's ignore files said when the loop began still holds: an ignored build output
/// stays out of the reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_ignored_when_the_loop_began_stays_out_of_the_reports() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    if protected_project("still_ignored", dir.path(), Repo::GitTracked).is_none() {
        return;
    }
    crate::write(dir.path(), ".gitignore", "build/\n");
    let agent = cheat_then_fix(
        prompts.path(),
        "echo 'echo $(( $1 + $2 ))' > calc.sh\nmkdir -p build\necho out > build/out.bin\nrm .gitignore",
    );
    let out =
        output(until(dir.path(), prompts.path(), &["--verify", "./tests/check.sh", "--task", "t", "--", "sh", &agent]))
            .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.contains("M calc.sh"), "{first}");
    assert!(first.contains("D .gitignore"), "{first}");
    assert!(!first.contains("build/out.bin"), "{first}");
}
