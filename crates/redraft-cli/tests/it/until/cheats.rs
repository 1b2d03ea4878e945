//! Cheats a `--protect` glob undoes: every way an agent may change, delete, re-add, chmod or link
//! a protected file, or add something where a glob matches — a file, a dotfile, a directory, a
//! link, a name that is not UTF-8, a file git ignores by any of its routes — in a plain directory
//! and in git repositories (tracked, untracked, ignored), and protected files and directories
//! replaced by symlinks.

use super::protect::{CHECK, Repo, cheat_then_fix, git, listing, mode, protected_project};
use super::until;
use crate::{output, write};

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
    let tests_mode = mode(&dir.path().join("tests"));
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
    assert_eq!(mode(&dir.path().join("tests")), tests_mode, "{test}: tests/ keeps its mode");
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
/// A link to a directory outside the working directory.
const ADD_SYMLINK_TO_A_DIRECTORY: &str = r#"ln -s "$PROMPTS" tests/linked"#;
const ADD_DOTFILE: &str = "printf 'exit 0\\n' > tests/.extra.sh";
/// A name that is not UTF-8 (byte 0xff).
const ADD_NON_UTF8: &str = r#"printf 'exit 0\n' > "tests/extra-$(printf '\377').sh""#;
const ADD_DIRECTORY: &str = "mkdir -p tests/more/deeper\nprintf 'exit 0\\n' > tests/more/deeper/extra.sh";
const ADD_EMPTY_DIRECTORY: &str = "mkdir tests/more";
/// A file git ignores through a `.gitignore` in the protected directory, which ignores itself.
const ADD_IGNORED_BY_ITS_OWN_GITIGNORE: &str =
    "printf '.gitignore\\nextra.sh\\n' > tests/.gitignore\nprintf 'exit 0\\n' > tests/extra.sh";
/// A file git ignores through `.git/info/exclude`.
const ADD_EXCLUDED: &str = "echo tests/extra.sh >> .git/info/exclude\nprintf 'exit 0\\n' > tests/extra.sh";
/// A file git ignores through the root `.gitignore`.
const ADD_IGNORED_BY_THE_ROOT_GITIGNORE: &str =
    "echo tests/extra.sh >> .gitignore\nprintf 'exit 0\\n' > tests/extra.sh";
/// A protected directory made unreadable and unwritable, with a file added first.
const ADD_THEN_LOCK_THE_DIRECTORY: &str = "printf 'exit 0\\n' > tests/extra.sh\nchmod 0 tests";

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
    protect_plain_add_a_symlink_to_a_directory: Repo::Plain, "tests/**", ADD_SYMLINK_TO_A_DIRECTORY, "tests/linked";
    protect_git_add_a_symlink_to_a_directory: Repo::GitTracked, "tests/**", ADD_SYMLINK_TO_A_DIRECTORY, "tests/linked";
    protect_plain_add_a_dotfile: Repo::Plain, "tests/**", ADD_DOTFILE, "tests/.extra.sh";
    protect_git_add_a_dotfile: Repo::GitTracked, "tests/**", ADD_DOTFILE, "tests/.extra.sh";
    protect_plain_add_a_name_that_is_not_utf8: Repo::Plain, "tests/**", ADD_NON_UTF8, "\"tests/extra-\\xff.sh\"";
    protect_git_add_a_name_that_is_not_utf8: Repo::GitTracked, "tests/**", ADD_NON_UTF8, "\"tests/extra-\\xff.sh\"";
    protect_plain_add_a_directory: Repo::Plain, "tests/**", ADD_DIRECTORY, "tests/more";
    protect_git_add_a_directory: Repo::GitTracked, "tests/**", ADD_DIRECTORY, "tests/more";
    protect_git_add_an_empty_directory: Repo::GitTracked, "tests/**", ADD_EMPTY_DIRECTORY, "tests/more";
    protect_git_add_a_file_ignored_by_its_own_gitignore: Repo::GitTracked, "tests/**", ADD_IGNORED_BY_ITS_OWN_GITIGNORE, "tests/extra.sh";
    protect_git_add_an_excluded_file: Repo::GitTracked, "tests/**", ADD_EXCLUDED, "tests/extra.sh";
    protect_git_add_a_file_ignored_by_the_root_gitignore: Repo::GitTracked, "tests/**", ADD_IGNORED_BY_THE_ROOT_GITIGNORE, "tests/extra.sh";
    protect_git_ignored_add: Repo::GitIgnored, "tests/**", ADD, "tests/extra.sh";
    protect_plain_add_then_lock_the_directory: Repo::Plain, "tests/**", ADD_THEN_LOCK_THE_DIRECTORY, "tests/extra.sh";
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
async fn a_protected_test_whose_name_is_not_utf8_is_put_back() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    protected_project("not_utf8", dir.path(), Repo::Plain).unwrap();
    // The test to pass is named `tests/check-<0xff>.sh`.
    let name = std::ffi::OsStr::from_bytes(b"check-\xff.sh");
    std::fs::rename(dir.path().join("tests/check.sh"), dir.path().join("tests").join(name)).unwrap();
    let agent = cheat_then_fix(
        prompts.path(),
        "for t in tests/check-*; do printf '#!/bin/sh\\necho all tests pass\\n' > \"$t\"; done",
    );
    let out = output(until(
        dir.path(),
        prompts.path(),
        &[
            "--verify",
            "for t in tests/*; do \"$t\" || exit 1; done",
            "--task",
            "t",
            "--protect",
            "tests/**",
            "--",
            "sh",
            &agent,
        ],
    ))
    .await;
    let test = dir.path().join("tests").join(name);
    assert_eq!(std::fs::read(&test).unwrap(), CHECK.as_bytes(), "the test is byte-identical");
    assert_eq!(mode(&test), 0o755);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("passes after 2 iteration(s)"), "{}", out.stderr);
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    // Shown quoted, as git quotes it, with the byte that is not UTF-8 escaped.
    assert!(first.contains("`\"tests/check-\\xff.sh\"` is protected and was changed"), "{first}");
    assert!(first.contains("tests/check.sh: expected 5, got 0"), "the original test judged the code: {first}");
}
