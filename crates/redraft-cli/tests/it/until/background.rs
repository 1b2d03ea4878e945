//! No process the agent started is alive when the verifier starts. An agent leaves behind a
//! process that keeps rewriting the protected test to pass — in a session of its own ignoring
//! SIGTERM, double-forked, or under `nohup` — and exits once it has seen it work. The verifier
//! stops at its start until the test has looked at every process on the machine: none of the
//! agent's is left, and the test is the original. The verifier then judges the code against it.
//! That holds even for an agent that kills its own supervisor: in bubblewrap's PID namespace
//! (`--sandbox` with the network off) the namespace dies with it, and without one what got away
//! is re-parented to redraft, which kills it before the verifier starts. What got away is dead
//! earlier still, before the workspace is read for the iteration's report; and what a verifier
//! leaves that way does not outlive the loop.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use redraft_testkit::processes::{eventually, live_marked, token};

use super::protect::{CHECK, Repo, protected_project, skip};
use crate::write;

/// Rewrites `tests/check.sh` to pass, again and again; `$1` is the token in its command line.
const REWRITER: &str = "trap '' TERM HUP INT\necho $$ > \"$PROMPTS/rewriter.pid\"\nwhile :; do\n  cat \"$PROMPTS/cheat.sh\" > tests/check.sh\n  sleep 0.01\ndone\n";

/// On its first run, the verifier says it started and waits for the test's word.
const VERIFY: &str = "if [ ! -e \"$PROMPTS/verifier-ran\" ]; then\n  : > \"$PROMPTS/verifier-started\"\n  until [ -e \"$PROMPTS/go\" ]; do sleep 0.01; done\n  : > \"$PROMPTS/verifier-ran\"\nfi\nexec ./tests/check.sh\n";

const SETSID: &str = "setsid sh \"$PROMPTS/rewriter.sh\" \"$TOKEN\" >/dev/null 2>&1 </dev/null &";
const DOUBLE_FORK: &str = "(sh \"$PROMPTS/rewriter.sh\" \"$TOKEN\" >/dev/null 2>&1 </dev/null &)";
const NOHUP: &str = "nohup sh \"$PROMPTS/rewriter.sh\" \"$TOKEN\" >/dev/null 2>&1 </dev/null &";
/// In a session of its own, then the agent kills its parent (unsandboxed, its supervisor, so the
/// supervisor cannot end the rewriter; in bubblewrap's PID namespace it gains nothing).
const SETSID_THEN_KILL_THE_PARENT: &str = "setsid sh \"$PROMPTS/rewriter.sh\" \"$TOKEN\" >/dev/null 2>&1 </dev/null &\nuntil cmp -s tests/check.sh \"$PROMPTS/cheat.sh\"; do sleep 0.01; done\nkill -9 $PPID";

/// An agent that starts the rewriter with `start` on its first turn and returns once the test
/// passes; on its second it fixes `calc.sh`.
fn agent(start: &str) -> String {
    format!(
        "#!/bin/sh\ncat > /dev/null\nif [ \"$REDRAFT_ITERATION\" = 1 ]; then\n{start}\nuntil cmp -s tests/check.sh \"$PROMPTS/cheat.sh\"; do sleep 0.01; done\nelse\n  echo 'echo $(( $1 + $2 ))' > calc.sh\nfi\n"
    )
}

async fn no_process_of_the_agent_outlives_its_turn(test: &str, start: &str, sandbox: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    protected_project(test, dir.path(), Repo::Plain).unwrap();
    if sandbox.is_some() && !redraft_sandbox::bwrap_available() {
        skip(test, "`bwrap` is missing or cannot create a sandbox here");
        return;
    }
    let token = token();
    write(prompts.path(), "cheat.sh", "#!/bin/sh\necho all tests pass\n");
    write(prompts.path(), "rewriter.sh", REWRITER);
    write(prompts.path(), "verify.sh", VERIFY);
    let agent = write(prompts.path(), "agent.sh", &agent(start));
    let mut args: Vec<String> =
        ["until", "--verify", "sh \"$PROMPTS/verify.sh\"", "--task", "t", "--protect", "tests/**"]
            .map(String::from)
            .into();
    if let Some(sandbox) = sandbox {
        args.extend(["--sandbox".to_owned(), sandbox.to_owned()]);
    }
    args.extend(["--".to_owned(), "sh".to_owned(), agent.display().to_string()]);
    let child = spawn(dir.path(), prompts.path(), &token, &args);

    let started = eventually(Duration::from_secs(120), || prompts.path().join("verifier-started").exists()).await;
    let alive = live_marked(&token);
    let judged = std::fs::read(dir.path().join("tests/check.sh")).unwrap();
    write(prompts.path(), "go", "");
    let (code, stderr) = finished(child).await;
    assert!(started, "{test}: the verifier never started\n{stderr}");
    assert!(prompts.path().join("rewriter.pid").exists(), "{test}: the rewriter never ran\n{stderr}");
    assert!(alive.is_empty(), "{test}: processes of the agent alive when the verifier started: {alive:?}");
    assert_eq!(judged, CHECK.as_bytes(), "{test}: the verifier started with the original test");

    assert_eq!(code, Some(0), "{test}: {stderr}");
    assert!(stderr.contains("passes after 2 iteration(s)"), "{test}: {stderr}");
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(first.contains("tests/check.sh: expected 5, got 0"), "{test}: the real test judged the code: {first}");
    assert!(first.contains("[protected_file_modified]"), "{test}: {first}");
    assert_eq!(std::fs::read(dir.path().join("tests/check.sh")).unwrap(), CHECK.as_bytes());
    assert!(live_marked(&token).is_empty(), "{test}: left running");
}

