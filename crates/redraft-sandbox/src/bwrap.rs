//! Bubblewrap: finding a working `bwrap` and building its command line.
//!
//! The sandboxed command runs as `bwrap [mounts] --cap-drop ALL --unshare-ipc [--unshare-net
//! --seccomp FD] --unshare-pid --die-with-parent --chdir WORKDIR -- PROGRAM…`, and `bwrap` is the
//! process the supervisor forks. The command has no capabilities, also when redraft runs as
//! root (bwrap would otherwise leave it every one, and `CAP_SYS_ADMIN` remounts a read-only
//! root writable), and System V and POSIX IPC objects of its own. Two mechanisms overlap:
//!
//! - every process in the sandbox is a descendant of the supervisor, which signals each of them
//!   (by its pid outside the namespace) at the timeout, on cancellation, and when `bwrap` exits;
//! - `--unshare-pid` gives the sandbox a PID namespace whose init is bwrap's own child: when it
//!   dies, the kernel kills everything left in the namespace; `--die-with-parent` kills that init
//!   when `bwrap` dies, and kills `bwrap` when the supervisor dies. That covers even a process that
//!   kills the supervisor.
//!
//! One consequence: `bwrap` does not handle `SIGTERM`, so the `SIGTERM` at the timeout kills it
//! and, with it, the whole sandbox. A sandboxed command that traps `SIGTERM` may or may not get to
//! clean up before that; the grace period is best-effort under bubblewrap.
//!
//! # Network off
//!
//! `--unshare-net` gives the command a network namespace of its own with nothing but a loopback
//! interface: no TCP or UDP to anywhere, the host's loopback included, and none of the host's
//! abstract Unix sockets. A network namespace does not cover the file system, though, which the
//! sandbox shares with the host: a Unix socket bound to a path (D-Bus, `docker.sock`, an
//! `ssh-agent`, a server's socket in `/tmp` or in the working directory itself) would stay
//! reachable. So, with the network off, more holds:
//!
//! - The command runs under a seccomp filter (`--seccomp FD`; see `seccomp.rs`) that lets it
//!   make no socket able to address a path, wherever the path is: `socket` works only for
//!   `AF_INET`, `AF_INET6` and `AF_NETLINK` (which live in the namespace), `socketpair` only for
//!   stream and seqpacket Unix pairs (connected for good, so a program's own processes can still
//!   talk), `io_uring_setup` not at all; the rest fail with `EPERM`. A system call of another ABI
//!   (32-bit, x32) kills the process. `bwrap` installs the filter right before it executes the
//!   command (and in its init process); every process of the command inherits it and none can
//!   lift it. The filter closes the class rather than hiding the directories where sockets
//!   usually live.
//! - The command inherits no file descriptor but stdio: its process, between `fork` and `exec`,
//!   marks every other one close-on-exec (`bwrap` itself passes on whatever it inherits), so no
//!   socket this process holds, even one left without close-on-exec by a library or inherited by
//!   redraft from whoever started it, gets in. The one exception is the filter's own descriptor,
//!   a file in memory (`memfd_create`, close-on-exec everywhere else), which `bwrap` reads and
//!   closes before the command starts.
//! - The command has no capabilities (as in every bubblewrap sandbox): with `CAP_SYS_ADMIN` it
//!   could unmount the sandbox's `/proc`, find the host's below it and join a host process's
//!   network namespace (`setns`), network and all.
//!
//! What network off does not close: the file system itself, so a file or a FIFO that a host
//! process reads or writes is still a channel to it. And what it takes away: a command cannot serve on a Unix
//! socket of its own either (a test suite starting a database on a socket, Python's
//! `multiprocessing.Manager`), since `socket(AF_UNIX, …)` fails with `EPERM`. The filter exists for
//! x86_64 and aarch64 builds; elsewhere [`run`](crate::run()) refuses network off
//! ([`SandboxError::NetworkFilterUnsupported`](crate::SandboxError::NetworkFilterUnsupported)).

