//! Finding the processes a test started, to prove none outlived its command: each is marked by a
//! token — a `sleep` duration no other process uses in its command line, or `MARK=token` in its
//! environment (inherited by everything a command starts) — and looked up in `/proc`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The environment variable [`live_marked`] looks for.
pub const MARK: &str = "REDRAFT_TEST_MARK";

/// A token no other process on the machine uses: a valid `sleep` duration (`30.<pid><n>`), so a
/// sleeper can carry it in its command line (also inside a PID namespace, where `$!` means
/// nothing outside).
pub fn token() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    format!("30.{}{:03}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Live (not zombie) processes whose command line contains `token`, or whose environment has
/// `MARK=token`; with their command lines.
pub fn live_marked(token: &str) -> Vec<(u32, String)> {
    let entry = format!("{MARK}={token}");
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default())
                .replace('\0', " ");
            let marked = environ.split(|&b| b == 0).any(|var| var == entry.as_bytes()) || cmdline.contains(token);
            (marked && alive(pid)).then_some((pid, cmdline))
        })
        .collect()
}

/// Whether `pid` is a process that is not a zombie.
pub fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().unwrap_or("").trim_start().chars().next();
    !matches!(state, None | Some('Z' | 'X' | 'x'))
}

/// Polls until no process marked with `token` is left, for at most `within`; what is left.
pub async fn left_after(token: &str, within: Duration) -> Vec<(u32, String)> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let left = live_marked(token);
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Like [`eventually`], for a check that must be awaited (a fake server's count of calls).
pub async fn eventually_async<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check().await
}

/// Polls `check` every 20 ms until it holds, for at most `within`; whether it did.
pub async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}
