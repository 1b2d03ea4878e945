//! Commands at once in this process, within its open-files limit. A command holds descriptors
//! while it runs (its three pipes, the supervisor's report pipe and, while it starts, the
//! spawner's own), so thousands started at once would run the process out of descriptors and
//! fail whatever opens one next: a run's connection to its model, a server's next client. Past
//! the bound a command waits for one to end before it starts; it never fails for it.

use std::sync::OnceLock;

use tokio::sync::{Semaphore, SemaphorePermit};

/// Descriptors a running command may hold at once, counted generously: its three pipes, the
/// supervisor's report pipe, and the two ends of the pipe through which the spawner learns that
/// `exec` failed, plus room for bubblewrap's (with the network off, the file in memory holding
/// its seccomp filter, until the command is spawned).
pub const FILES_PER_COMMAND: u64 = 8;

/// The share of the open-files limit commands may hold: a sixteenth. The rest is for runs'
/// connections, a server's clients and the store.
pub fn command_files(limit: u64) -> u64 {
    limit / 16
}

/// Commands that may run at once under an open-files limit of `limit` (at least one).
pub fn commands_at_once(limit: u64) -> usize {
    usize::try_from(command_files(limit) / FILES_PER_COMMAND).unwrap_or(usize::MAX).max(1)
}

/// The process's bound, set from the open-files limit in force when the first command starts
/// (a server raises its soft limit to the hard one before it starts anything).
fn gate() -> &'static Semaphore {
    static GATE: OnceLock<Semaphore> = OnceLock::new();
    GATE.get_or_init(|| {
        let limit = rlimit::Resource::NOFILE.get_soft().unwrap_or(1024);
        Semaphore::new(commands_at_once(limit).min(Semaphore::MAX_PERMITS))
    })
}

/// Wait for room to start a command; the room is given back when the permit is dropped.
pub(crate) async fn admit() -> Option<SemaphorePermit<'static>> {
    admit_to(gate()).await
}

/// `None` only if the semaphore was closed, which this crate never does: the command then runs
/// unbounded rather than not at all.
pub(crate) async fn admit_to(gate: &Semaphore) -> Option<SemaphorePermit<'_>> {
    gate.acquire().await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_get_a_sixteenth_of_the_limit() {
        assert_eq!(commands_at_once(1024), 8);
        assert_eq!(commands_at_once(20_000), 156);
        assert_eq!(commands_at_once(64), 1, "never fewer than one");
        assert_eq!(command_files(20_000), 1_250);
    }
}