use std::ffi::{OsStr, OsString};
use std::os::fd::RawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::Sandbox;

/// The smallest sandbox with every namespace `run` may ask for; `true` must run in it.
const PROBE_ARGS: [&str; 20] = [
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--ro-bind",
    "/proc/sys",
    "/proc/sys",
    "--cap-drop",
    "ALL",
    "--unshare-ipc",
    "--unshare-uts",
    "--new-session",
    "--unshare-net",
    "--unshare-pid",
    "--die-with-parent",
    "--",
    "true",
];

/// How long the probe sandbox may take to start and exit.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether bubblewrap can be used.
#[derive(Debug)]
pub(crate) enum Probe {
    /// This `bwrap` created a sandbox.
    Ready(PathBuf),
    /// No `bwrap` on `PATH`.
    Missing,
    /// A `bwrap` is there but could not create a sandbox.
    Unusable { path: PathBuf, reason: String },
}

/// `bwrap` on `PATH` and able to create a sandbox here (checked by running `true` in one).
///
/// Each call checks again; it takes a few milliseconds.
pub fn bwrap_available() -> bool {
    let Some(path) = locate(std::env::var_os("PATH").as_deref()) else { return false };
    std::process::Command::new(&path)
        .args(PROBE_ARGS)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Finds `bwrap` on `search_path` (a `PATH` value) and checks that it can create a sandbox.
pub(crate) async fn probe(search_path: Option<&OsStr>) -> Probe {
    let Some(path) = locate(search_path) else { return Probe::Missing };
    let attempt = tokio::process::Command::new(&path)
        .args(PROBE_ARGS)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let reason = match tokio::time::timeout(PROBE_TIMEOUT, attempt).await {
        Ok(Ok(output)) if output.status.success() => return Probe::Ready(path),
        Ok(Ok(output)) => {
            let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
            if stderr.is_empty() { format!("a test sandbox exited with {}", output.status) } else { stderr }
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("a test sandbox did not exit within {} s", PROBE_TIMEOUT.as_secs()),
    };
    Probe::Unusable { path, reason }
}

/// The first executable `bwrap` in an absolute entry of `search_path` (relative entries are
/// skipped: they would pick up a `bwrap` from whatever the current directory is), found once per
/// `search_path` for the whole process. `bwrap` runs outside the sandbox, so a `bwrap` that a
/// sandboxed command writes later into a directory on `PATH` (an activated virtual
/// environment's `bin`, `~/.local/bin`) must never run: the one found before the first command
/// ran is the one every later command gets.
fn locate(search_path: Option<&OsStr>) -> Option<PathBuf> {
    static FOUND: std::sync::Mutex<Vec<(OsString, Option<PathBuf>)>> = std::sync::Mutex::new(Vec::new());
    let key = search_path.map(OsStr::to_os_string).unwrap_or_default();
    let mut found = FOUND.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, path)) = found.iter().find(|(k, _)| *k == key) {
        return path.clone();
    }
    let path =
        std::env::split_paths(&key).filter(|dir| dir.is_absolute()).map(|dir| dir.join("bwrap")).find(|candidate| {
            std::fs::metadata(candidate).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        });
    found.push((key, path.clone()));
    path
}

