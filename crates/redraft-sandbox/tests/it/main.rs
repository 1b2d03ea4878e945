//! Integration tests with real processes (no mocks): exit codes, streams, the output cap,
//! termination on timeout and on cancellation, processes that try to escape (setsid, double
//! forks, ignored SIGTERM), quoting, and the sandbox (clean env, rlimits, bubblewrap or its
//! refusal).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_debug_implementations)] // test code

mod basics;
mod escape;
mod kill;
mod quote;
mod sandbox;

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Whether process `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat_fields(&stat).is_some_and(|(state, _)| !matches!(state, 'Z' | 'X' | 'x')),
        Err(_) => false,
    }
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

/// Live (non-zombie) processes whose command line contains `token`.
pub fn live_with_token(token: &str) -> Vec<u32> {
    live_processes(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(token))
            && alive(pid)
    })
}

/// The environment variable [`live_marked`] looks for.
pub const MARK: &str = "REDRAFT_TEST_MARK";

/// Live (non-zombie) processes whose environment has `MARK=token` or whose command line contains
/// `token`: every process a command started, when the command runs with that variable set.
pub fn live_marked(token: &str) -> Vec<u32> {
    let entry = format!("{MARK}={token}");
    live_processes(|pid| {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        (environ.split(|&b| b == 0).any(|var| var == entry.as_bytes())
            || String::from_utf8_lossy(&cmdline).contains(token))
            && alive(pid)
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

/// Polls `check` until it holds, for at most 3 s (a generous bound: it normally holds at once).
pub async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..150 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

/// A `sleep` duration no other process on the machine uses, to find the sleepers afterwards by
/// their command line (also inside a PID namespace, where `$!` means nothing outside).
pub fn sleep_token() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    format!("30.{}{:03}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The process ids written, one a line, to `path`.
pub fn read_pids(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path).unwrap().lines().map(|line| line.trim().parse().unwrap()).collect()
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}
