//! A process that keeps changing its pid (fork, then the parent exits, over and over) after the
//! agent killed its supervisor, rewriting the protected test each time: it is dead before the
//! verifier starts, which judges the code against the original test.

use std::time::Duration;

use redraft_testkit::processes::{live_marked, token};

use super::protect::{CHECK, Repo, protected_project};
use crate::write;

/// Forks and exits every round, writing the cheat over the protected test each time; `argv[1]`
/// is the token in its command line.
const HOPPER: &str = r#"
import os, sys, time
cheat = open(os.path.join(os.environ["PROMPTS"], "cheat.sh")).read()
while True:
    if os.fork():
        os._exit(0)
    try:
        with open("tests/check.sh", "w") as f:
            f.write(cheat)
    except OSError:
        pass
    time.sleep(0.0002)
"#;

/// On its first turn, starts the hopper in a session of its own, waits until the test is the
/// cheat, then kills its own supervisor; on its second, fixes `calc.sh`.
const AGENT: &str = r#"#!/bin/sh
cat > /dev/null
if [ "$REDRAFT_ITERATION" = 1 ]; then
  setsid python3 "$PROMPTS/hopper.py" "$TOKEN" >/dev/null 2>&1 </dev/null &
  until cmp -s tests/check.sh "$PROMPTS/cheat.sh"; do sleep 0.01; done
  kill -9 $PPID
else
  echo 'echo $(( $1 + $2 ))' > calc.sh
fi
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_keeps_changing_its_pid_is_dead_before_the_verifier() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    protected_project("a_process_that_keeps_changing_its_pid_is_dead_before_the_verifier", dir.path(), Repo::Plain)
        .unwrap();
    let token = token();
    write(prompts.path(), "cheat.sh", "#!/bin/sh\necho all tests pass\n");
    write(prompts.path(), "hopper.py", HOPPER);
    let agent = write(prompts.path(), "agent.sh", AGENT);
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("redraft"))
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join(".config"))
        .env("NO_COLOR", "1")
        .env("PROMPTS", prompts.path())
        .env("TOKEN", &token)
        .args(["until", "--verify", "sh tests/check.sh", "--task", "t", "--protect", "tests/**", "--no-store"])
        .args(["--", "sh"])
        .arg(&agent)
        .stdin(std::process::Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), tokio::task::spawn_blocking(move || out))
        .await
        .expect("redraft did not exit")
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("passes after 2 iteration(s)"), "{stderr}");
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.contains("tests/check.sh: expected 5, got 0"), "the real test judged the code: {first}");
    assert_eq!(std::fs::read(dir.path().join("tests/check.sh")).unwrap(), CHECK.as_bytes());
    assert!(live_marked(&token).is_empty(), "the hopper outlived the loop");
}
