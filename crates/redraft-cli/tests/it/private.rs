//! redraft's own environment and memory stay its own: a command it starts (a verifier, an agent)
//! runs as the same user, and still cannot read redraft's environment through `/proc`, where the
//! API keys are whatever environment the command itself was given.

use crate::write;

/// Prints the environment of the redraft process above it, or why it cannot.
const READ_REDRAFT: &str = r#"
import os
# The topmost redraft above: its supervisor, forked from it, bears its command line too.
pid, redraft = os.getppid(), None
while pid > 1:
    if open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].endswith(b"redraft"):
        redraft = pid
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
try:
    print("ENVIRON", open(f"/proc/{redraft}/environ", "rb").read().replace(b"\0", b" ").decode())
except OSError as e:
    print("REFUSED", e.strerror)
"#;

/// Whether this test runs as root (which may read any process's memory, dumpable or not).
fn running_as_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status.lines().find_map(|line| line.strip_prefix("Uid:")).unwrap().split_whitespace().nth(1) == Some("0")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_read_redrafts_environment() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "replies.jsonl", "\"{\\\"n\\\": 1}\"\n");
    write(dir.path(), "read.py", READ_REDRAFT);
    let marker = "probe-value-not-a-registered-key-7781";
    let binary = assert_cmd::cargo::cargo_bin("redraft");
    // As root the check would prove nothing (root may read any process): then redraft and its
    // command run as `nobody`, two processes of one ordinary user.
    let mut cmd = if running_as_root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut cmd = std::process::Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&binary);
        cmd
    } else {
        std::process::Command::new(&binary)
    };
    cmd.current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join(".config"))
        .env("NO_COLOR", "1")
        .env("SOME_SERVICE_KEY", marker)
        .args(["run", "--no-store", "--json", "--prompt", "x", "--model", "mock/replies.jsonl"])
        .args(["--max-iterations", "1", "--eval", "exec:python3 read.py; exit 1"]);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // The command ran, and was refused redraft's environment.
    assert!(stdout.contains("REFUSED"), "{stdout}\n{stderr}");
    assert!(!stdout.contains(marker) && !stderr.contains(marker), "{stdout}\n{stderr}");
}
