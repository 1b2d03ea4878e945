//! Resource limits, applied in the child between `fork` and `exec`. This module holds the
//! crate's only `unsafe`: registering that `pre_exec` hook.
#![allow(unsafe_code)]

use std::io;

use rlimit::Resource;

use crate::Sandbox;

const MIB: u64 = 1 << 20;

/// The limits to set in the child, resolved in the parent so the hook only calls `setrlimit`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Limits {
    slots: [Option<(Resource, u64)>; 4],
}

impl Limits {
    /// The limits a sandbox asks for, each lowered to this process's hard limit (a child may not
    /// raise it).
    pub(crate) fn of(sandbox: &Sandbox) -> io::Result<Self> {
        let wanted = [
            (Resource::CPU, sandbox.cpu_seconds),
            (Resource::AS, sandbox.memory_mb.map(|mb| mb.saturating_mul(MIB))),
            (Resource::NOFILE, sandbox.open_files),
            (Resource::FSIZE, sandbox.file_size_mb.map(|mb| mb.saturating_mul(MIB))),
        ];
        let mut limits = Limits::default();
        for (slot, (resource, value)) in limits.slots.iter_mut().zip(wanted) {
            let Some(value) = value else { continue };
            if !resource.is_supported() {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("{resource:?} is not supported on this platform"),
                ));
            }
            let (_, hard) = rlimit::getrlimit(resource)?;
            *slot = Some((resource, value.min(hard)));
        }
        Ok(limits)
    }

    /// Registers a `pre_exec` hook setting the limits (soft = hard) in the child, if there are any.
    pub(crate) fn install(self, command: &mut tokio::process::Command) {
        if self.slots.iter().all(Option::is_none) {
            return;
        }
        // SAFETY: the hook runs in the forked child before `exec`, where only async-signal-safe
        // calls are allowed. It owns a `Copy` array (no heap, no locks, nothing shared with the
        // parent) and only calls `setrlimit(2)` through `rlimit::setrlimit`, which allocates
        // nothing for supported resources (checked in `Limits::of`, in the parent) and reports
        // failure with `io::Error::last_os_error()`, which does not allocate either.
        unsafe {
            command.pre_exec(move || self.apply());
        }
    }

    fn apply(&self) -> io::Result<()> {
        for &(resource, value) in self.slots.iter().flatten() {
            rlimit::setrlimit(resource, value, value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn megabytes_become_bytes_and_unset_limits_stay_unset() {
        let sandbox = Sandbox { memory_mb: Some(512), open_files: Some(64), ..Sandbox::default() };
        let limits = Limits::of(&sandbox).unwrap();
        let (_, as_hard) = rlimit::getrlimit(Resource::AS).unwrap();
        let (_, nofile_hard) = rlimit::getrlimit(Resource::NOFILE).unwrap();
        assert_eq!(
            limits.slots,
            [None, Some((Resource::AS, (512 * MIB).min(as_hard))), Some((Resource::NOFILE, 64.min(nofile_hard))), None]
        );
    }
}