/// `redraft until ARGS` in `dir`, with `$PROMPTS` and `$TOKEN` set, as a child process.
fn spawn(dir: &Path, prompts: &Path, token: &str, args: &[String]) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("redraft"))
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("NO_COLOR", "1")
        .env("PROMPTS", prompts)
        .env("TOKEN", token)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (at most 120 s) for `child` to exit; its exit code and stderr.
async fn finished(child: std::process::Child) -> (Option<i32>, String) {
    let waited = tokio::task::spawn_blocking(move || child.wait_with_output());
    let out =
        tokio::time::timeout(Duration::from_secs(120), waited).await.expect("redraft did not exit").unwrap().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

macro_rules! background_cases {
    ($($name:ident: $start:expr, $sandbox:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            no_process_of_the_agent_outlives_its_turn(stringify!($name), $start, $sandbox).await;
        }
    )*};
}

background_cases! {
    a_rewriter_in_its_own_session_ignoring_sigterm_is_dead_before_the_verifier: SETSID, None;
    a_double_forked_rewriter_is_dead_before_the_verifier: DOUBLE_FORK, None;
    a_nohup_rewriter_is_dead_before_the_verifier: NOHUP, None;
    a_sandboxed_rewriter_is_dead_before_the_verifier: SETSID, Some(r#"{"network":false,"env":["PROMPTS","TOKEN"]}"#);
    a_sandboxed_rewriter_whose_agent_kills_its_parent_is_dead_before_the_verifier: SETSID_THEN_KILL_THE_PARENT, Some(r#"{"network":false,"env":["PROMPTS","TOKEN"]}"#);
    a_rewriter_whose_agent_kills_its_supervisor_is_dead_before_the_verifier: SETSID_THEN_KILL_THE_PARENT, None;
}

/// Appends numbers quickly to `count.txt` (not protected), in a session of its own; `$1` is
/// the token in its command line.
const COUNTER: &str = "trap '' TERM HUP INT\ni=0\nwhile :; do\n  i=$((i + 1))\n  echo $i >> count.txt\n  j=0\n  while [ $j -lt 20 ]; do j=$((j + 1)); done\ndone\n";

/// The workspace is read — snapshotted for the report, protected paths put back — only once what
/// the agent left is dead: the iteration's report shows what the verifier was given. The agent
/// leaves a counter behind and kills its supervisor; the number the report shows is the number
/// the file holds when the loop is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workspace_is_read_only_once_what_the_agent_left_is_dead() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    protected_project("counter", dir.path(), Repo::Plain).unwrap();
    let token = token();
    write(prompts.path(), "counter.sh", COUNTER);
    let agent = write(
        prompts.path(),
        "agent.sh",
        "#!/bin/sh\ncat > /dev/null\necho 'echo $(( $1 + $2 ))' > calc.sh\nsetsid sh \"$PROMPTS/counter.sh\" \"$TOKEN\" >/dev/null 2>&1 </dev/null &\nuntil [ -s count.txt ]; do sleep 0.01; done\nkill -9 $PPID\n",
    );
    let args: Vec<String> = ["until", "--verify", "./tests/check.sh", "--task", "t", "--protect", "tests/**", "--"]
        .into_iter()
        .map(String::from)
        .chain(["sh".to_owned(), agent.display().to_string()])
        .collect();
    let (code, stderr) = finished(spawn(dir.path(), prompts.path(), &token, &args)).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(live_marked(&token).is_empty(), "the counter outlived the loop");
    let counted = std::fs::read_to_string(dir.path().join("count.txt")).unwrap();
    let lines = counted.lines().count();
    let hunk = if lines == 1 { "@@ -0,0 +1 @@".to_owned() } else { format!("@@ -0,0 +1,{lines} @@") };
    let first = std::fs::read_to_string(dir.path().join(".redraft/iterations/t/1.md")).unwrap();
    assert!(
        first.contains(&format!("+++ b/count.txt\n{hunk}\n")) && first.contains(&format!("\n+{lines}\n")),
        "the report shows what the file holds ({lines} lines): {first}"
    );
    assert!(stderr.contains("before the workspace was read"), "{stderr}");
}

/// A verifier that kills its supervisor leaves a sleeper re-parented to redraft: it is killed when
/// the loop ends, so nothing outlives redraft.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_the_verifier_leaves_outlives_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    let prompts = tempfile::tempdir().unwrap();
    protected_project("verifier_leaves", dir.path(), Repo::Plain).unwrap();
    let token = token();
    let verify =
        "setsid sleep \"$TOKEN\" >/dev/null 2>&1 </dev/null & echo $! > \"$PROMPTS/sleeper.pid\"; kill -9 $PPID";
    let args: Vec<String> =
        ["until", "--verify", verify, "--task", "t", "--max-iter", "1", "--", "sh", "-c", "cat > /dev/null"]
            .map(String::from)
            .into();
    let (code, stderr) = finished(spawn(dir.path(), prompts.path(), &token, &args)).await;
    assert!(prompts.path().join("sleeper.pid").exists(), "the verifier ran: {stderr}");
    let left = redraft_testkit::processes::left_after(&token, Duration::from_secs(5)).await;
    assert!(left.is_empty(), "left running after redraft exited ({code:?}): {left:?}\n{stderr}");
}
