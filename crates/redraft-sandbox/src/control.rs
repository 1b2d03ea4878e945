//! Redraft's side of a running command: waiting for it, the timeout, cancellation, and a last
//! resort when the supervisor itself does not finish.
//!
//! Redraft signals the supervisor only, never the command: a `SIGKILL` to the command's process
//! group would kill the supervisor before it could find the processes that left the group.

use std::io;
use std::os::fd::OwnedFd;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::Child;

use crate::supervisor::{KILL_NOW, TERMINATE};
use crate::sys::{self, Pid, SIGKILL};

/// How long past the grace period the supervisor may take before redraft kills its process group
/// (which catches every process that did not leave the group, the supervisor included).
const LAST_RESORT: Duration = Duration::from_secs(5);

/// A spawned supervisor, leading its own process group. Dropped while armed (the run future was
/// cancelled, or failed half-way), it tells the supervisor to kill everything at once.
#[derive(Debug)]
pub(crate) struct Supervised {
    child: Option<Child>,
    pid: Pid,
    /// Reaches end-of-file, or gets a byte, when the command has ended.
    report: pipe::Receiver,
    /// Whether processes of the command may still be running.
    armed: bool,
}

impl Supervised {
    /// Takes charge of a spawned supervisor; `report` is the read end of its report pipe.
    pub(crate) fn new(child: Child, report: OwnedFd) -> io::Result<Self> {
        let pid = child
            .id()
            .and_then(|id| Pid::try_from(id).ok())
            .ok_or_else(|| io::Error::other("the command has no process id"))?;
        let report = pipe::Receiver::from_owned_fd(report)?;
        Ok(Supervised { child: Some(child), pid, report, armed: true })
    }

    /// The supervisor's process id (also its process group id).
    pub(crate) fn pid(&self) -> Pid {
        self.pid
    }

    /// Waits for the command to end within `timeout`, then for the supervisor, which gives
    /// leftovers `SIGTERM` and, after `grace`, `SIGKILL`. At the timeout the supervisor is told to
    /// do the same to every process of the command. Returns the command's exit status and whether
    /// the timeout struck.
    pub(crate) async fn supervise(&mut self, timeout: Duration, grace: Duration) -> io::Result<(ExitStatus, bool)> {
        let mut byte = [0u8; 1];
        // A byte or end-of-file (the supervisor is gone) alike: the command has ended.
        let ended = tokio::time::timeout(timeout, self.report.read(&mut byte)).await.is_ok();
        if !ended {
            tracing::debug!(pid = self.pid, ?timeout, "the command timed out; terminating every process it started");
            self.signal(TERMINATE);
        }
        let Some(child) = self.child.as_mut() else {
            return Err(io::Error::other("the command was already waited for"));
        };
        let status = match tokio::time::timeout(grace.saturating_add(LAST_RESORT), child.wait()).await {
            Ok(status) => status?,
            Err(_) => {
                tracing::warn!(pid = self.pid, "the command's supervisor did not finish; killing its process group");
                signal_group(self.pid, SIGKILL);
                child.wait().await?
            }
        };
        self.armed = false;
        if group_alive(self.pid) == Some(true) {
            // Only when the supervisor was killed from outside: what is left in the group goes too.
            tracing::warn!(pid = self.pid, "processes are left in the command's process group; killing them");
            signal_group(self.pid, SIGKILL);
        }
        Ok((status, !ended))
    }

    /// Sends `signal` to the supervisor; one already gone is fine.
    fn signal(&self, signal: i32) {
        match sys::send_signal(self.pid, signal) {
            Ok(()) | Err(sys::Errno(libc::ESRCH)) => {}
            Err(e) => tracing::warn!(pid = self.pid, signal, errno = e.0, "cannot signal the command's supervisor"),
        }
    }
}

fn signal_group(pgid: Pid, signal: i32) {
    if let Err(e) = sys::signal_group(pgid, signal)
        && e.0 != libc::ESRCH
    {
        tracing::warn!(pgid, signal, errno = e.0, "cannot signal the command's process group");
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        tracing::debug!(pid = self.pid, "run cancelled; killing every process of the command");
        self.signal(KILL_NOW);
        // Reap the supervisor, and kill its group should it not finish.
        let (Some(mut child), Ok(runtime)) = (self.child.take(), tokio::runtime::Handle::try_current()) else {
            return;
        };
        let pgid = self.pid;
        runtime.spawn(async move {
            if tokio::time::timeout(LAST_RESORT, child.wait()).await.is_err() {
                tracing::warn!(pgid, "the cancelled command's supervisor did not finish; killing its process group");
                signal_group(pgid, SIGKILL);
                let _ = child.wait().await;
            }
        });
    }
}

/// Whether a process that is not a zombie is in group `pgid`, from `/proc`; `None` without `/proc`.
fn group_alive(pgid: Pid) -> Option<bool> {
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
fn parse_stat(stat: &str) -> Option<(char, Pid)> {
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
