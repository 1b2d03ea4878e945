//! Network off under bubblewrap: no line to a host process gets in, not even a descriptor this
//! process left without close-on-exec. Each test first shows the same attempt succeeding without
//! bubblewrap, so it can fail.

use redraft_sandbox::{Command, Output, Sandbox, run};

use crate::{assert_refused, tempdir};

fn offline() -> Sandbox {
    Sandbox { network: false, ..Sandbox::default() }
}

/// Whether bubblewrap is here to isolate `test`'s command (see [`crate::isolating`]).
fn isolating(test: &str) -> bool {
    crate::isolating("network", test)
}

fn assert_output(output: &Output, expected: &str) {
    assert!(output.success(), "{output:?}");
    assert_eq!(output.stdout, expected, "{output:?}");
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
async fn a_network_off_command_inherits_no_descriptor_but_stdio() {
    // A connected socket this process holds without close-on-exec: an open line to a host process.
    let (ours, leaked) = std::os::unix::net::UnixStream::pair().unwrap();
    make_inheritable(&leaked);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&leaked);
    let work = tempdir();
    let cmd = |sandbox: Sandbox| Command::argv(["python3", "-c", LIST_FDS], work.path()).sandbox(sandbox);

    // The listing works: without bubblewrap the command inherits the socket.
    let output = run(&cmd(Sandbox::default())).await.unwrap();
    assert!(output.success() && output.stdout.contains(&format!("{fd} socket:")), "{output:?}");
    std::fs::remove_file(work.path().join("ran")).unwrap();

    let result = run(&cmd(offline())).await;
    if isolating("a_network_off_command_inherits_no_descriptor_but_stdio") {
        assert_output(&result.unwrap(), "");
    } else {
        assert_refused(result, &work.path().join("ran"));
    }
    drop((ours, leaked));
}
