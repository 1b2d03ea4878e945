//! The compatibility suite: Instructor, PydanticAI and LangChain — the official packages, their
//! code unchanged but for the base URL — through the real server on 127.0.0.1:0, against a
//! backend that answers every conversation wrongly first. Each mode must end with the right
//! answer; where the proxy checks the request, the retry is redraft's.

use std::path::Path;
use std::process::Command;

use redraft_server::Server;
use redraft_testkit::FirstWrong;

use crate::python::python;
use crate::{config, write_kind};

/// Run `script` against a fresh server over a fresh [`FirstWrong`] backend; its stdout, and the
/// requests the backend got.
async fn run(script: &str) -> (String, Vec<serde_json::Value>) {
    run_with(script, |_| {}).await
}

/// [`run`], with the server's config changed by `tweak`.
async fn run_with(script: &str, tweak: impl FnOnce(&mut redraft::config::Config)) -> (String, Vec<serde_json::Value>) {
    let python = python();
    let backend = FirstWrong::start().await;
    let dir = tempfile::tempdir().unwrap();
    write_kind(dir.path());
    let mut config = config(&backend.base_url(), dir.path());
    tweak(&mut config);
    let server = Server::bind(config, Some("127.0.0.1:0"), vec!["test-token".into()]).await.unwrap();
    let addr = server.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let serving = tokio::spawn(server.run(stop.clone().cancelled_owned()));
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let (script, base_url) = (scripts.join(script), format!("http://{addr}/v1"));
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(base_url)
            .arg("test-token")
            .current_dir(scripts)
            .env("NO_PROXY", "*")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the client failed:\n{stdout}\n{stderr}");
    stop.cancel();
    serving.await.unwrap().unwrap();
    (stdout, backend.bodies())
}

fn assert_lines(stdout: &str, expected: &[&str]) {
    for line in expected {
        assert!(stdout.lines().any(|l| l == *line), "missing `{line}` in:\n{stdout}");
    }
}

/// How many of `sent` were a first ask (no assistant message yet) and how many a retry.
fn asks_and_retries(sent: &[serde_json::Value]) -> (usize, usize) {
    let first = sent
        .iter()
        .filter(|b| !b["messages"].as_array().unwrap().iter().any(|m| m["role"] == "assistant" || m["role"] == "tool"))
        .count();
    (first, sent.len() - first)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instructor_in_every_openai_mode() {
    let (stdout, sent) = run("compat_instructor.py").await;
    // Where the request asks for a checked answer (a forced function, `response_format`), the
    // retry is redraft's and Instructor gets a valid answer at once; Markdown JSON and
    // parallel tools pass through and Instructor retries itself.
    assert_lines(
        &stdout,
        &[
            "TOOLS: ok redraft attempts=2",
            "TOOLS_STRICT: ok redraft attempts=2",
            "JSON: ok redraft attempts=2",
            "JSON_SCHEMA: ok redraft attempts=2",
            "MD_JSON: ok client",
            "JSON_O1: ok redraft attempts=2",
            "FUNCTIONS: ok redraft attempts=2",
            "PARALLEL_TOOLS: ok client",
            "RESPONSES_TOOLS: ok redraft attempts=2",
        ],
    );
    assert_eq!(asks_and_retries(&sent), (9, 9), "one wrong answer and one retry per mode");
    assert_eq!(sent[0]["tool_choice"]["function"]["name"], "Person", "TOOLS forces its function");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pydantic_ai_default_native_prompted_a_function_tool_and_the_openai_shorthand() {
    let (stdout, sent) = run("compat_pydantic_ai.py").await;
    // Every output mode checked by redraft: PydanticAI made one request each.
    assert_lines(
        &stdout,
        &[
            "default (tool output): ok requests=1",
            "NativeOutput: ok requests=1",
            "PromptedOutput: ok requests=1",
            "function tool: ok tool called and answered",
            "openai: shorthand (Responses API): ok requests=1",
        ],
    );
    assert_eq!(sent.len(), 10, "two calls per mode:\n{stdout}");
    // The default output is a forced call of `final_result`, checked: retried with feedback.
    assert_eq!(sent[1]["tool_choice"]["function"]["name"], "final_result");
    assert!(sent[1]["messages"].to_string().contains("Attempt 2 of 3"), "{}", sent[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn langchain_structured_output_bind_tools_and_stream() {
    let (stdout, sent) = run("compat_langchain.py").await;
    assert_lines(
        &stdout,
        &[
            "with_structured_output json_schema: ok checked",
            "with_structured_output function_calling: ok checked",
            "with_structured_output json_mode: ok checked",
            "bind_tools forced: ok arguments valid",
            "bind_tools chosen: ok round trip",
            "stream: ok 53 characters",
        ],
    );
    // json_schema, function_calling, json_mode and the forced tool: retried by redraft (ask,
    // then "Attempt 2 of 3"); the chosen tool: asked, then its result; the stream: one ask.
    let retried = sent.iter().filter(|b| b["messages"].to_string().contains("Attempt 2 of 3")).count();
    assert_eq!((sent.len(), retried), (11, 4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_clients_responses_api() {
    let (stdout, sent) = run("compat_openai_responses.py").await;
    assert_lines(
        &stdout,
        &[
            "create json_schema: ok redraft attempts=2",
            "parse: ok redraft attempts=2",
            "stream: ok 9 events",
            "forced function: ok redraft attempts=2",
            "text: ok passed through",
            "refused: ok previous_response_id",
        ],
    );
    // Four checked requests of two attempts, one passed through; the refused one sent nothing.
    assert_eq!(sent.len(), 9, "{stdout}");
    // `instructions` became the system message; the forced function reached the backend as a
    // chat completions tool.
    assert_eq!(sent[0]["messages"][0], serde_json::json!({"role": "system", "content": "You extract people."}));
    assert_eq!(sent[6]["tool_choice"]["function"]["name"], "Person", "{}", sent[6]);
}

/// More concurrent requests than run slots: the rest wait in the queue and none is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_async_requests_wait_for_four_slots() {
    let (stdout, sent) = run_with("compat_openai_async.py", |c| c.server.max_concurrent_runs = 4).await;
    assert_lines(&stdout, &["async x50: ok 50 valid, 2 attempts each"]);
    assert_eq!(sent.len(), 100, "a wrong answer and a retry each, nothing more");
}
