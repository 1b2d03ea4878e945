//! Network off under bubblewrap: besides TCP and UDP, no Unix socket of the host can be reached
//! through the file system — not in a temporary directory, not in the command's own working
//! directory, not under a path bound read-only — no line to a host process gets in as a
//! descriptor, and no capability lets the command out of its namespace, while it keeps
//! `socketpair` and its own loopback. Each test first shows
//! the same attempt succeeding where the restriction does not apply (no sandbox, or a read-only
//! root with the network on), so it can fail.

use std::io::{ErrorKind, Write};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};

use redraft_sandbox::{Command, Output, Sandbox, run};

use crate::{assert_refused, tempdir};

fn offline() -> Sandbox {
    Sandbox { network: false, ..Sandbox::default() }
}

/// Whether bubblewrap is here to isolate `test`'s command (see [`crate::isolating`]).
fn isolating(test: &str) -> bool {
    crate::isolating("network", test)
}

/// Touches `ran`, then for each `LABEL KIND PATH` triple of arguments makes one attempt to reach
/// the host through a Unix socket at PATH and prints `LABEL reached` or `LABEL refused ERRNO`.
const CLIENT: &str = r#"
import errno, socket, sys
open("ran", "w").close()

def stream(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)

def dgram(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(b"x", path)

def pair_dgram(path):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        a.sendto(b"x", path)

def pair_stream(path):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        a.connect(path)

KINDS = {"stream": stream, "dgram": dgram, "pair-dgram": pair_dgram, "pair-stream": pair_stream}
args = sys.argv[1:]
for label, kind, path in zip(args[0::3], args[1::3], args[2::3]):
    try:
        KINDS[kind](path)
        print(label, "reached")
    except OSError as e:
        print(label, "refused", errno.errorcode.get(e.errno, e.errno))
"#;

/// `python3 -c CLIENT` with `attempts` (label, kind, path), in `workdir`.
fn client(workdir: &Path, attempts: &[(&str, &str, &Path)]) -> Command {
    let mut argv: Vec<String> = vec!["python3".into(), "-c".into(), CLIENT.into()];
    for (label, kind, path) in attempts {
        argv.extend([label.to_string(), kind.to_string(), path.to_str().unwrap().to_owned()]);
    }
    Command::argv(argv, workdir)
}

/// The lines `LABEL VERDICT` expected for `labels`.
fn verdicts(labels: &[&str], verdict: &str) -> String {
    labels.iter().map(|label| format!("{label} {verdict}\n")).collect()
}

/// A host process's stream socket at `path`, listening; accepting never blocks.
fn listen(path: PathBuf) -> UnixListener {
    let listener = UnixListener::bind(path).unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

/// A host process's datagram socket at `path`; receiving never blocks.
fn inbox(path: PathBuf) -> UnixDatagram {
    let socket = UnixDatagram::bind(path).unwrap();
    socket.set_nonblocking(true).unwrap();
    socket
}

/// Connections waiting on `listener`, accepted now. A Unix `connect` is queued before it
/// returns, so once the command has ended every connection it made is here.
fn accepted(listener: &UnixListener) -> usize {
    let mut n = 0;
    loop {
        match listener.accept() {
            Ok(_) => n += 1,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return n,
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Datagrams waiting on `socket`, received now (a Unix `sendto` is queued before it returns).
fn received(socket: &UnixDatagram) -> usize {
    let mut n = 0;
    let mut buf = [0; 16];
    loop {
        match socket.recv(&mut buf) {
            Ok(_) => n += 1,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return n,
            Err(e) => panic!("recv: {e}"),
        }
    }
}

fn assert_output(output: &Output, expected: &str) {
    assert!(output.success(), "{output:?}");
    assert_eq!(output.stdout, expected, "{output:?}");
}

#[tokio::test]
async fn network_off_reaches_no_host_unix_socket_outside_or_inside_the_workdir() {
    let outside = tempdir();
    let work = tempdir();
    let outside_listener = listen(outside.path().join("host.sock"));
    let workdir_listener = listen(work.path().join("host.sock"));
    let host_inbox = inbox(outside.path().join("host.dgram"));
    let (stream_out, stream_in, dgram) =
        (outside.path().join("host.sock"), Path::new("host.sock"), outside.path().join("host.dgram"));
    let attempts = [
        ("outside", "stream", stream_out.as_path()),
        ("workdir", "stream", stream_in),
        ("datagram", "dgram", dgram.as_path()),
        ("socketpair-datagram", "pair-dgram", dgram.as_path()),
    ];
    let labels: Vec<&str> = attempts.iter().map(|(label, ..)| *label).collect();

    // The attempts work: without bubblewrap each reaches its host socket.
    let output = run(&client(work.path(), &attempts).sandbox(Sandbox::default())).await.unwrap();
    assert_output(&output, &verdicts(&labels, "reached"));
    assert_eq!((accepted(&outside_listener), accepted(&workdir_listener), received(&host_inbox)), (1, 1, 2));
    std::fs::remove_file(work.path().join("ran")).unwrap();

    let result = run(&client(work.path(), &attempts).sandbox(offline())).await;
    if isolating("network_off_reaches_no_host_unix_socket_outside_or_inside_the_workdir") {
        assert_output(&result.unwrap(), &verdicts(&labels, "refused EPERM"));
        assert_eq!((accepted(&outside_listener), accepted(&workdir_listener), received(&host_inbox)), (0, 0, 0));
    } else {
        assert_refused(result, &work.path().join("ran"));
    }
}

#[tokio::test]
async fn network_off_reaches_no_host_unix_socket_under_a_read_only_root_either() {
    // The working directory not under /tmp, which becomes a private tmpfs with a read-only root.
    let base = Some(env!("CARGO_TARGET_TMPDIR")).filter(|d| !d.starts_with("/tmp")).unwrap_or("/var/tmp");
    let work = tempfile::tempdir_in(base).unwrap();
    let exposed = tempdir();
    let workdir_listener = listen(work.path().join("host.sock"));
    let exposed_listener = listen(exposed.path().join("host.sock"));
    let exposed_socket = exposed.path().join("host.sock");
    let attempts = [("workdir", "stream", Path::new("host.sock")), ("read-only", "stream", exposed_socket.as_path())];
    let labels = ["workdir", "read-only"];
    let cmd = |sandbox: Sandbox| client(work.path(), &attempts).sandbox(sandbox).read_only_path(exposed.path());
    let read_only_root = Sandbox { read_only_root: true, ..Sandbox::default() };
    let test = "network_off_reaches_no_host_unix_socket_under_a_read_only_root_either";

    // The network on, the filter does not apply: both sockets are reached from inside bubblewrap.
    let result = run(&cmd(read_only_root.clone())).await;
    if !isolating(test) {
        assert_refused(result, &work.path().join("ran"));
        assert_refused(run(&cmd(Sandbox { network: false, ..read_only_root })).await, &work.path().join("ran"));
        return;
    }
    assert_output(&result.unwrap(), &verdicts(&labels, "reached"));
    assert_eq!((accepted(&workdir_listener), accepted(&exposed_listener)), (1, 1));

    let output = run(&cmd(Sandbox { network: false, ..read_only_root })).await.unwrap();
    assert_output(&output, &verdicts(&labels, "refused EPERM"));
    assert_eq!((accepted(&workdir_listener), accepted(&exposed_listener)), (0, 0));
}

/// Touches `ran`, then tries what a command with the network off still does, or must not do,
/// and prints `LABEL reached` or `LABEL refused ERRNO` for each. The first argument is the port
/// of a TCP listener on the host's loopback.
const NEIGHBOURS: &str = r#"
import ctypes, errno, os, socket, sys
open("ran", "w").close()

def fail(code):
    raise OSError(code, os.strerror(code))

def pair(kind):
    a, b = socket.socketpair(socket.AF_UNIX, kind)
    with a, b:
        a.sendall(b"ping")
        if b.recv(4) != b"ping":
            fail(errno.EIO)

def own_loopback():
    with socket.create_server(("127.0.0.1", 0)) as server:
        with socket.create_connection(server.getsockname(), timeout=5) as client:
            conn, _ = server.accept()
            with conn:
                client.sendall(b"ping")
                if conn.recv(4) != b"ping":
                    fail(errno.EIO)

def make(family, kind, protocol=0):
    socket.socket(family, kind, protocol).close()

def host_tcp():
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()

def io_uring():
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(425, 1, params)
    if fd < 0:
        fail(ctypes.get_errno())
    os.close(fd)

ATTEMPTS = [
    ("socketpair-stream", lambda: pair(socket.SOCK_STREAM)),
    ("socketpair-seqpacket", lambda: pair(socket.SOCK_SEQPACKET)),
    ("own-loopback", own_loopback),
    ("inet6", lambda: make(socket.AF_INET6, socket.SOCK_STREAM)),
    ("netlink", lambda: make(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)),
    ("host-tcp", host_tcp),
    ("unix", lambda: make(socket.AF_UNIX, socket.SOCK_STREAM)),
    ("vsock", lambda: make(socket.AF_VSOCK, socket.SOCK_STREAM)),
    ("io-uring", io_uring),
]
for label, attempt in ATTEMPTS:
    try:
        attempt()
        print(label, "reached")
    except OSError as e:
        print(label, "refused", errno.errorcode.get(e.errno, e.errno))
"#;

#[tokio::test]
async fn network_off_keeps_socketpairs_and_its_own_loopback_but_not_the_hosts() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let work = tempdir();
    let cmd = |sandbox: Sandbox| Command::argv(["python3", "-c", NEIGHBOURS, &port], work.path()).sandbox(sandbox);
    let verdict = |output: &Output, label: &str| -> String {
        let line = output.stdout.lines().find(|line| line.split(' ').next() == Some(label));
        line.unwrap_or_else(|| panic!("no line for {label}: {output:?}"))[label.len() + 1..].to_owned()
    };

    // Without bubblewrap everything is reached, the host's TCP listener and Unix sockets included
    // (vsock and io_uring as far as this kernel has them).
    let output = run(&cmd(Sandbox::default())).await.unwrap();
    assert!(output.success(), "{output:?}");
    for label in ["socketpair-stream", "socketpair-seqpacket", "own-loopback", "netlink", "host-tcp", "unix"] {
        assert_eq!(verdict(&output, label), "reached", "{label}: {output:?}");
    }
    std::fs::remove_file(work.path().join("ran")).unwrap();

    let result = run(&cmd(offline())).await;
    if !isolating("network_off_keeps_socketpairs_and_its_own_loopback_but_not_the_hosts") {
        assert_refused(result, &work.path().join("ran"));
        return;
    }
    let output = result.unwrap();
    assert!(output.success(), "{output:?}");
    for label in ["socketpair-stream", "socketpair-seqpacket", "own-loopback", "inet6", "netlink"] {
        assert_eq!(verdict(&output, label), "reached", "{label}: {output:?}");
    }
    assert_eq!(verdict(&output, "host-tcp"), "refused ECONNREFUSED", "{output:?}");
    for label in ["unix", "vsock", "io-uring"] {
        assert_eq!(verdict(&output, label), "refused EPERM", "{label}: {output:?}");
    }
}

/// On x86_64, a system call of the x32 ABI (numbered from 0x40000000, under the same
/// architecture) would be read by the kernel as an x32 `socket`: the filter kills the process.
#[cfg(target_arch = "x86_64")]
#[tokio::test]
async fn network_off_kills_a_process_making_an_x32_system_call() {
    const X32_SOCKET: &str = r#"
import ctypes, errno
open("ran", "w").close()
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(0x40000000 + 41, 1, 1, 0)
print("returned", fd, errno.errorcode.get(ctypes.get_errno()) if fd < 0 else "")
"#;
    let work = tempdir();
    let cmd = |sandbox: Sandbox| Command::argv(["python3", "-c", X32_SOCKET], work.path()).sandbox(sandbox);

    // Without bubblewrap the call returns (ENOSYS where the kernel has no x32 support).
    let output = run(&cmd(Sandbox::default())).await.unwrap();
    assert!(output.success() && output.stdout.starts_with("returned "), "{output:?}");
    std::fs::remove_file(work.path().join("ran")).unwrap();

    let result = run(&cmd(offline())).await;
    if isolating("network_off_kills_a_process_making_an_x32_system_call") {
        let output = result.unwrap();
        // Killed by SIGSYS, which bubblewrap reports as exit code 128 + 31.
        assert_eq!((output.status, output.stdout.as_str()), (Some(128 + libc::SIGSYS), ""), "{output:?}");
    } else {
        assert_refused(result, &work.path().join("ran"));
    }
}

/// Lists the descriptors above stderr the program holds, one `FD TARGET` a line.
const LIST_FDS: &str = r#"
import os
open("ran", "w").close()
for fd in sorted(int(fd) for fd in os.listdir("/proc/self/fd")):
    if fd > 2:
        try:
            print(fd, os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass  # the descriptor the listing read /proc/self/fd through, closed since
"#;

/// Clears `fd`'s close-on-exec flag, as a library opening it without `O_CLOEXEC` would have left it.
#[allow(unsafe_code)]
fn make_inheritable(fd: &impl std::os::fd::AsRawFd) {
    // SAFETY: F_SETFD with an integer flag on a descriptor the caller owns.
    assert_eq!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, 0) }, 0);
}

#[tokio::test]
async fn a_command_inherits_no_descriptor_but_stdio() {
    // A connected socket this process holds without close-on-exec: an open line to a host process.
    let (ours, leaked) = std::os::unix::net::UnixStream::pair().unwrap();
    make_inheritable(&leaked);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&leaked);
    let work = tempdir();

    // The listing works: a program spawned the usual way inherits the socket.
    let plain = std::process::Command::new("python3").args(["-c", LIST_FDS]).current_dir(work.path()).output().unwrap();
    let listed = String::from_utf8_lossy(&plain.stdout);
    assert!(plain.status.success() && listed.contains(&format!("{fd} socket:")), "{listed}");
    std::fs::remove_file(work.path().join("ran")).unwrap();

    // Through redraft, with no sandbox, the default one or network off: stdio alone.
    let without = Command::argv(["python3", "-c", LIST_FDS], work.path());
    assert_output(&run(&without).await.unwrap(), "");
    std::fs::remove_file(work.path().join("ran")).unwrap();
    let cmd = |sandbox: Sandbox| Command::argv(["python3", "-c", LIST_FDS], work.path()).sandbox(sandbox);
    assert_output(&run(&cmd(Sandbox::default())).await.unwrap(), "");
    std::fs::remove_file(work.path().join("ran")).unwrap();
    let result = run(&cmd(offline())).await;
    if isolating("a_command_inherits_no_descriptor_but_stdio") {
        assert_output(&result.unwrap(), "");
    } else {
        assert_refused(result, &work.path().join("ran"));
    }
    drop((ours, leaked));
}

/// Whether this test process runs as root (its effective uid, from `/proc/self/status`).
fn running_as_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uids = status.lines().find_map(|line| line.strip_prefix("Uid:")).unwrap();
    uids.split_whitespace().nth(1) == Some("0")
}

