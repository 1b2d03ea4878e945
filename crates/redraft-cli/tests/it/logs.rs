//! Log lines on stderr as a log collector reads them: plain text without colour codes when
//! stderr is not a terminal, or one JSON object per line.

use redraft_testkit::{FakeOpenAi, reply};
use serde_json::Value;

use crate::{output, redraft, write};

const SCHEMA: &str = r#"{"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}"#;

/// A command that logs a warning: a `REDRAFT_*` variable that names no config key.
fn warning(dir: &std::path::Path) -> assert_cmd::Command {
    let mut cmd = redraft(dir);
    // As a user's shell has it: colour is not turned off by the environment.
    cmd.env_remove("NO_COLOR").env("REDRAFT_NO_SUCH_KEY", "1").args(["config", "show"]);
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_written_to_a_pipe_carry_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let out = output(warning(dir.path())).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("WARN") && out.stderr.contains("REDRAFT_NO_SUCH_KEY"), "{}", out.stderr);
    assert!(!out.stderr.contains("\x1b["), "no ANSI escapes on a pipe: {:?}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_per_line_with_level_and_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = warning(dir.path());
    cmd.arg("--log-format").arg("json");
    let out = output(cmd).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<Value> = out
        .stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert_eq!(lines[0]["level"], "WARN");
    assert_eq!(lines[0]["message"], "ignoring an environment variable that names no config key");
    assert_eq!(lines[0]["variable"], "REDRAFT_NO_SUCH_KEY");
    assert!(!out.stderr.contains("\x1b["), "{:?}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redraft_log_format_sets_json_for_a_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "schema.json", SCHEMA);
    let model = FakeOpenAi::start(vec![reply(r#"{"town": "Toledo"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    let mut cmd = redraft(dir.path());
    cmd.env("OPENAI_BASE_URL", model.base_url())
        .env("OPENAI_API_KEY", "sk-test")
        .env("REDRAFT_LOG_FORMAT", "json")
        .args(["-v", "run", "--model", "openai/fake", "--schema", "schema.json", "--prompt", "Which city?"]);
    let out = output(cmd).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<Value> = out
        .stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect();
    assert!(lines.iter().all(|l| l["level"].is_string() && l["message"].is_string()), "{}", out.stderr);
    let finished: Vec<&Value> = lines.iter().filter(|l| l["message"] == "attempt finished").collect();
    assert_eq!(finished.len(), 2, "{}", out.stderr);
    assert_eq!((finished[0]["level"].as_str(), finished[0]["status"].as_str()), (Some("INFO"), Some("rejected")));
    assert!(lines.iter().any(|l| l["message"] == "run finished"), "{}", out.stderr);
}
