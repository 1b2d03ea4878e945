//! The sandbox: clean environment, resource limits, and bubblewrap — or, where bubblewrap is not
//! available, the refusal to run at all. The bubblewrap tests detect it at runtime and assert
//! one or the other; without it each prints a SKIP line, since the isolation itself was not
//! exercised (CI installs bubblewrap and fails on any SKIP line).

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use redraft_sandbox::{Command, PASSED_ENV, Sandbox, SandboxError, run};

use crate::{assert_refused, eventually, live_marked, sleep_token, tempdir};

fn offline() -> Sandbox {
    Sandbox { network: false, ..Sandbox::default() }
}

/// Whether bubblewrap is here to isolate `test`'s command (see [`crate::isolating`]).
fn isolating(test: &str) -> bool {
    crate::isolating("sandbox", test)
}

#[tokio::test]
async fn the_environment_is_clean_but_for_path_home_lang_and_named_variables() {
    // Two variables of this test process other than PATH, HOME and LANG (cargo sets several).
    let ours: Vec<(String, String)> = std::env::vars()
        .filter(|(name, value)| {
            !PASSED_ENV.contains(&name.as_str())
                && !value.is_empty()
                && !value.contains('\n')
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
        .take(2)
        .collect();
    assert_eq!(ours.len(), 2, "the test process needs two environment variables");
    let (allowed, blocked) = (&ours[0], &ours[1]);

    let dir = tempdir();
    let sandbox = Sandbox { env: vec![allowed.0.clone()], ..Sandbox::default() };
    let cmd = Command::shell("env", dir.path()).env("EXTRA", "1").sandbox(sandbox);
    let output = run(&cmd).await.unwrap();
    assert!(output.success(), "{output:?}");
    let vars: Vec<(&str, &str)> = output.stdout.lines().filter_map(|line| line.split_once('=')).collect();
    let names: BTreeSet<&str> = vars.iter().map(|(name, _)| *name).collect();

    assert!(vars.contains(&("PATH", std::env::var("PATH").unwrap().as_str())), "{names:?}");
    assert!(vars.contains(&(allowed.0.as_str(), allowed.1.as_str())), "{names:?}");
    assert!(vars.contains(&("EXTRA", "1")), "{names:?}");
    assert!(!names.contains(blocked.0.as_str()), "{} leaked: {names:?}", blocked.0);
    // Nothing else but what sh itself sets.
    let expected: BTreeSet<&str> =
        ["PATH", "HOME", "LANG", "EXTRA", allowed.0.as_str(), "PWD", "OLDPWD", "SHLVL", "_"].into_iter().collect();
    assert!(names.is_subset(&expected), "unexpected variables: {:?}", names.difference(&expected));
}

#[tokio::test]
async fn resource_limits_are_set_in_the_child() {
    let dir = tempdir();
    let sandbox = Sandbox { open_files: Some(64), memory_mb: Some(512), ..Sandbox::default() };
    let output = run(&Command::shell("ulimit -n; ulimit -v", dir.path()).sandbox(sandbox)).await.unwrap();
    assert_eq!(output.stdout, "64\n524288\n", "{output:?}");
}

#[tokio::test]
async fn the_file_size_limit_stops_big_writes() {
    let dir = tempdir();
    let sandbox = Sandbox { file_size_mb: Some(1), ..Sandbox::default() };
    let cmd = Command::shell("head -c 3000000 /dev/zero > big; echo $?", dir.path()).sandbox(sandbox);
    let output = run(&cmd).await.unwrap();
    assert_ne!(output.stdout.trim(), "0", "{output:?}");
    assert_eq!(std::fs::metadata(dir.path().join("big")).unwrap().len(), 1 << 20);
}

#[tokio::test]
async fn the_cpu_limit_kills_a_busy_loop() {
    let dir = tempdir();
    let sandbox = Sandbox { cpu_seconds: Some(1), ..Sandbox::default() };
    let cmd = Command::shell("while :; do :; done", dir.path()).sandbox(sandbox).timeout(Duration::from_secs(30));
    let output = run(&cmd).await.unwrap();
    assert!(!output.timed_out, "{output:?}");
    // SIGKILL (hard limit reached) or SIGXCPU (soft limit).
    assert!(matches!(output.signal, Some(9 | 24)), "{output:?}");
}

#[tokio::test]
async fn without_bwrap_on_path_isolation_is_refused_and_nothing_runs() {
    let dir = tempdir();
    let empty = tempdir();
    let marker = dir.path().join("marker");
    for sandbox in [offline(), Sandbox { read_only_root: true, ..Sandbox::default() }] {
        let wants = sandbox.needs_bwrap().unwrap();
        // `bwrap` is looked up on the command's PATH.
        let cmd =
            Command::shell("touch marker", dir.path()).env("PATH", empty.path().to_str().unwrap()).sandbox(sandbox);
        let err = run(&cmd).await.unwrap_err();
        assert!(matches!(err, SandboxError::BwrapMissing { wants: w } if w == wants), "{err:?}");
        let message = err.to_string();
        assert!(message.contains(wants) && message.contains("hint: apt-get install bubblewrap"), "{message}");
        assert!(!marker.exists(), "the command ran");
    }
}

#[tokio::test]
async fn a_bwrap_that_cannot_create_a_sandbox_is_refused_with_its_reason() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempdir();
    let fake = tempdir();
    let bwrap = fake.path().join("bwrap");
    std::fs::write(&bwrap, "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", fake.path().display());
    let cmd = Command::shell("touch marker", dir.path()).env("PATH", path).sandbox(offline());
    let err = run(&cmd).await.unwrap_err();
    match &err {
        SandboxError::BwrapUnusable { wants, path, reason } => {
            assert_eq!((*wants, path.as_path()), ("network off", bwrap.as_path()));
            assert_eq!(reason, "bwrap: No permissions to create a new namespace");
        }
        other => panic!("expected BwrapUnusable, got {other:?}"),
    }
    assert!(err.to_string().contains("hint:"), "{err}");
    assert!(!dir.path().join("marker").exists(), "the command ran");
}

#[tokio::test]
async fn network_off_cannot_reach_a_listener_on_loopback() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempdir();
    let script = format!(
        "touch marker; if bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' 2>/dev/null; then echo connected; else echo unreachable; fi"
    );
    // The check itself works: with the network on (no bubblewrap needed) it connects.
    let output = run(&Command::shell(&script, dir.path()).sandbox(Sandbox::default())).await.unwrap();
    assert_eq!(output.stdout, "connected\n", "{output:?}");
    std::fs::remove_file(dir.path().join("marker")).unwrap();

    let result = run(&Command::shell(&script, dir.path()).sandbox(offline())).await;
    if isolating("network_off_cannot_reach_a_listener_on_loopback") {
        let output = result.unwrap();
        assert_eq!(output.stdout, "unreachable\n", "{output:?}");
    } else {
        assert_refused(result, &dir.path().join("marker"));
    }
}