#[tokio::test]
async fn a_bubblewrap_sandbox_leaves_the_command_no_capability() {
    let base = Some(env!("CARGO_TARGET_TMPDIR")).filter(|d| !d.starts_with("/tmp")).unwrap_or("/var/tmp");
    let work = tempfile::tempdir_in(base).unwrap();
    // With CAP_SYS_ADMIN, unmounting the sandbox's /proc uncovers the host's, whose processes'
    // network namespaces can be joined; remounting a read-only bind writable writes the host's
    // files.
    let script = "touch ran; grep CapEff /proc/self/status; umount -l /proc 2>/dev/null && echo proc-unmounted || echo proc-kept";
    let cmd = |sandbox: Sandbox| Command::shell(script, work.path()).sandbox(sandbox);
    let read_only_root = Sandbox { read_only_root: true, ..Sandbox::default() };
    let test = "a_bubblewrap_sandbox_leaves_the_command_no_capability";

    let result = run(&cmd(read_only_root.clone())).await;
    if !isolating(test) {
        assert_refused(result, &work.path().join("ran"));
        assert_refused(run(&cmd(Sandbox { network: false, ..read_only_root })).await, &work.path().join("ran"));
        return;
    }
    // The check works: run by root, a command has capabilities (only read here, never used).
    let plain = run(&Command::shell("grep CapEff /proc/self/status", work.path())).await.unwrap();
    if running_as_root() {
        assert!(!plain.stdout.contains("CapEff:\t0000000000000000"), "{plain:?}");
    } else {
        let _ =
            writeln!(std::io::stderr(), "note network::{test}: not root, so the check itself was not shown to fail");
    }
    // A read-only root alone, and network off: none, in either.
    assert_output(&result.unwrap(), "CapEff:\t0000000000000000\nproc-kept\n");
    let output = run(&cmd(Sandbox { network: false, ..read_only_root })).await.unwrap();
    assert_output(&output, "CapEff:\t0000000000000000\nproc-kept\n");
}

