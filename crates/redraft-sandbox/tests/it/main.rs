//! Integration tests with real processes (no mocks): exit codes, streams, the output cap,
//! termination on timeout and on cancellation, processes that try to escape (setsid, double
//! forks, ignored SIGTERM), quoting, and the sandbox (clean env, rlimits, bubblewrap or its
//! refusal).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_debug_implementations)] // test code

mod basics;
mod escape;
mod kill;
mod network;
mod quote;
mod sandbox;

use std::path::Path;
use std::time::Duration;

use redraft_sandbox::{Output, SandboxError};
use redraft_testkit::processes;
pub use redraft_testkit::processes::{MARK, alive, token as sleep_token};

/// Live processes marked with `token` (its command line, or `MARK=token` in its environment).
pub fn live_marked(token: &str) -> Vec<u32> {
    processes::live_marked(token).into_iter().map(|(pid, _)| pid).collect()
}

/// Polls `check` until it holds, for at most 3 s (a generous bound: it normally holds at once).
pub async fn eventually(check: impl FnMut() -> bool) -> bool {
    processes::eventually(Duration::from_secs(3), check).await
}

/// State and process group from `/proc/PID/stat`.
fn stat_fields(stat: &str) -> Option<(char, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    fields.next()?;
    Some((state, fields.next()?.parse().ok()?))
}

/// Live (non-zombie) processes in group `pgid`.
pub fn live_group_members(pgid: u32) -> Vec<u32> {
    live_processes(|pid| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| stat_fields(&stat))
            .is_some_and(|(state, group)| group == pgid && !matches!(state, 'Z' | 'X' | 'x'))
    })
}

fn live_processes(mut keep: impl FnMut(u32) -> bool) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| keep(pid))
        .collect()
}

/// The process ids written, one a line, to `path`.
pub fn read_pids(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path).unwrap().lines().map(|line| line.trim().parse().unwrap()).collect()
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Whether bubblewrap is here to isolate the command of test `module::test`; when it is not, the
/// test checks the refusal instead, and says so with a SKIP line on stderr (test output capture
/// does not hold it back).
pub fn isolating(module: &str, test: &str) -> bool {
    let available = redraft_sandbox::bwrap_available();
    if !available {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIP {module}::{test}: bubblewrap is not installed, so the isolation was not run (the refusal was checked)"
        );
    }
    available
}

/// The refusal: the right error, and `marker` (which the command would create) does not exist.
pub fn assert_refused(result: Result<Output, SandboxError>, marker: &Path) {
    match result {
        Err(SandboxError::BwrapMissing { .. } | SandboxError::BwrapUnusable { .. }) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(!marker.exists(), "the command ran");
}
