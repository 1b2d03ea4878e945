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
/// used. A connection is admitted only while it leaves the runs their floor: with the floor
/// kept, a request waiting for its run in the queue can always have it executed (the runs in
/// flight finish and give theirs back). A run takes any descriptor under the floor, and past it
/// only while it leaves [`Files::headroom`] free for connections: a request that arrives while
/// runs hold the rest waits in the queue instead of being refused (a queue is backpressure, a
/// refusal an error the client sees). A server whose clients hang up at once (`POST /v1/runs`)
/// or hold few connections still executes nearly as many runs as its limit allows.
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

    /// What runs past their floor leave free for arriving connections: a quarter of what the
    /// floor does not reserve (at least one).
    pub fn headroom(&self) -> u64 {
        (self.total - self.floor).div_ceil(4)
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

    /// A descriptor for a run, unless the connections and runs hold them all, or the runs hold
    /// their floor and taking it would leave less than the headroom.
    pub fn run(self: &Arc<Self>) -> Option<FileHeld> {
        let mut used = self.used();
        let taken = used.connections + used.runs;
        if taken >= self.total || (used.runs >= self.floor && taken.saturating_add(self.headroom()) >= self.total) {
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
        assert_eq!(files.headroom(), 2);
        // Without connections, runs take every descriptor but the headroom.
        let runs: Vec<_> = std::iter::from_fn(|| files.run()).collect();
        assert_eq!(runs.len(), 8);
        let arrived: Vec<_> = std::iter::from_fn(|| files.connection()).collect();
        assert_eq!(arrived.len(), 2, "the headroom admits connections");
        drop((runs, arrived));
        assert_eq!(files.in_use(), (0, 0), "every descriptor is given back");

        // Connections stop where the runs' floor begins; the runs still get it all.
        let mut connections: Vec<_> = std::iter::from_fn(|| files.connection()).collect();
        assert_eq!(connections.len(), 7);
        let runs: Vec<_> = std::iter::from_fn(|| files.run()).collect();
        assert_eq!(runs.len(), 3);
        // With their floor held, runs leave a closing connection's descriptor to the next one.
        connections.pop();
        assert!(files.run().is_none(), "past the floor, a run leaves the headroom");
        connections.push(files.connection().expect("the descriptor goes to a connection"));
        assert_eq!(files.in_use(), (7, 3));
        drop(runs);

        // Runs past their floor take what the connections leave but the headroom, so a new
        // connection is admitted while they run.
        connections.truncate(4);
        assert_eq!(files.in_use(), (4, 0));
        let runs: Vec<_> = (0..8).map_while(|_| files.run()).collect();
        assert_eq!((runs.len(), files.in_use()), (4, (4, 4)));
        let arrived: Vec<_> = std::iter::from_fn(|| files.connection()).collect();
        assert_eq!(arrived.len(), 2, "the headroom admits connections while runs hold the rest");
    }

    #[test]
    fn arriving_connections_are_admitted_while_runs_past_their_floor_hold_descriptors() {
        // The open-files budget of a server with a limit of 20,000 and as many slots.
        let shared = shared_files(20_000);
        let files = Files::new(shared, shared / 3);
        let mut held = Vec::new();
        // Each request is a connection, then a run for it: all 10,000 are admitted, and the
        // runs that do not fit wait (in the queue) instead of a connection being refused.
        let mut waiting = 0;
        for _ in 0..10_000 {
            held.push(files.connection().expect("every connection is admitted"));
            match files.run() {
                Some(run) => held.push(run),
                None => waiting += 1,
            }
        }
        let (connections, runs) = files.in_use();
        assert_eq!(connections, 10_000);
        assert!(runs >= shared / 3, "the runs have at least their floor: {runs}");
        assert_eq!(runs + waiting, 10_000);
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