/// Touches `ran`, then tries what a sandboxed command must not do to the host and prints one
/// line each: the kernel's global settings (`core_pattern` would run a program of its choosing
/// on the host, as root), `/sys`, the host name, the user's keyrings (`keyctl` is the system call
/// number given as the first argument), and typing into a terminal (`TIOCSTI`).
const KERNEL_PROBE: &str = r#"
import ctypes, errno, fcntl, os, socket, sys, termios
open("ran", "w").close()
def attempt(label, f):
    try:
        f()
        print(label, "done")
    except OSError as e:
        print(label, "refused", errno.errorcode.get(e.errno, e.errno))
def rewrite(path):
    # The same value again: were it let through, nothing would change on the host.
    text = open(path).read()
    with open(path, "w") as f:
        f.write(text)
attempt("core_pattern", lambda: rewrite("/proc/sys/kernel/core_pattern"))
attempt("sys", lambda: rewrite("/sys/kernel/rcu_expedited"))
attempt("hostname", lambda: socket.sethostname(socket.gethostname()))
libc = ctypes.CDLL(None, use_errno=True)
def keyring():
    # KEYCTL_GET_KEYRING_ID of the session keyring, made if need be.
    if libc.syscall(int(sys.argv[1]), 0, -3, 1) == -1:
        raise OSError(ctypes.get_errno(), "keyctl")
