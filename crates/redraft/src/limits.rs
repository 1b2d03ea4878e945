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
//! - the rest for runs ([`FILES_PER_RUN`] each) and, in a server, its clients' connections.

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

#[cfg(test)]
mod tests {
    use super::*;

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
