//! The working directory is pinned when the loop starts. An agent that moves it away and puts a
//! symlink to another directory in its place (`mv "$PWD" "$PWD.real" && ln -s /victim "$PWD"`)
//! stops the loop with an error: redraft restores, removes and writes nothing there — no
//! protected path put back, no report, no `decisions.md` — and runs no verifier there.

use std::path::Path;

use super::protect::{Repo, listing, protected_project};
use super::until;
use crate::{output, write};

/// What the victim directory holds: files a restore of `tests/**` would overwrite or delete.
fn victim(dir: &Path) {
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    write(dir, "tests/check.sh", "#!/bin/sh\necho victim\n");
    write(dir, "tests/precious.txt", "precious\n");
    write(dir, "decisions.md", "the victim's decisions\n");
}

fn victim_is_untouched(test: &str, dir: &Path) {
    assert_eq!(listing(dir), ["decisions.md", "tests"], "{test}: nothing added or removed in the victim");
    assert_eq!(listing(&dir.join("tests")), ["check.sh", "precious.txt"], "{test}");
    assert_eq!(std::fs::read_to_string(dir.join("tests/check.sh")).unwrap(), "#!/bin/sh\necho victim\n", "{test}");
    assert_eq!(std::fs::read_to_string(dir.join("tests/precious.txt")).unwrap(), "precious\n", "{test}");
    assert_eq!(std::fs::read_to_string(dir.join("decisions.md")).unwrap(), "the victim's decisions\n", "{test}");
}

/// Run a loop in `<parent>/ws` whose agent runs `swap` on its first turn (`$VICTIM` is the victim
/// directory); check that the loop stopped with an error and left the victim as it was.
async fn a_swapped_working_directory_stops_the_loop(test: &str, swap: &str) {
    let parent = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    let ws = parent.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    protected_project(test, &ws, Repo::Plain).unwrap();
    victim(outside.path());
    let agent = super::protect::cheat_then_fix(prompts.path(), swap);
    let mut cmd = until(
        &ws,
        prompts.path(),
        &[
            "--verify",
            "touch verifier-ran; ./tests/check.sh",
            "--task",
            "t",
            "--protect",
            "tests/**",
            "--",
            "sh",
            &agent,
        ],
    );
    cmd.env("VICTIM", outside.path());
    let out = output(cmd).await;

    victim_is_untouched(test, outside.path());
    assert!(!outside.path().join("verifier-ran").exists(), "{test}: the verifier ran in the victim");
    assert_eq!(out.code, 1, "{test}: {}", out.stderr);
    assert!(out.stderr.contains("is no longer the directory this loop started in"), "{test}: {}", out.stderr);
    assert!(out.stderr.contains("hint:"), "{test}: {}", out.stderr);
    // A directory put in its place is not written either.
    if std::fs::symlink_metadata(&ws).unwrap().is_dir() {
        assert_eq!(listing(&ws), ["tests"], "{test}: nothing written in the directory put in its place");
        assert_eq!(listing(&ws.join("tests")), ["check.sh", "precious.txt"], "{test}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_directory_swapped_for_a_symlink_stops_the_loop() {
    a_swapped_working_directory_stops_the_loop(
        "symlink",
        "printf 'exit 0\\n' > tests/check.sh\nmv \"$PWD\" \"$PWD.real\"\nln -s \"$VICTIM\" \"$PWD\"",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_directory_swapped_for_another_directory_stops_the_loop() {
    a_swapped_working_directory_stops_the_loop(
        "directory",
        "mv \"$PWD\" \"$PWD.real\"\nmkdir \"$PWD\"\ncp -r \"$VICTIM/tests\" \"$PWD/tests\"",
    )
    .await;
}
