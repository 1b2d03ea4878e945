//! No file in the working directory can make redraft block or crawl: a FIFO where an ignore file or
//! the lock is read, a huge sparse file in every snapshot, a directory where the lock goes, a
//! file system mounted inside a protected directory (redraft deletes nothing across it) or anywhere
//! in the working directory (the snapshots do not walk into it).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::protect::{CHECK, Repo, cheat_then_fix, listing, protected_project, skip};
use crate::write;

/// `redraft until ARGS` in `dir` with `$PROMPTS` set, through `wrap` (a command and its arguments
/// put before `redraft`, or none): its exit code and stderr, or `None` when it had not exited
/// after `within` (it is then killed).
async fn until_within(dir: &Path, prompts: &Path, args: &[&str], within: Duration) -> Option<(i32, String)> {
    until_wrapped(dir, prompts, &[], args, within).await
}

async fn until_wrapped(
    dir: &Path,
    prompts: &Path,
    wrap: &[&str],
    args: &[&str],
    within: Duration,
) -> Option<(i32, String)> {
    let bin = assert_cmd::cargo::cargo_bin("redraft");
    let mut cmd = match wrap.split_first() {
        Some((program, rest)) => {
            let mut cmd = std::process::Command::new(program);
            cmd.args(rest).arg(bin);
            cmd
        }
        None => std::process::Command::new(bin),
    };
    let child = cmd
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("NO_COLOR", "1")
        .env("PROMPTS", prompts)
        .arg("until")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let waited = tokio::task::spawn_blocking(move || child.wait_with_output());
    match tokio::time::timeout(within, waited).await {
        Ok(out) => {
            let out = out.unwrap().unwrap();
            Some((out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned()))
        }
        Err(_) => {
            let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
            None
        }
    }
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

const FIX: &str = "echo 'echo $(( $1 + $2 ))' > calc.sh";

async fn a_fifo_never_blocks(test: &str, before: &[&str], during: &str) {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    if protected_project(test, dir.path(), Repo::GitTracked).is_none() {
        return;
    }
    std::fs::create_dir_all(dir.path().join("sub")).unwrap();
    for fifo in before {
        let path = dir.path().join(fifo);
        let _ = std::fs::remove_file(&path);
        mkfifo(&path);
    }
    let agent = cheat_then_fix(prompts.path(), &format!("{during}\n{FIX}"));
    let args = ["--verify", "./tests/check.sh", "--task", "t", "--protect", "tests/**", "--", "sh", &agent];
    let done = until_within(dir.path(), prompts.path(), &args, Duration::from_secs(60)).await;
    let (code, stderr) = done.unwrap_or_else(|| panic!("{test}: redraft blocked on a FIFO"));
    assert_eq!(code, 0, "{test}: {stderr}");
    assert!(stderr.contains("passes after 1 iteration(s)"), "{test}: {stderr}");
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.contains("M calc.sh"), "{test}: {first}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_named_gitignore_when_the_loop_starts_never_blocks() {
    a_fifo_never_blocks("fifo_at_start", &[".gitignore", "sub/.gitignore", ".git/info/exclude"], ":").await;
    // Said, once, when the rules are read.
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    if protected_project("fifo_warning", dir.path(), Repo::GitTracked).is_none() {
        return;
    }
    mkfifo(&dir.path().join(".gitignore"));
    let agent = cheat_then_fix(prompts.path(), FIX);
    let args = ["--verify", "./tests/check.sh", "--task", "t", "--", "sh", &agent];
    let (code, stderr) = until_within(dir.path(), prompts.path(), &args, Duration::from_secs(60)).await.unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("warning: the ignore file `.gitignore` is left out"), "{stderr}");
    assert!(stderr.contains("it is not a regular file"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_named_gitignore_made_by_the_agent_never_blocks() {
    a_fifo_never_blocks("fifo_by_the_agent", &[], "rm -f .gitignore\nmkfifo .gitignore sub/.gitignore").await;
}

/// A sparse file of a terabyte: no snapshot reads it (it is compared by size, times and inode).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_sparse_file_does_not_slow_the_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    protected_project("sparse", dir.path(), Repo::Plain).unwrap();
    let made = std::process::Command::new("truncate").args(["-s", "1T"]).arg(dir.path().join("probe.bin")).status();
    if !made.is_ok_and(|s| s.success()) {
        skip("a_huge_sparse_file_does_not_slow_the_snapshots", "this file system has no 1 TiB sparse files");
        return;
    }
    std::fs::remove_file(dir.path().join("probe.bin")).unwrap();
    let agent = cheat_then_fix(prompts.path(), &format!("truncate -s 1T big.bin\n{FIX}"));
    let args = ["--verify", "./tests/check.sh", "--task", "t", "--protect", "tests/**", "--", "sh", &agent];
    let done = until_within(dir.path(), prompts.path(), &args, Duration::from_secs(60)).await;
    let (code, stderr) = done.expect("the snapshots read the sparse file");
    assert_eq!(code, 0, "{stderr}");
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.contains("A big.bin") && first.contains("1099511627776 bytes, content not read"), "{first}");
    // The same under a protected directory: removed, never read.
    let agent = cheat_then_fix(prompts.path(), &format!("truncate -s 1T tests/big.bin\n{FIX}"));
    let args = ["--verify", "./tests/check.sh", "--task", "t", "--protect", "tests/**", "--", "sh", &agent];
    let done = until_within(dir.path(), prompts.path(), &args, Duration::from_secs(60)).await;
    let (code, stderr) = done.expect("protection read the sparse file");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(listing(&dir.path().join("tests")), ["check.sh"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_at_the_lock_is_refused_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    protected_project("lock_dir", dir.path(), Repo::Plain).unwrap();
    std::fs::create_dir_all(dir.path().join(".redraft/until.lock/inside")).unwrap();
    let args = ["--verify", "./tests/check.sh", "--", "sh", "-c", "echo ran > ran.txt"];
    let (code, stderr) = until_within(dir.path(), prompts.path(), &args, Duration::from_secs(60)).await.unwrap();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("until.lock` is a directory"), "{stderr}");
    assert!(stderr.contains("hint: remove it"), "{stderr}");
    assert!(!dir.path().join("ran.txt").exists(), "nothing ran");
    assert!(dir.path().join(".redraft/until.lock/inside").is_dir(), "left as it was");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_or_a_symlink_at_the_lock_is_no_lock() {
    for (test, make) in [("lock_fifo", "fifo"), ("lock_symlink", "symlink")] {
        let dir = tempfile::tempdir().unwrap();
        let prompts = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        protected_project(test, dir.path(), Repo::Plain).unwrap();
        std::fs::create_dir_all(dir.path().join(".redraft")).unwrap();
        let lock = dir.path().join(".redraft/until.lock");
        // A link to a FIFO outside, or a FIFO: reading either would block.
        mkfifo(&outside.path().join("fifo"));
        if make == "fifo" {
            mkfifo(&lock);
        } else {
            std::os::unix::fs::symlink(outside.path().join("fifo"), &lock).unwrap();
        }
        let agent = cheat_then_fix(prompts.path(), FIX);
        let args = ["--verify", "./tests/check.sh", "--task", "t", "--", "sh", &agent];
        let done = until_within(dir.path(), prompts.path(), &args, Duration::from_secs(60)).await;
        let (code, stderr) = done.unwrap_or_else(|| panic!("{test}: redraft blocked on the lock"));
        assert_eq!(code, 0, "{test}: {stderr}");
        assert!(std::fs::symlink_metadata(&lock).is_err(), "{test}: the lock is released");
        assert!(std::fs::symlink_metadata(outside.path().join("fifo")).is_ok(), "{test}: nothing removed outside");
    }
}

/// An agent that bind-mounts a directory from outside under a protected one: redraft removes
/// nothing across the mount (the files outside stay), the verifier does not run while it is
/// there, and once the agent unmounts it the loop goes on. Run in a user and mount namespace of
/// its own (`unshare -rm`), where the agent may mount.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_removed_across_a_mount_point() {
    let test = "nothing_is_removed_across_a_mount_point";
    let can = std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", "d=$(mktemp -d) && mount -t tmpfs none \"$d\" && umount \"$d\" && rmdir \"$d\""])
        .output();
    if !can.is_ok_and(|o| o.status.success()) {
        skip(test, "`unshare -rm` cannot make a mount namespace here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    protected_project(test, dir.path(), Repo::Plain).unwrap();
    write(outside.path(), "precious.txt", "precious\n");
    std::fs::create_dir(outside.path().join("deeper")).unwrap();
    write(outside.path(), "deeper/more.txt", "more\n");
    let mount = format!("mkdir tests/mnt\nmount --bind '{}' tests/mnt", outside.path().display());
    let script = format!(
        "#!/bin/sh\ncat > /dev/null\nif [ \"$REDRAFT_ITERATION\" = 1 ]; then\n{mount}\nelse\n  umount tests/mnt\n  rmdir tests/mnt\n  {FIX}\nfi\n"
    );
    let agent = write(prompts.path(), "agent.sh", &script);
    let agent = agent.to_str().unwrap();
    let args = ["--verify", "./tests/check.sh", "--task", "t", "--protect", "tests/**", "--", "sh", agent];
    let done = until_wrapped(dir.path(), prompts.path(), &["unshare", "-rm"], &args, Duration::from_secs(120)).await;
    let (code, stderr) = done.expect("redraft did not exit");
    assert_eq!(listing(outside.path()), ["deeper", "precious.txt"], "nothing removed outside\n{stderr}");
    assert_eq!(std::fs::read_to_string(outside.path().join("deeper/more.txt")).unwrap(), "more\n");
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("passes after 2 iteration(s)"), "{stderr}");
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.contains("`tests/mnt`"), "{first}");
    assert!(first.contains("another file system"), "{first}");
    assert_eq!(listing(&dir.path().join("tests")), ["check.sh"]);
    assert_eq!(std::fs::read(dir.path().join("tests/check.sh")).unwrap(), CHECK.as_bytes());
}