#[tokio::test]
async fn a_read_only_root_leaves_only_the_workdir_and_tmp_writable() {
    // Not under /tmp, which becomes a private tmpfs in the sandbox (a checkout may itself live
    // under /tmp, so the target directory is not always good enough).
    let base = Some(env!("CARGO_TARGET_TMPDIR")).filter(|d| !d.starts_with("/tmp")).unwrap_or("/var/tmp");
    let outer = tempfile::tempdir_in(base).unwrap();
    let work = outer.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let exposed = tempdir();
    std::fs::write(exposed.path().join("data"), "artifact").unwrap();
    let scratch = format!("/tmp/redraft-sandbox-scratch-{}", sleep_token());

    let script = format!(
        "echo in > inside.txt && echo inside-written
         (echo out > {outer}/outside.txt) 2>/dev/null && echo outside-written || echo outside-refused
         cat {exposed}/data; echo
         (echo x > {exposed}/new) 2>/dev/null && echo exposed-written || echo exposed-refused
         echo s > {scratch} && echo tmp-written",
        outer = outer.path().display(),
        exposed = exposed.path().display(),
    );
    let sandbox = Sandbox { read_only_root: true, ..Sandbox::default() };
    let cmd = Command::shell(script, &work).sandbox(sandbox).read_only_path(exposed.path());
    let result = run(&cmd).await;
    if isolating("a_read_only_root_leaves_only_the_workdir_and_tmp_writable") {
        let output = result.unwrap();
        assert_eq!(
            output.stdout, "inside-written\noutside-refused\nartifact\nexposed-refused\ntmp-written\n",
            "{output:?}"
        );
        assert_eq!(std::fs::read_to_string(work.join("inside.txt")).unwrap(), "in\n");
        assert!(!outer.path().join("outside.txt").exists());
        assert!(!exposed.path().join("new").exists());
        assert!(!Path::new(&scratch).exists(), "/tmp is private");
    } else {
        assert_refused(result, &work.join("inside.txt"));
    }
}

