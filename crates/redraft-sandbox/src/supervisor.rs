//! The supervisor: the process [`run`](crate::run) spawns. It forks the command and stays until
//! every process below it is gone.
//!
//! The supervisor is a *child subreaper*: an orphan anywhere below it (a double fork, a process
//! whose parent exited) is re-parented to it rather than to init, and a process that calls
//! `setsid` or `setpgid` is still below it. So "every process the command started" is exactly
//! "every descendant of the supervisor", found by following parent pids in `/proc`, and the job
//! is done when `waitpid` reports no child left.
//!
//! The supervisor is forked from a multi-threaded process and never execs, so it may only make
//! async-signal-safe calls (see `sys.rs`): no allocation, no locks, no formatting, no std I/O.
//! It blocks every signal and takes the ones it acts on with `sigtimedwait`:
//!
//! - `SIGCHLD`: a child ended; reap it. When the command ends, the processes it left behind get
//!   `SIGTERM`, then `SIGKILL` after the grace period, and the supervisor exits with the command's
//!   own status (dying by the same signal when a signal killed it).
//! - `SIGTERM` (the timeout): every process below gets `SIGTERM`, then `SIGKILL` after the grace.
//! - [`KILL_NOW`] from its parent (the run was cancelled): every process below gets `SIGKILL`.
//! - [`PARENT_GONE`], the parent-death signal, and a check every second: when the parent process
//!   is gone (redraft was killed), every process below gets `SIGKILL`. The death signal also
//!   fires when merely the spawning *thread* exits, so it only prompts the check.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::limits::Limits;
use crate::sys::{self, Errno, Forked, Pid, SIGCHLD, SIGCONT, SIGKILL, SIGTERM, SIGUSR1, SIGUSR2, SignalSet, Waited};
use crate::tree::Tree;

/// Sent by redraft to end the command at once (the run was cancelled).
pub(crate) const KILL_NOW: i32 = SIGUSR1;
/// Sent by redraft at the timeout: terminate, then kill after the grace period.
pub(crate) const TERMINATE: i32 = SIGTERM;
/// The supervisor's parent-death signal.
const PARENT_GONE: i32 = SIGUSR2;
/// How often the supervisor checks that its parent is still there, whatever else happens.
const PARENT_CHECK: Duration = Duration::from_secs(1);
/// How long to wait for a child to end between two rounds of `SIGKILL`.
const KILL_ROUND: Duration = Duration::from_millis(10);

/// The one descriptor above stderr the command inherits across `exec` (the network filter that
/// `bwrap` reads), or none: every other one is closed at `exec`, whatever this process holds
/// open without close-on-exec.
pub(crate) type Inherit = Option<RawFd>;

/// Everything the supervisor needs, prepared in the parent (the supervisor may not allocate).
#[derive(Debug)]
pub(crate) struct Plan {
    /// Redraft's pid: the supervisor's parent, the only process whose [`KILL_NOW`] counts.
    parent: Pid,
    grace: Duration,
    /// Resource limits for the command (never the supervisor).
    limits: Limits,
    /// The write end of a pipe; one byte is written to it when the command has ended.
    report: RawFd,
    /// What the command inherits.
    inherit: Inherit,
    tree: Tree,
}

impl Plan {
    /// A plan for a command whose leftovers get `grace` between `SIGTERM` and `SIGKILL`.
    pub(crate) fn new(grace: Duration, limits: Limits, report: RawFd, inherit: Inherit) -> Self {
        Plan { parent: sys::own_pid(), grace, limits, report, inherit, tree: Tree::new() }
    }

