//! The open-files budget of a process that executes runs: every run in flight holds a
//! connection to its model, its HTTP validator or its judge (one at a time), every HTTP client
//! a socket, every command its pipes. Running out of descriptors must shed new work, never fail
//! a run that was accepted, so the run slots are fitted to the limit before anything starts.
//!
//! The limit is shared out as:
//! - [`RESERVED_FILES`] for the store, logs, the listener and the idle kept-alive connections
//!   of the HTTP clients (at most 64 per host);
//! - a sixteenth for commands (verifiers, agents), which wait for room past it
//!   ([`redraft_sandbox::commands_at_once`]);
//! - the rest for runs ([`FILES_PER_RUN`] each) and, in a server, its clients' connections,
//!   which share it as [`Files`] says.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// Descriptors kept for the store, logs, the listener and idle kept-alive connections.
pub const RESERVED_FILES: u64 = 256;
/// Descriptors a run in flight holds at once: one connection, to its model or to an evaluator
/// (they are called one after another). Its commands' pipes come from the commands' share.
pub const FILES_PER_RUN: u64 = 1;

/// Raise the soft open-files limit to the hard one; the limit now in force (`None` where it
/// cannot be read).
pub fn open_files() -> Option<u64> {
    rlimit::increase_nofile_limit(u64::MAX).ok().filter(|n| *n > 0)
}

/// What `limit` leaves for runs and connections once the reserve and the commands' share are
/// taken.
pub fn shared_files(limit: u64) -> u64 {
    limit.saturating_sub(RESERVED_FILES).saturating_sub(redraft_sandbox::command_files(limit))
}

/// `slots` fitted to `files` descriptors: `Ok` as asked, or `Err` with the most that fit (at
/// least 1).
pub fn fit_slots(slots: usize, files: u64) -> Result<usize, usize> {
    let room = usize::try_from(files / FILES_PER_RUN).unwrap_or(usize::MAX).max(1);
    if slots <= room { Ok(slots) } else { Err(room) }
}

/// The descriptors a server's runs and its clients' connections share, taken as they are
/// used: a run takes any descriptor no connection holds, and a connection is admitted only
/// while it leaves the runs their floor. With the floor kept, a request waiting for its run in
/// the queue can always have it executed (the runs in flight finish and give theirs back); with
/// the rest shared, a server whose clients hang up at once (`POST /v1/runs`) or hold few
/// connections executes as many runs as its limit allows, not only the floor.
#[derive(Debug)]
pub struct Files {
    total: u64,
    floor: u64,
    used: Mutex<InUse>,
    freed: Notify,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct InUse {
    connections: u64,
    runs: u64,
}

/// A descriptor taken from [`Files`], given back when dropped.
#[derive(Debug)]
pub struct FileHeld {
    files: Arc<Files>,
    run: bool,
}

impl Files {
    /// `total` descriptors for runs and connections; runs always have `floor` of them (at most
    /// `total - 1`: one connection is always possible).
    pub fn new(total: u64, floor: u64) -> Arc<Self> {
        let total = total.max(2);
        Arc::new(Self { total, floor: floor.min(total - 1), used: Mutex::default(), freed: Notify::new() })
    }

    fn used(&self) -> MutexGuard<'_, InUse> {
        // Two counters, each changed in one step: a panic elsewhere leaves them consistent.
        self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A descriptor for a client's connection, unless taking it would leave the runs less than
    /// their floor (or none is left).
    pub fn connection(self: &Arc<Self>) -> Option<FileHeld> {
        let mut used = self.used();
        if used.connections + used.runs.max(self.floor) >= self.total {
            return None;
        }
        used.connections += 1;
        Some(FileHeld { files: self.clone(), run: false })
    }

    /// A descriptor for a run, unless the connections and runs hold them all.
    pub fn run(self: &Arc<Self>) -> Option<FileHeld> {
        let mut used = self.used();
        if used.connections + used.runs >= self.total {
            return None;
        }
        used.runs += 1;
        Some(FileHeld { files: self.clone(), run: true })
    }

    /// Completes once a descriptor was given back (at once if one was since the last call).
    pub async fn freed(&self) {
        self.freed.notified().await;
    }

    /// Connections and runs holding descriptors now.
    pub fn in_use(&self) -> (u64, u64) {
        let used = self.used();
        (used.connections, used.runs)
    }
}

impl Drop for FileHeld {
    fn drop(&mut self) {
        {
            let mut used = self.files.used();
            if self.run {
                used.runs = used.runs.saturating_sub(1);
            } else {
                used.connections = used.connections.saturating_sub(1);
            }
        }
        self.files.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_take_what_connections_leave_and_connections_leave_the_runs_their_floor() {
        let files = Files::new(10, 3);
        // Without connections, runs take every descriptor.
        let runs: Vec<_> = std::iter::from_fn(|| files.run()).collect();
        assert_eq!(runs.len(), 10);
        assert!(files.connection().is_none(), "nothing left for a connection");
        drop(runs);
        assert_eq!(files.in_use(), (0, 0), "every descriptor is given back");

        // Connections stop where the runs' floor begins; the runs still get it all.
        let mut connections: Vec<_> = std::iter::from_fn(|| files.connection()).collect();
        assert_eq!(connections.len(), 7);
        let runs: Vec<_> = std::iter::from_fn(|| files.run()).collect();
        assert_eq!(runs.len(), 3);
        // A connection closing gives its descriptor to whichever asks first.
        connections.pop();
        assert!(files.run().is_some_and(|r| r.run));
        assert_eq!(files.in_use(), (6, 3));
        drop(runs);

        // Runs past their floor take what the connections leave, and keep new connections
        // out only while they run.
        let mut runs: Vec<_> = (0..8).map_while(|_| files.run()).collect();
        assert_eq!((runs.len(), files.in_use()), (4, (6, 4)));
        assert!(files.connection().is_none());
        runs.truncate(1);
        assert!(files.connection().is_some(), "back under the floor, a connection is admitted");
    }

    #[tokio::test]
    async fn a_descriptor_given_back_wakes_whoever_waits_for_one() {
        let files = Files::new(4, 2);
        let held: Vec<_> = std::iter::from_fn(|| files.run()).collect();
        assert!(files.run().is_none());
        let waiter = tokio::spawn({
            let files = files.clone();
            async move {
                files.freed().await;
                files.run().is_some()
            }
        });
        drop(held);
        assert!(waiter.await.unwrap(), "woken with a descriptor to take");
    }

    #[test]
    fn slots_fit_the_open_files_limit() {
        assert_eq!(shared_files(1024), 1024 - 256 - 64);
        assert_eq!(shared_files(20_000), 20_000 - 256 - 1_250);
        assert_eq!(shared_files(100), 0, "a limit below the reserve leaves nothing");
        assert_eq!(fit_slots(64, shared_files(1024)), Ok(64));
        assert_eq!(fit_slots(10_000, shared_files(1024)), Err(704));
        assert_eq!(fit_slots(8, 0), Err(1), "never fewer than one");
        assert_eq!(fit_slots(0, 704), Ok(0), "no slots asked (an API node)");
    }
}