#[tokio::test]
async fn under_bwrap_a_timeout_still_terminates_everything() {
    let dir = tempdir();
    let token = sleep_token();
    let cmd = Command::shell(format!("touch marker; sleep {token} & sleep {token} & wait"), dir.path())
        .sandbox(offline())
        .timeout(Duration::from_millis(500));
    let result = run(&cmd).await;
    if isolating("under_bwrap_a_timeout_still_terminates_everything") {
        let output = result.unwrap();
        assert!(output.timed_out && dir.path().join("marker").exists(), "{output:?}");
        assert!(eventually(|| live_marked(&token).is_empty()).await, "sleepers left");
    } else {
        assert_refused(result, &dir.path().join("marker"));
    }
}

#[tokio::test]
async fn under_bwrap_even_a_process_that_left_the_group_dies_with_the_command() {
    let dir = tempdir();
    let token = sleep_token();
    let cmd = Command::shell(format!("touch marker; setsid sleep {token} >/dev/null 2>&1 & echo started"), dir.path())
        .sandbox(offline())
        .timeout(Duration::from_secs(20));
    let result = run(&cmd).await;
    if isolating("under_bwrap_even_a_process_that_left_the_group_dies_with_the_command") {
        let output = result.unwrap();
        assert!(output.success() && output.stdout == "started\n", "{output:?}");
        assert!(eventually(|| live_marked(&token).is_empty()).await, "the setsid sleeper survived");
    } else {
        assert_refused(result, &dir.path().join("marker"));
    }
}

#[tokio::test]
async fn under_bwrap_dropping_the_run_future_kills_everything() {
    let dir = tempdir();
    let token = sleep_token();
    let cmd = Command::shell(format!("sleep {token} & sleep {token} & touch marker; wait"), dir.path())
        .sandbox(offline())
        .timeout(Duration::from_secs(30));
    if !isolating("under_bwrap_dropping_the_run_future_kills_everything") {
        assert_refused(run(&cmd).await, &dir.path().join("marker"));
        return;
    }
    let mut running = Box::pin(run(&cmd));
    while !dir.path().join("marker").exists() {
        assert!(tokio::time::timeout(Duration::from_millis(50), &mut running).await.is_err(), "run finished");
    }
    assert!(eventually(|| live_marked(&token).len() >= 2).await, "sleepers not found");
    drop(running);
    assert!(eventually(|| live_marked(&token).is_empty()).await, "sleepers left");
}

#[test]
fn specs_parse_from_json_with_defaults_and_reject_unknown_fields() {
    let sandbox: Sandbox = serde_json::from_str("{}").unwrap();
    assert_eq!(sandbox, Sandbox::default());
    let sandbox: Sandbox =
        serde_json::from_str(r#"{"network": false, "cpu_seconds": 30, "env": ["CARGO_HOME"], "workdir": "sub"}"#)
            .unwrap();
    assert_eq!(
        sandbox,
        Sandbox {
            network: false,
            cpu_seconds: Some(30),
            env: vec!["CARGO_HOME".into()],
            workdir: Some("sub".into()),
            ..Sandbox::default()
        }
    );
    let err = serde_json::from_str::<Sandbox>(r#"{"netwrok": false}"#).unwrap_err();
    assert!(err.to_string().contains("netwrok"), "{err}");
}

#[tokio::test]
async fn the_sandbox_workdir_overrides_the_commands() {
    let dir = tempdir();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let sandbox = Sandbox { workdir: Some("sub".into()), ..Sandbox::default() };
    let output = run(&Command::shell("pwd -P", dir.path()).sandbox(sandbox)).await.unwrap();
    assert_eq!(output.stdout.trim(), dir.path().join("sub").canonicalize().unwrap().to_str().unwrap());
}