    /// The `pre_exec` hook. In the spawned child it becomes the supervisor: it forks the command,
    /// which returns `Ok` (so `exec` follows there), and never returns itself.
    pub(crate) fn enter(&mut self) -> io::Result<()> {
        sys::set_not_dumpable()?;
        sys::set_child_subreaper()?;
        sys::set_parent_death_signal(PARENT_GONE)?;
        if sys::parent_pid() != self.parent {
            // Redraft died before the death signal was set.
            return Err(Errno(libc::ESRCH).into());
        }
        // Exit statuses are needed: SIGCHLD must not be ignored.
        sys::default_action(SIGCHLD)?;
        let mask = sys::block_all_signals()?;
        match sys::fork()? {
            Forked::Child => {
                // The command: dies with the supervisor, gets the mask it would have had, the
                // descriptors it may inherit, and the resource limits; then `exec`.
                sys::set_parent_death_signal(SIGKILL)?;
                sys::set_signal_mask(&mask)?;
                sys::inherit_only(self.inherit)?;
                self.limits.apply()
            }
            Forked::Parent(command) => {
                // Hold nothing open: the spawner waits for its error pipe to close, and the
                // command's output pipes must end when the command's processes do.
                sys::close_all_fds_except(self.report);
                Supervisor { plan: self, command, status: None, children: true }.run()
            }
        }
    }
}

struct Supervisor<'a> {
    plan: &'a mut Plan,
    command: Pid,
    /// The command's wait status, once it has ended.
    status: Option<i32>,
    /// Whether the supervisor had children at the last reaping.
    children: bool,
}

impl Supervisor<'_> {
    fn run(mut self) -> ! {
        let waited = SignalSet::of(&[SIGCHLD, TERMINATE, KILL_NOW, PARENT_GONE]);
        // Set once leftovers (or, at the timeout, everything) have had SIGTERM.
        let mut kill_at: Option<Duration> = None;
        loop {
            self.reap();
            let now = sys::monotonic_now();
            if !self.children {
                self.exit();
            }
            match kill_at {
                None if self.status.is_some() => kill_at = Some(self.terminate()),
                Some(deadline) if now >= deadline => self.kill_all_and_exit(),
                _ => {}
            }
            let wait = kill_at.map_or(PARENT_CHECK, |deadline| deadline.saturating_sub(now).min(PARENT_CHECK));
            match sys::wait_signal(&waited, wait) {
                Some(got) if got.signal == TERMINATE && kill_at.is_none() => kill_at = Some(self.terminate()),
                Some(got) if got.signal == KILL_NOW && got.sender == self.plan.parent => self.kill_all_and_exit(),
                _ => {}
            }
            if sys::parent_pid() != self.plan.parent {
                self.kill_all_and_exit();
            }
        }
    }

    /// Reaps every ended child, noting the command's status and reporting its end.
    fn reap(&mut self) {
        loop {
            match sys::wait_any() {
                Waited::Exited { pid, status } => {
                    if pid == self.command && self.status.is_none() {
                        self.status = Some(status);
                        sys::write_ignoring_errors(self.plan.report, b"x");
                    }
                }
                Waited::Running => {
                    self.children = true;
                    return;
                }
                Waited::NoChildren => {
                    self.children = false;
                    return;
                }
            }
        }
    }

    /// `SIGTERM` (and `SIGCONT`, for stopped ones) to every process below; returns when to kill.
    fn terminate(&mut self) -> Duration {
        self.plan.tree.signal_below(sys::own_pid(), &[SIGTERM, SIGCONT]);
        sys::monotonic_now().checked_add(self.plan.grace).unwrap_or(Duration::MAX)
    }

    /// `SIGKILL` to every process below, round after round, until no child is left; then exit.
    fn kill_all_and_exit(&mut self) -> ! {
        let chld = SignalSet::of(&[SIGCHLD]);
        loop {
            self.reap();
            if !self.children {
                self.exit();
            }
            // Those not found in this round (forked meanwhile, or re-parented) are in the next.
            self.plan.tree.signal_below(sys::own_pid(), &[SIGKILL]);
            let _ = sys::wait_signal(&chld, KILL_ROUND);
        }
    }

    /// Exits as the command did.
    fn exit(&self) -> ! {
        match self.status {
            Some(status) if libc::WIFEXITED(status) => sys::exit(libc::WEXITSTATUS(status)),
            Some(status) if libc::WIFSIGNALED(status) => sys::die_by(libc::WTERMSIG(status)),
            _ => sys::exit(1),
        }
    }
}
