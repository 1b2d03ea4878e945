//! Processes that try to outlive their command — by `setsid`, by a double fork (with and without
//! `setsid`), by ignoring `SIGTERM`, by respawning — die with it: at the timeout, when the run
//! future is dropped, and after the command exits. Each test first checks that every escapee
//! really started, then that no process carrying the test's mark is left.

use std::path::Path;
use std::time::Duration;

use redraft_sandbox::{Command, run};

use crate::{MARK, alive, eventually, live_marked, sleep_token, tempdir};

/// The escapees, each appending `LABEL PID` to `pids` once it runs, then sleeping `token`.
const ESCAPEES: [&str; 5] = ["setsid", "double-fork", "double-fork-setsid", "setsid-ignores-term", "respawner"];

fn escapees(token: &str) -> String {
    format!(
        r#"setsid sh -c 'echo "setsid $$" >> pids; exec sleep {token}' >/dev/null 2>&1 &
(sh -c 'echo "double-fork $$" >> pids; exec sleep {token}' >/dev/null 2>&1 &)
(setsid sh -c 'echo "double-fork-setsid $$" >> pids; exec sleep {token}' &)
setsid sh -c 'trap "" TERM; echo "setsid-ignores-term $$" >> pids; exec sleep {token}' &
setsid sh -c 'trap "" TERM; echo "respawner $$" >> pids; while :; do sleep {token}; done' >/dev/null 2>&1 &
while [ "$(cat pids 2>/dev/null | wc -l)" -lt {n} ]; do sleep 0.01; done
touch ready
"#,
        n = ESCAPEES.len()
    )
}

/// The command, marked so that every process it starts can be found.
fn command(script: String, dir: &Path, token: &str) -> Command {
    Command::shell(script, dir).env(MARK, token).kill_grace(Duration::from_millis(300))
}

/// Every escapee started: (label, pid) for each.
fn started(dir: &Path) -> Vec<(String, u32)> {
    let text = std::fs::read_to_string(dir.join("pids")).unwrap_or_default();
    let pids: Vec<(String, u32)> = text
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(label, pid)| (label.to_owned(), pid.trim().parse().unwrap()))
        .collect();
    let mut labels: Vec<&str> = pids.iter().map(|(label, _)| label.as_str()).collect();
    labels.sort_unstable();
    let mut expected = ESCAPEES.to_vec();
    expected.sort_unstable();
    assert_eq!(labels, expected, "not every escapee started");
    pids
}

async fn assert_none_left(dir: &Path, token: &str) {
    let pids = started(dir);
    let none_left = eventually(|| live_marked(token).is_empty() && pids.iter().all(|(_, pid)| !alive(*pid))).await;
    let survivors: Vec<&(String, u32)> = pids.iter().filter(|(_, pid)| alive(*pid)).collect();
    assert!(none_left, "left running: {survivors:?}, marked: {:?}", live_marked(token));
}

#[tokio::test]
async fn escapees_die_at_the_timeout() {
    let dir = tempdir();
    let token = sleep_token();
    let script = format!("{}sleep {token}", escapees(&token));
    let cmd = command(script, dir.path(), &token).timeout(Duration::from_secs(3));
    let output = run(&cmd).await.unwrap();
    assert!(output.timed_out, "{output:?}");
    assert!(dir.path().join("ready").exists(), "the escapees were not ready before the timeout: {output:?}");
    assert_none_left(dir.path(), &token).await;
}

#[tokio::test]
async fn escapees_die_when_the_command_exits() {
    let dir = tempdir();
    let token = sleep_token();
    let script = format!("{}echo done", escapees(&token));
    let cmd = command(script, dir.path(), &token).timeout(Duration::from_secs(30));
    let output = run(&cmd).await.unwrap();
    assert!(output.success() && !output.timed_out, "{output:?}");
    assert_eq!(output.stdout, "done\n");
    assert!(output.duration < Duration::from_secs(20), "{:?}", output.duration);
    // Gone by the time `run` returns: the supervisor waits for the last of them.
    let pids = started(dir.path());
    assert!(live_marked(&token).is_empty(), "left running: {:?} of {pids:?}", live_marked(&token));
}

#[tokio::test]
async fn escapees_die_when_the_run_future_is_dropped() {
    let dir = tempdir();
    let token = sleep_token();
    let script = format!("{}sleep {token}", escapees(&token));
    let cmd = command(script, dir.path(), &token).timeout(Duration::from_secs(60));
    let ready = dir.path().join("ready");
    let mut running = Box::pin(run(&cmd));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !ready.exists() {
        assert!(tokio::time::Instant::now() < deadline, "the escapees did not start");
        assert!(tokio::time::timeout(Duration::from_millis(50), &mut running).await.is_err(), "run finished");
    }
    assert!(started(dir.path()).iter().all(|(_, pid)| alive(*pid)));
    drop(running);
    assert_none_left(dir.path(), &token).await;
}

#[tokio::test]
async fn leftovers_that_left_the_session_get_sigterm_first_and_sigkill_after_the_grace() {
    let dir = tempdir();
    let token = sleep_token();
    // One leftover cleans up on SIGTERM; the other ignores it and needs SIGKILL.
    let script = format!(
        r#"setsid sh -c 'trap "echo cleaned > cleaned; exit 0" TERM; echo "polite $$" >> pids; sleep {token} & wait' >/dev/null 2>&1 &
setsid sh -c 'trap "" TERM; echo "stubborn $$" >> pids; exec sleep {token}' >/dev/null 2>&1 &
while [ "$(cat pids 2>/dev/null | wc -l)" -lt 2 ]; do sleep 0.01; done"#
    );
    let grace = Duration::from_millis(500);
    let cmd = Command::shell(script, dir.path()).env(MARK, &token).kill_grace(grace).timeout(Duration::from_secs(30));
    let output = run(&cmd).await.unwrap();
    assert!(output.success(), "{output:?}");
    assert!(output.duration >= grace, "the stubborn leftover was killed before the grace: {:?}", output.duration);
    assert_eq!(std::fs::read_to_string(dir.path().join("cleaned")).unwrap(), "cleaned\n");
    assert!(live_marked(&token).is_empty(), "left running: {:?}", live_marked(&token));
}
