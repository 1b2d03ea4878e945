//! The sandbox spec: what a command may see and use.

use std::ffi::OsString;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::SandboxError;

/// Variables a sandboxed command always gets from this process's environment (when set).
pub const PASSED_ENV: [&str; 3] = ["PATH", "HOME", "LANG"];

/// A sandbox spec, from config (`[sandboxes.NAME]`) or inline JSON; every field is optional.
///
/// A sandbox always starts the command from a clean environment ([`PASSED_ENV`], [`Sandbox::env`],
/// then [`Command::env`](crate::Command::env)) and applies the resource limits in the child before
/// `exec`. Network off or a read-only root need bubblewrap (`bwrap`); without it [`run`](crate::run)
/// refuses and runs nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Sandbox {
    /// The working directory, overriding [`Command::workdir`](crate::Command::workdir) (a relative
    /// path is taken relative to it). By default, the command's.
    pub workdir: Option<PathBuf>,
    /// Variables passed through besides [`PASSED_ENV`]. redraft treats each value as a secret
    /// (`[redacted]` in everything it writes out), whatever the variable's name. By default, none.
    pub env: Vec<String>,
    /// CPU time limit in seconds (`RLIMIT_CPU`); the command is killed when it is used up. By default, unlimited.
    pub cpu_seconds: Option<u64>,
    /// Address-space limit in MiB (`RLIMIT_AS`). By default, unlimited.
    pub memory_mb: Option<u64>,
    /// Open file descriptor limit (`RLIMIT_NOFILE`). By default, inherited.
    pub open_files: Option<u64>,
    /// Largest file the command may write, in MiB (`RLIMIT_FSIZE`). By default, unlimited.
    pub file_size_mb: Option<u64>,
    /// Whether the command may use the network. By default, `true`.
    ///
    /// `false` runs the command under bubblewrap in a network namespace of its own, with only a
    /// private loopback (no TCP or UDP to the host or beyond, no abstract Unix socket of the
    /// host), and under a seccomp filter that keeps it from every Unix socket of the host bound
    /// to a path, wherever the path is (a temporary directory, `/run`, its own working directory,
    /// a path exposed read-only): `socket` works only for `AF_INET`, `AF_INET6` and `AF_NETLINK`,
    /// `socketpair` only for stream and seqpacket Unix pairs, `io_uring_setup` not at all; the
    /// rest fail with `EPERM`, and a 32-bit or x32 system call kills the process. No file
    /// descriptor of this process but stdio reaches the command (not even one left without
    /// close-on-exec), and the command has no capabilities, also when redraft runs as root (it
    /// could otherwise leave the namespace).
    ///
    /// It does not close the file system itself (a file or FIFO a host process reads is still a
    /// channel). The command cannot serve on a Unix socket of its own either. Only x86_64 and aarch64 builds have the filter; elsewhere
    /// [`run`](crate::run()) refuses network off.
    pub network: bool,
    /// Whether the file system is read-only except the working directory (and a private `/tmp`);
    /// `true` runs the command under bubblewrap, with no capabilities (so it cannot remount the
    /// root writable, also when redraft runs as root). By default, `false`.
    pub read_only_root: bool,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox {
            workdir: None,
            env: Vec::new(),
            cpu_seconds: None,
            memory_mb: None,
            open_files: None,
            file_size_mb: None,
            network: true,
            read_only_root: false,
        }
    }
}

impl Sandbox {
    /// What this sandbox needs bubblewrap for (`"network off"` or `"a read-only root"`), if anything.
    pub fn needs_bwrap(&self) -> Option<&'static str> {
        if !self.network {
            Some("network off")
        } else if self.read_only_root {
            Some("a read-only root")
        } else {
            None
        }
    }

    /// The environment a sandboxed command starts from: [`PASSED_ENV`] and [`Sandbox::env`], with
    /// their values in this process (unset ones are left out).
    pub(crate) fn clean_env(&self) -> Result<Vec<(OsString, OsString)>, SandboxError> {
        let mut vars: Vec<(OsString, OsString)> = Vec::new();
        for name in PASSED_ENV.iter().copied().chain(self.env.iter().map(String::as_str)) {
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(SandboxError::EnvName { name: name.to_owned() });
            }
            if vars.iter().any(|(n, _)| n == name) {
                continue;
            }
            if let Some(value) = std::env::var_os(name) {
                vars.push((name.into(), value));
            }
        }
        Ok(vars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_allow_network_and_a_writable_root() {
        let sandbox = Sandbox::default();
        assert!(sandbox.network && !sandbox.read_only_root);
        assert_eq!(sandbox.needs_bwrap(), None);
    }

    #[test]
    fn bwrap_is_needed_for_network_off_or_a_read_only_root() {
        let offline = Sandbox { network: false, ..Sandbox::default() };
        assert_eq!(offline.needs_bwrap(), Some("network off"));
        let read_only = Sandbox { read_only_root: true, ..Sandbox::default() };
        assert_eq!(read_only.needs_bwrap(), Some("a read-only root"));
    }

    #[test]
    fn bad_variable_names_are_refused() {
        for name in ["", "A=B", "A\0"] {
            let sandbox = Sandbox { env: vec![name.to_owned()], ..Sandbox::default() };
            assert!(matches!(sandbox.clean_env(), Err(SandboxError::EnvName { .. })), "{name:?}");
        }
    }
}
