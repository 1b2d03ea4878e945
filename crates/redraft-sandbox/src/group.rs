//! The command's process group: waiting, terminating, and killing it on drop.

use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use process_wrap::tokio::ChildWrapper;
use tokio::time::Instant;

// The same numbers on Linux, the BSDs and macOS.
const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;
const ESRCH: i32 = 3;

/// How often the group is checked for survivors during the grace period.
const POLL: Duration = Duration::from_millis(20);

/// A spawned command leading its own process group. Dropped while armed (the run future was
/// cancelled, or failed half-way), it sends `SIGKILL` to the whole group.
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) child: Box<dyn ChildWrapper>,
    pub(crate) pgid: u32,
    /// Whether members of the group may still be running.
    armed: bool,
}

impl Group {
    /// Takes charge of a child spawned as a process group leader.
    pub(crate) fn new(child: Box<dyn ChildWrapper>) -> io::Result<Self> {
        let pgid = child.id().ok_or_else(|| io::Error::other("the command has no process id"))?;
        Ok(Group { child, pgid, armed: true })
    }

    /// Waits for the leader to exit within `timeout`, then makes sure no member of the group is
    /// left: on time, leftovers get `SIGTERM` and, after `grace`, `SIGKILL`; on timeout, the
    /// whole group does. Returns the leader's exit status and whether the timeout struck.
    pub(crate) async fn supervise(&mut self, timeout: Duration, grace: Duration) -> io::Result<(ExitStatus, bool)> {
        if let Ok(status) = tokio::time::timeout(timeout, self.child.wait()).await {
            let status = status?;
            tracing::debug!(pgid = self.pgid, %status, "the command exited");
            if group_alive(self.pgid) != Some(false) {
                tracing::debug!(pgid = self.pgid, "terminating processes the command left behind");
                self.terminate(deadline_after(grace)).await;
            }
            self.armed = false;
            return Ok((status, false));
        }
        tracing::debug!(pgid = self.pgid, ?timeout, "the command timed out; terminating its process group");
        let deadline = deadline_after(grace);
        self.signal(SIGTERM);
        let status = match tokio::time::timeout_at(deadline, self.child.wait()).await {
            Ok(status) => Some(status?),
            Err(_) => None,
        };
        if status.is_some() {
            self.wait_until_gone(deadline).await;
        }
        if status.is_none() || group_alive(self.pgid) != Some(false) {
            tracing::debug!(pgid = self.pgid, "killing the process group after the grace period");
            self.signal(SIGKILL);
        }
        let status = match status {
            Some(status) => status,
            None => self.child.wait().await?,
        };
        self.armed = false;
        Ok((status, true))
    }

    /// `SIGTERM` to the group, then `SIGKILL` at `deadline` unless it is empty by then. Without
    /// `/proc` (so no way to see the group), `SIGKILL` at once.
    async fn terminate(&mut self, deadline: Instant) {
        if group_alive(self.pgid).is_none() {
            self.signal(SIGKILL);
            return;
        }
        self.signal(SIGTERM);
        self.wait_until_gone(deadline).await;
        if group_alive(self.pgid) != Some(false) {
            self.signal(SIGKILL);
        }
    }

    /// Polls until no live process is left in the group, or until `deadline`.
    async fn wait_until_gone(&self, deadline: Instant) {
        while group_alive(self.pgid) == Some(true) && Instant::now() < deadline {
            tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
        }
    }

    /// Sends `signal` to the group; a group already gone is fine.
    fn signal(&self, signal: i32) {
        match self.child.signal(signal) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(ESRCH) => {}
            Err(e) => tracing::warn!(pgid = self.pgid, signal, error = %e, "cannot signal the process group"),
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!(pgid = self.pgid, "run cancelled; killing the process group");
            self.signal(SIGKILL);
        }
    }
}

/// `now + duration`, or far in the future when that overflows.
fn deadline_after(duration: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(duration).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// Whether a process that is not a zombie is in group `pgid`, from `/proc`; `None` without `/proc`.
pub(crate) fn group_alive(pgid: u32) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let mut saw_any = false;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_str().and_then(|n| n.parse::<u32>().ok()).is_none() {
            continue;
        }
        saw_any = true;
        // A process may exit between listing and reading: then it is not alive.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        if let Some((state, group)) = parse_stat(&stat)
            && group == pgid
            && !matches!(state, 'Z' | 'X' | 'x')
        {
            return Some(true);
        }
    }
    // An empty /proc is not procfs: no way to know.
    saw_any.then_some(false)
}

/// The state and the process group from the text of `/proc/PID/stat`: `PID (COMM) STATE PPID PGRP …`,
/// where COMM may contain spaces and parentheses.
fn parse_stat(stat: &str) -> Option<(char, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_even_with_odd_command_names() {
        assert_eq!(parse_stat("42 (sh) S 1 42 42 0 -1 4194560"), Some(('S', 42)));
        assert_eq!(parse_stat("43 (a) b (c)) Z 42 42 42 0"), Some(('Z', 42)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_group_is_alive() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let (_, pgid) = parse_stat(&stat).unwrap();
        assert_eq!(group_alive(pgid), Some(true));
    }
}
