//! Nothing an agent or a verifier starts outlives the attempt — not a process that called
//! `setsid`, not a double fork, not one that ignores SIGTERM — whether the attempt times out, the
//! verifier exits, the user presses Ctrl-C or redraft itself is killed; and a verifier's flood of
//! output reaches the model only as far as `feedback_max_chars`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use redraft_testkit::processes::{MARK, eventually, left_after, token};
use redraft_testkit::{FakeOpenAi, reply};
use serde_json::Value;

use crate::{output, redraft, write};

/// Starts, in the background, a sleeper in a session of its own that ignores SIGTERM and one
/// double-forked sleeper, then waits until the first has written its pid to `$PROMPTS/escapee`.
fn escapees(token: &str) -> String {
    format!(
        r#"setsid sh -c 'trap "" TERM; echo $$ > "$PROMPTS/escapee.tmp"; mv "$PROMPTS/escapee.tmp" "$PROMPTS/escapee"; exec sleep {token}' >/dev/null 2>&1 &
(sh -c 'exec sleep {token}' >/dev/null 2>&1 &)
while [ ! -e "$PROMPTS/escapee" ]; do sleep 0.01; done
"#
    )
}

/// `redraft until ARGS` in `dir`, with `$PROMPTS` and the mark set.
fn until(dir: &Path, prompts: &Path, token: &str, args: &[&str]) -> assert_cmd::Command {
    let mut c = redraft(dir);
    c.env("PROMPTS", prompts).env(MARK, token).arg("until").args(args);
    c
}

fn project(dir: &Path) {
    write(dir, "calc.sh", "echo 0\n");
    write(dir, "test.sh", "[ \"$(sh calc.sh)\" = 5 ] || { echo 'test.sh:1: expected 5'; exit 1; }\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_setsids_a_sleeper_is_killed_with_it_at_the_attempt_timeout() {
    let (dir, prompts) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    project(dir.path());
    let token = token();
    let agent =
        write(prompts.path(), "agent.sh", &format!("cat > /dev/null\n{}exec sleep {token}\n", escapees(&token)));
    let args = ["--verify", "sh test.sh", "--task", "t", "--max-iter", "1", "--attempt-timeout", "2s", "--", "sh"];
    let mut args = args.to_vec();
    args.push(agent.to_str().unwrap());
    let out = output(until(dir.path(), prompts.path(), &token, &args)).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(prompts.path().join("escapee").exists(), "the agent's escapee never started: {}", out.stderr);
    let left = left_after(&token, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left running after the timeout: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_that_setsids_a_sleeper_leaves_nothing_behind() {
    let (dir, prompts) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    project(dir.path());
    let token = token();
    let verify = format!("{}sh test.sh", escapees(&token));
    let out = output(until(
        dir.path(),
        prompts.path(),
        &token,
        &["--verify", &verify, "--task", "t", "--max-iter", "1", "--", "sh", "-c", "cat > /dev/null"],
    ))
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(prompts.path().join("escapee").exists(), "the verifier's escapee never started: {}", out.stderr);
    let left = left_after(&token, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left running after the verifier exited: {left:?}");
}

/// Starts `redraft until` with an agent that starts escapees and hangs, and waits until they run.
async fn hanging_until(dir: &Path, prompts: &Path, token: &str) -> std::process::Child {
    project(dir);
    let agent = write(prompts, "agent.sh", &format!("cat > /dev/null\n{}exec sleep {token}\n", escapees(token)));
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("redraft"))
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("PROMPTS", prompts)
        .env(MARK, token)
        .args(["until", "--verify", "sh test.sh", "--task", "hang", "--", "sh", agent.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = eventually(Duration::from_secs(30), || prompts.join("escapee").exists()).await;
    assert!(started, "the agent's escapee never started");
    child
}

/// Waits (at most 60 s) for `child` to exit; its exit status and stderr.
async fn finished(child: std::process::Child) -> (std::process::ExitStatus, String) {
    let waited = tokio::task::spawn_blocking(move || child.wait_with_output());
    let out =
        tokio::time::timeout(Duration::from_secs(60), waited).await.expect("redraft did not exit").unwrap().unwrap();
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_leaves_no_process_of_the_agent_running() {
    let (dir, prompts) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let token = token();
    let child = hanging_until(dir.path(), prompts.path(), &token).await;
    let interrupted = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(interrupted.success());
    let (status, stderr) = finished(child).await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("halted because cancelled"), "{stderr}");
    let left = left_after(&token, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left running after Ctrl-C: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_redraft_itself_leaves_no_process_of_the_agent_running() {
    let (dir, prompts) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let token = token();
    let child = hanging_until(dir.path(), prompts.path(), &token).await;
    let killed = std::process::Command::new("kill").args(["-KILL", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let (status, _) = finished(child).await;
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9));
    let left = left_after(&token, Duration::from_secs(10)).await;
    assert!(left.is_empty(), "left running after redraft was killed: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gibibyte_from_the_verifier_reaches_the_model_as_at_most_feedback_max_chars() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeOpenAi::start(vec![reply("first answer"), reply("second answer")]).await;
    let mut c = redraft(dir.path());
    c.env("OPENAI_BASE_URL", model.base_url()).env("OPENAI_API_KEY", "sk-test").args([
        "run",
        "--text",
        "--model",
        "openai/fake",
        "--prompt",
        "Answer.",
        "--max-iterations",
        "2",
        "--eval",
        "exec:head -c 1073741824 /dev/zero | tr '\\0' x; echo; echo '3 failed, 1 passed'; exit 1",
        "--json",
    ]);
    let out = output(c).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    let issues = result["history"][0]["issues"].as_array().unwrap();
    let recorded: usize = issues.iter().map(|i| i["message"].as_str().unwrap().matches('x').count()).sum();
    println!("recorded in the result: {recorded} characters of the verifier's output");
    assert!(recorded <= 16_000, "{recorded}");

    let bodies = model.bodies().await;
    assert_eq!(bodies.len(), 2);
    let messages = bodies[1]["messages"].as_array().unwrap();
    let text: String = messages.iter().map(|m| m["content"].as_str().unwrap_or_default()).collect();
    let shown = text.matches('x').count();
    println!("the second prompt: {} characters, {shown} of them the verifier's output", text.chars().count());
    assert!(shown <= 4000, "the model was sent {shown} characters of the verifier's output");
    assert!(shown > 1000, "the output is shown, only cut: {shown}");
    assert!(text.contains("3 failed, 1 passed") && text.contains(" characters cut ...]"), "{:.300}", text);
}
