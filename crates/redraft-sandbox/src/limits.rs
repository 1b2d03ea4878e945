//! Resource limits, resolved in the parent and applied in the command's process between `fork`
//! and `exec` (never in the supervisor).

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

    /// Sets the limits (soft = hard) in this process. Called in the command's process between
    /// `fork` and `exec`, so it only calls `setrlimit(2)` through `rlimit::setrlimit`, which
    /// allocates nothing for supported resources (checked in [`Limits::of`], in the parent) and
    /// reports failure with `io::Error::last_os_error()`, which does not allocate either.
    pub(crate) fn apply(&self) -> io::Result<()> {
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
