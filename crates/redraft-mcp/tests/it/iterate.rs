use redraft::core::RunState;
use redraft_testkit::{FakeOpenAi, reply};
use serde_json::{Value, json};

use crate::{Client, config, setup, text};

const SCHEMA: &str = r#"{"type": "object", "required": ["city", "state"],
  "properties": {"city": {"type": "string"}, "state": {"enum": ["OH", "KY"]}}}"#;

fn fake_config(server: &FakeOpenAi, extra: &str) -> redraft::Config {
    config(&format!(
        "default_model = \"fake/small\"\n{extra}\n[providers.fake]\ntype = \"openai\"\nbase_url = \"{}\"\n",
        server.base_url()
    ))
}

fn schema() -> Value {
    serde_json::from_str(SCHEMA).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_converges_is_recorded_and_reports_progress() {
    let server = FakeOpenAi::start(vec![
        reply(r#"{"city": "Toledo", "state": "Ohio"}"#),
        reply("```json\n{\"city\": \"Toledo\", \"state\": \"OH\"}\n```"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = fake_config(&server, "");
    cfg.database_url = Some(dir.path().join("runs.db").display().to_string());
    let store = redraft::store::open(&cfg).await.unwrap();
    let mut s = setup(cfg);
    s.store = Some(store.clone());
    let mut client = Client::start(s).await;

    let call = json!({
        "name": "iterate",
        "arguments": {"prompt": "Where is contract C-7?", "schema": schema(), "max_iterations": 3, "timeout": "30s"},
        "_meta": {"progressToken": "p1"}
    });
    let result = client.request("tools/call", call).await;
    assert_eq!(result["isError"], false, "{}", text(&result));
    let run = &result["structuredContent"];
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["halted_because"], "success");
    assert_eq!(run["iterations"], 2);
    assert_eq!(run["artifact"], json!({"city": "Toledo", "state": "OH"}));
    assert_eq!(run["history"][0]["issues"][0]["path"], "/state");
    // The text is the same JSON, for clients that read only text.
    assert_eq!(serde_json::from_str::<Value>(&text(&result)).unwrap(), *run);
    // The model saw the feedback.
    let bodies = server.bodies().await;
    assert!(redraft_testkit::last_user_message(&bodies[1]).contains("Attempt 2 of 3"));

    let stored = store.run(run["run_id"].as_str().unwrap()).await.unwrap().unwrap();
    assert_eq!(stored.state, RunState::Succeeded);
    assert_eq!(stored.attempts.len(), 2);

    let progress: Vec<&Value> =
        client.notifications.iter().filter(|n| n["method"] == "notifications/progress").collect();
    assert_eq!(progress.len(), 2, "{:?}", client.notifications);
    assert_eq!(progress[0]["params"]["progressToken"], "p1");
    assert_eq!(progress[0]["params"]["message"], "attempt 1/3: rejected (/state enum)");
    assert_eq!(progress[1]["params"]["progress"], 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_is_a_result_with_its_escalation_not_an_error() {
    let wrong = r#"{"city": "Toledo", "state": "Ohio"}"#;
    let server = FakeOpenAi::start(vec![reply(wrong), reply("no idea")]).await;
    let mut client = Client::start(setup(fake_config(&server, ""))).await;
    let run = client
        .ok("iterate", json!({"prompt": "Where is contract C-7?", "schema": schema(), "max_iterations": 2}))
        .await;
    assert_eq!(run["status"], "failed");
    assert_eq!(run["halted_because"], "max_iterations");
    assert_eq!(run["artifact"], serde_json::from_str::<Value>(wrong).unwrap(), "the best so far");
    assert!(run["escalation"]["question"].is_string(), "{run}");
    assert_eq!(run["history"][1]["status"], "invalid_json");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_tool_errors_that_say_what_to_change() {
    let server = FakeOpenAi::start(vec![reply(r#"{"city": "Toledo", "state": "OH"}"#)]).await;
    let mut client = Client::start(setup(fake_config(&server, "[server]\nexec_allow = [\"true\"]\n"))).await;

    let err = client.error("iterate", json!({"prompt": "x", "target_type": "nope"})).await;
    assert!(err.contains("unknown kind `nope`") && err.contains("fill"), "{err}");
    let err = client.error("iterate", json!({"prompt": "x", "schema": {"type": "strin"}})).await;
    assert!(err.contains("not a valid JSON Schema"), "{err}");
    let err = client.error("iterate", json!({"prompt": "x", "max_iteration": 2})).await;
    assert!(err.contains("max_iteration") && err.contains("hint:"), "{err}");
    let err = client.error("iterate", json!({"prompt": "x", "evaluator": "exec:rm -rf /"})).await;
    assert!(err.contains("`exec:rm -rf /` is not allowed over MCP") && err.contains("exec_allow"), "{err}");
    let err = client.error("iterate", json!({"prompt": "x", "max_iterations": 50})).await;
    assert!(err.contains("max_iterations") && err.contains("20"), "{err}");
    let err = client.error("iterate", json!({"prompt": "x", "max_wall_time": "soon"})).await;
    assert!(err.contains("`max_wall_time`"), "{err}");
    assert_eq!(server.calls().await, 0, "nothing was sent to the model");

    // An allowed command runs.
    let run = client.ok("iterate", json!({"prompt": "Where?", "schema": schema(), "evaluator": "exec:true"})).await;
    assert_eq!(run["status"], "succeeded", "{run}");
}

#[tokio::test]
async fn no_model_anywhere_is_a_tool_error_naming_the_argument() {
    let mut client = Client::start(setup(config(""))).await;
    let err = client.error("iterate", json!({"prompt": "x"})).await;
    assert!(err.contains("no model is named") && err.contains("pass `model`"), "{err}");
}

/// `iterate` with `on_escalation: "await"` stops a run that would fail awaiting an answer; the
/// `answer` tool continues it with the answer (or aborts it); without a store there is nothing
/// to answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awaiting_run_is_answered_or_aborted_with_the_answer_tool() {
    let server = FakeOpenAi::start(vec![
        reply(r#"{"city": "Louisville", "state": "Kentucky"}"#),
        reply(r#"{"city": "Toledo", "state": "OH"}"#),
        reply(r#"{"city": "Dayton", "state": "Ohio"}"#),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = fake_config(&server, "");
    cfg.database_url = Some(dir.path().join("runs.db").display().to_string());
    let store = redraft::store::open(&cfg).await.unwrap();
    let mut s = setup(cfg.clone());
    s.store = Some(store.clone());
    let mut client = Client::start(s).await;
    let awaiting =
        json!({"prompt": "Where is contract C-7?", "schema": schema(), "max_iterations": 1, "on_escalation": "await"});

    let run = client.ok("iterate", awaiting.clone()).await;
    assert_eq!(
        (run["status"].as_str(), run["halted_because"].as_str()),
        (Some("awaiting_input"), Some("max_iterations"))
    );
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    assert_eq!(store.run(&run_id).await.unwrap().unwrap().state, RunState::AwaitingInput);
    for (bad, says) in [
        (json!({"run_id": run_id}), "give the `answer`"),
        (json!({"run_id": run_id, "answer": "x", "abort": true}), "`abort: true` ends the run"),
        (json!({"run_id": run_id, "answer": "x", "max_iterations": 0}), "max_iterations"),
        (json!({"run_id": "nope", "answer": "x"}), "nope"),
    ] {
        let err = client.error("answer", bad.clone()).await;
        assert!(err.contains(says), "{bad}: {err}");
    }
    assert_eq!(server.calls().await, 1);
    let done = client.ok("answer", json!({"run_id": run_id, "answer": "C-7 is in Toledo, OH"})).await;
    assert_eq!((done["status"].as_str(), done["iterations"].as_u64()), (Some("succeeded"), Some(2)), "{done}");
    assert_eq!(done["history"][1]["reply"]["answer"], "C-7 is in Toledo, OH");
    assert_eq!(store.run(&run_id).await.unwrap().unwrap().state, RunState::Succeeded);

    let second = client.ok("iterate", awaiting).await;
    let aborted = client.ok("answer", json!({"run_id": second["run_id"], "abort": true})).await;
    assert_eq!(aborted["status"], "failed");
    assert!(aborted["escalation"]["question"].is_string());

    // A server without a store: nothing can await.
    let mut bare = Client::start(setup(cfg)).await;
    let err = bare.error("answer", json!({"run_id": run_id, "answer": "x"})).await;
    assert!(err.contains("records no runs"), "{err}");
    let err = bare.error("iterate", json!({"prompt": "p", "schema": schema(), "on_escalation": "await"})).await;
    assert!(err.contains("not recorded"), "{err}");
}
