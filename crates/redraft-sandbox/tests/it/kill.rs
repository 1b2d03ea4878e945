//! The whole process group dies: on timeout (SIGTERM, then SIGKILL after the grace), when the
//! command leaves processes behind, and when the run future is dropped.

use std::time::Duration;

use redraft_sandbox::{Command, run};

use crate::{alive, eventually, live_group_members, live_marked, read_pids, sleep_token, tempdir};

#[tokio::test]
async fn timeout_terminates_the_whole_group() {
    let dir = tempdir();
    let script =
        "echo $$ > pids.tmp; sleep 30 & echo $! >> pids.tmp; sleep 30 & echo $! >> pids.tmp; mv pids.tmp pids; wait";
    let cmd = Command::shell(script, dir.path()).timeout(Duration::from_millis(300));
    let output = run(&cmd).await.unwrap();
    assert!(output.timed_out && !output.success());
    // sh does not trap SIGTERM: the grace was not needed.
    assert_eq!((output.status, output.signal), (None, Some(15)));
    assert!(output.duration < Duration::from_secs(20), "{:?}", output.duration);

    let pids = read_pids(&dir.path().join("pids"));
    assert_eq!(pids.len(), 3);
    let leader = pids[0];
    assert!(eventually(|| pids.iter().all(|&pid| !alive(pid))).await, "still alive: {pids:?}");
    assert!(eventually(|| live_group_members(leader).is_empty()).await);
}

#[tokio::test]
async fn a_trapped_sigterm_gets_to_clean_up() {
    let dir = tempdir();
    let token = sleep_token();
    let script = format!("trap 'echo cleanup; exit 3' TERM; sleep {token} & wait");
    let cmd = Command::shell(script, dir.path()).timeout(Duration::from_millis(300)).kill_grace(Duration::from_secs(5));
    let output = run(&cmd).await.unwrap();
    assert!(output.timed_out);
    assert_eq!((output.status, output.stdout.as_str()), (Some(3), "cleanup\n"));
    assert!(eventually(|| live_marked(&token).is_empty()).await);
}

#[tokio::test]
async fn an_ignored_sigterm_is_followed_by_sigkill_after_the_grace() {
    let dir = tempdir();
    let token = sleep_token();
    // Both the shell and its child ignore SIGTERM (ignored signals are inherited).
    let script = format!("trap '' TERM; sleep {token} & wait");
    let timeout = Duration::from_millis(300);
    let grace = Duration::from_millis(300);
    let cmd = Command::shell(script, dir.path()).timeout(timeout).kill_grace(grace);
    let output = run(&cmd).await.unwrap();
    assert!(output.timed_out);
    assert_eq!((output.status, output.signal), (None, Some(9)));
    assert!(output.duration >= timeout + grace, "{:?}", output.duration);
    assert!(eventually(|| live_marked(&token).is_empty()).await);
}

#[tokio::test]
async fn processes_left_behind_are_terminated_when_the_command_exits() {
    let dir = tempdir();
    let token = sleep_token();
    // The sleeper holds stdout open: without the cleanup, capture would wait for it.
    let cmd = Command::shell(format!("sleep {token} & echo started"), dir.path()).timeout(Duration::from_secs(20));
    let output = run(&cmd).await.unwrap();
    assert!(output.success() && !output.timed_out, "{output:?}");
    assert_eq!(output.stdout, "started\n");
    assert!(output.duration < Duration::from_secs(10), "{:?}", output.duration);
    assert!(eventually(|| live_marked(&token).is_empty()).await);
}

#[tokio::test]
async fn dropping_the_run_future_kills_the_whole_group() {
    let dir = tempdir();
    let script =
        "echo $$ > pids.tmp; sleep 30 & echo $! >> pids.tmp; sleep 30 & echo $! >> pids.tmp; mv pids.tmp pids; wait";
    let cmd = Command::shell(script, dir.path()).timeout(Duration::from_secs(30));
    let pid_file = dir.path().join("pids");

    let mut running = Box::pin(run(&cmd));
    // Cancel with a short timeout around `run`, once the pids are written.
    loop {
        assert!(tokio::time::timeout(Duration::from_millis(50), &mut running).await.is_err(), "run finished");
        if pid_file.exists() {
            break;
        }
    }
    let pids = read_pids(&pid_file);
    assert!(pids.iter().all(|&pid| alive(pid)), "not all started: {pids:?}");
    drop(running);

    let leader = pids[0];
    assert!(eventually(|| pids.iter().all(|&pid| !alive(pid))).await, "still alive: {pids:?}");
    assert!(eventually(|| live_group_members(leader).is_empty()).await);
}