/// The `bwrap` arguments running `argv` in `workdir` (both paths already canonical), with the
/// seccomp filter readable at descriptor `filter`.
///
/// Bind mounts are ordered from shallow to deep so a deeper one is never hidden by a shallower
/// one: a read-only path inside the working directory stays read-only, and a working directory
/// inside a read-only path stays writable.
pub(crate) fn args(
    sandbox: &Sandbox,
    workdir: &Path,
    read_only: &[PathBuf],
    filter: Option<RawFd>,
    argv: Vec<OsString>,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut push = |words: &[&OsStr]| args.extend(words.iter().map(|w| w.to_os_string()));
    let root = if sandbox.read_only_root { "--ro-bind" } else { "--bind" };
    push(&[root.as_ref(), "/".as_ref(), "/".as_ref(), "--dev".as_ref(), "/dev".as_ref()]);
    // The kernel's global knobs stay read-only even to a command running as root: `/proc/sys`
    // (`kernel.core_pattern` would run a program of the command's on the host, as root),
    // `/proc/sysrq-trigger` and `/sys`.
    push(&["--proc".as_ref(), "/proc".as_ref(), "--ro-bind".as_ref(), "/proc/sys".as_ref(), "/proc/sys".as_ref()]);
    push(&["--ro-bind-try".as_ref(), "/proc/sysrq-trigger".as_ref(), "/proc/sysrq-trigger".as_ref()]);
    push(&["--ro-bind".as_ref(), "/sys".as_ref(), "/sys".as_ref()]);
    let mut binds: Vec<(&Path, bool)> = read_only.iter().map(|p| (p.as_path(), false)).collect();
    if sandbox.read_only_root {
        push(&["--tmpfs".as_ref(), "/tmp".as_ref()]);
        binds.push((workdir, true));
    }
    binds.sort_by_key(|(path, _)| path.components().count());
    for (path, writable) in binds {
        let flag = if writable { "--bind" } else { "--ro-bind" };
        push(&[flag.as_ref(), path.as_os_str(), path.as_os_str()]);
    }
    // Run as root, bwrap would leave the command every capability (CAP_SYS_ADMIN among them:
    // enough to remount the read-only root writable, or unmount /proc and join the host's
    // network namespace through the host's). The IPC and UTS namespaces (the host name) are the
    // sandbox's own, and the command runs in a session of its own, with no controlling terminal
    // to type into.
    push(&["--cap-drop".as_ref(), "ALL".as_ref(), "--unshare-ipc".as_ref(), "--unshare-uts".as_ref()]);
    push(&["--new-session".as_ref()]);
    if !sandbox.network {
        push(&["--unshare-net".as_ref()]);
    }
    if let Some(fd) = filter {
        push(&["--seccomp".as_ref(), fd.to_string().as_ref()]);
    }
    push(&["--unshare-pid".as_ref(), "--die-with-parent".as_ref(), "--chdir".as_ref(), workdir.as_os_str()]);
    push(&["--".as_ref()]);
    args.extend(argv);
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(args: &[OsString]) -> String {
        args.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn network_off_binds_the_root_writable_and_unshares_the_network() {
        let sandbox = Sandbox { network: false, ..Sandbox::default() };
        let argv = vec!["sh".into(), "-c".into(), "x".into()];
        let args = args(&sandbox, Path::new("/w"), &[PathBuf::from("/art")], Some(7), argv);
        assert_eq!(
            words(&args),
            "--bind / / --dev /dev --proc /proc --ro-bind /proc/sys /proc/sys --ro-bind-try /proc/sysrq-trigger /proc/sysrq-trigger --ro-bind /sys /sys --ro-bind /art /art --cap-drop ALL --unshare-ipc --unshare-uts --new-session --unshare-net --seccomp 7 --unshare-pid --die-with-parent --chdir /w -- sh -c x"
        );
    }

    #[test]
    fn read_only_root_binds_workdir_and_read_only_paths_shallow_first() {
        let sandbox = Sandbox { read_only_root: true, ..Sandbox::default() };
        let read_only = [PathBuf::from("/a/w/ro"), PathBuf::from("/a")];
        let args = args(&sandbox, Path::new("/a/w"), &read_only, None, vec!["true".into()]);
        assert_eq!(
            words(&args),
            "--ro-bind / / --dev /dev --proc /proc --ro-bind /proc/sys /proc/sys --ro-bind-try /proc/sysrq-trigger /proc/sysrq-trigger --ro-bind /sys /sys --tmpfs /tmp --ro-bind /a /a --bind /a/w /a/w --ro-bind /a/w/ro /a/w/ro --cap-drop ALL --unshare-ipc --unshare-uts --new-session --unshare-pid --die-with-parent --chdir /a/w -- true"
        );
    }
}