attempt("keyring", keyring)
attempt("tiocsti", lambda: fcntl.ioctl(0, termios.TIOCSTI, b"x"))
"#;

#[tokio::test]
async fn a_bubblewrap_sandbox_cannot_touch_the_hosts_kernel_settings_keyrings_or_terminal() {
    let work = tempdir();
    let keyctl = libc::SYS_keyctl.to_string();
    let cmd = |sandbox: Sandbox| {
        Command::argv(["python3", "-c", KERNEL_PROBE, keyctl.as_str()], work.path()).sandbox(sandbox).stdin("")
    };
    let read_only_root = Sandbox { read_only_root: true, ..Sandbox::default() };
    let test = "a_bubblewrap_sandbox_cannot_touch_the_hosts_kernel_settings_keyrings_or_terminal";
    let result = run(&cmd(read_only_root.clone())).await;
    if !isolating(test) {
        assert_refused(result, &work.path().join("ran"));
        return;
    }
    // Without bubblewrap the keyring is reached (the probe works; the settings are left alone
    // here, as the test may run as root).
    let plain =
        run(&Command::argv(["python3", "-c", KERNEL_PROBE, keyctl.as_str()], work.path()).stdin("")).await.unwrap();
    assert!(plain.stdout.contains("keyring done"), "{plain:?}");
    for sandbox in [read_only_root.clone(), Sandbox { network: false, ..read_only_root.clone() }, offline()] {
        let output = run(&cmd(sandbox.clone())).await.unwrap();
        // Read-only file systems, also to root (another user is refused by the files' modes).
        let settings = if running_as_root() { "refused EROFS" } else { "refused" };
        let lines = [format!("core_pattern {settings}"), format!("sys {settings}")];
        let lines = lines.iter().map(String::as_str).chain(["keyring refused EPERM", "tiocsti refused EPERM"]);
        for line in lines {
            assert!(output.stdout.contains(line), "{sandbox:?}: no `{line}` in {output:?}");
        }
        // A host name of its own: setting it fails without the capability, but never reaches the
        // host's either way.
        assert!(!output.stdout.contains("core_pattern done"), "{output:?}");
    }
}
