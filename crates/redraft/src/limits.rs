//! The open-files budget of a process that executes runs: every run in flight holds a
//! connection to its model (and briefly the pipes of its commands), every HTTP client a socket.
//! Running out of descriptors must shed new work, never fail a run that was accepted, so the
//! run slots are fitted to the limit before anything starts.

/// Descriptors kept for the store, logs, the listener and commands' pipes.
pub const RESERVED_FILES: u64 = 128;
/// Descriptors a run in flight may hold at once (its model connection, a command's pipes).
pub const FILES_PER_RUN: u64 = 4;

/// Raise the soft open-files limit to the hard one; the limit now in force (`None` where it
/// cannot be read).
pub fn open_files() -> Option<u64> {
    rlimit::increase_nofile_limit(u64::MAX).ok().filter(|n| *n > 0)
}

/// `slots` fitted to `limit` open files, keeping `others` for something else (the server's
/// connections): `Ok` as asked, or `Err` with the most that fit (at least 1).
pub fn fit_slots(slots: usize, limit: u64, others: u64) -> Result<usize, usize> {
    let room = limit.saturating_sub(RESERVED_FILES + others) / FILES_PER_RUN;
    let room = usize::try_from(room).unwrap_or(usize::MAX).max(1);
    if slots <= room { Ok(slots) } else { Err(room) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_fit_the_open_files_limit() {
        assert_eq!(fit_slots(64, 1024, 0), Ok(64));
        assert_eq!(fit_slots(10_000, 1024, 0), Err(224));
        assert_eq!(fit_slots(64, 1024, 512), Ok(64));
        assert_eq!(fit_slots(200, 1024, 512), Err(96));
        assert_eq!(fit_slots(8, 100, 0), Err(1), "never fewer than one");
        assert_eq!(fit_slots(0, 1024, 0), Ok(0), "no slots asked (an API node)");
    }
}