/// An agent that bind-mounts a directory from outside into the working directory: the snapshots
/// do not walk into it (its files are not the workspace's; a FUSE file system there could make a
/// read wait forever), the reports leave it out, and a warning says so once. Run in a user and
/// mount namespace of its own (`unshare -rm`), where the agent may mount.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snapshots_do_not_walk_into_a_mount_point() {
    let test = "the_snapshots_do_not_walk_into_a_mount_point";
    let can = std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", "d=$(mktemp -d) && mount -t tmpfs none \"$d\" && umount \"$d\" && rmdir \"$d\""])
        .output();
    if !can.is_ok_and(|o| o.status.success()) {
        skip(test, "`unshare -rm` cannot make a mount namespace here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    protected_project(test, dir.path(), Repo::Plain).unwrap();
    write(outside.path(), "elsewhere.txt", "not the workspace's\n");
    let mount = format!("mkdir mnt\nmount --bind '{}' mnt\n{FIX}", outside.path().display());
    let agent = cheat_then_fix(prompts.path(), &mount);
    let args = ["--verify", "./tests/check.sh", "--task", "t", "--", "sh", &agent];
    let done = until_wrapped(dir.path(), prompts.path(), &["unshare", "-rm"], &args, Duration::from_secs(120)).await;
    let (code, stderr) = done.expect("redraft did not exit");
    assert_eq!(code, 0, "{stderr}");
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.contains("M calc.sh"), "{first}");
    assert!(!first.contains("elsewhere.txt"), "the report shows a file of the mount: {first}");
    let warning = "warning: the reports leave out `mnt`: it is another file system (a mount point)";
    assert_eq!(stderr.matches(warning).count(), 1, "said once: {stderr}");
}
