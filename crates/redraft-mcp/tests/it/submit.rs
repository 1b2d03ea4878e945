use serde_json::{Value, json};

use crate::{Client, config, setup, text, toledo};

fn fill(workers: &[&str]) -> Value {
    json!({"contract_id": "C-7", "fills": workers.iter().map(|w| json!({"worker_id": w})).collect::<Vec<_>>()})
}

fn submission(workers: &[&str]) -> Value {
    json!({"target_type": "fill", "artifact": fill(workers), "context": toledo()})
}

#[tokio::test]
async fn submissions_are_counted_and_answered_with_numbered_problems() {
    let mut client = Client::start(setup(config(""))).await;

    let first = client.call("submit", submission(&["W-1", "W-2"])).await;
    assert_eq!(first["isError"], false);
    assert_eq!(first["structuredContent"]["status"], "rejected");
    assert_eq!(first["structuredContent"]["attempt"], 1);
    assert_eq!(first["structuredContent"]["attempts_left"], 2);
    let first = text(&first);
    assert!(first.starts_with("Attempt 1 of 3: rejected."), "{first}");
    assert!(first.contains("The artifact must match this JSON Schema"), "the schema is shown once: {first}");

    let second = client.call("submit", submission(&["W-2", "W-4"])).await;
    insta::assert_snapshot!(text(&second), @r"
    Attempt 2 of 3: rejected.

    Problems (1):
    1. /fills/1/worker_id: role 'Electrician' doesn't match contract role 'Welder' [rule:role_matches]

    1 attempt left: fix every problem above and submit the corrected artifact (attempt 3 of 3).
    ");

    let third = client.call("submit", submission(&["W-2", "W-3"])).await;
    assert_eq!(third["isError"], false);
    assert_eq!(text(&third), "Attempt 3 of 3: accepted.");
    assert_eq!(third["structuredContent"]["status"], "accepted");
    assert_eq!(third["structuredContent"]["attempt"], 3);

    // After an acceptance the next submission for the target starts a new count.
    let again = client.call("submit", submission(&["W-2", "W-3"])).await;
    assert_eq!(text(&again), "Attempt 1 of 3: accepted.");
}

#[tokio::test]
async fn counts_are_per_target_and_per_session() {
    let server = redraft_mcp::RedraftMcp::new(setup(config("")));
    let mut a = Client::connect(server.new_session()).await;
    let mut b = Client::connect(server.new_session()).await;
    let schema = json!({"type": "object", "required": ["city"]});

    a.call("submit", submission(&["W-1"])).await;
    let other_target = a.call("submit", json!({"schema": schema, "artifact": {}})).await;
    assert!(text(&other_target).starts_with("Attempt 1 of 3"), "{}", text(&other_target));
    // The same schema with its keys in another order is the same target.
    let same = a.call("submit", json!({"schema": {"required": ["city"], "type": "object"}, "artifact": {}})).await;
    assert!(text(&same).starts_with("Attempt 2 of 3"), "{}", text(&same));
    // A repeated submission is told so.
    assert!(text(&same).contains("identical to attempt 1"), "{}", text(&same));

    let other_session = b.call("submit", submission(&["W-1"])).await;
    assert!(text(&other_session).starts_with("Attempt 1 of 3"), "{}", text(&other_session));
    let same_session = a.call("submit", submission(&["W-1"])).await;
    assert!(text(&same_session).starts_with("Attempt 2 of 3"), "{}", text(&same_session));
}

#[tokio::test]
async fn after_the_cap_the_answer_is_max_retries_exceeded_with_the_history() {
    let mut client = Client::start(setup(config(""))).await;
    let mut args = submission(&["W-1", "W-2"]);
    args["max_attempts"] = json!(2);
    client.call("submit", args.clone()).await;
    args["artifact"] = json!("not JSON at all");
    let last = client.call("submit", args.clone()).await;
    assert_eq!(last["isError"], true);
    let body = &last["structuredContent"];
    assert_eq!(body["error"], "max_retries_exceeded");
    assert_eq!(body["attempts"], 2);
    let statuses: Vec<&str> =
        body["history"].as_array().unwrap().iter().map(|a| a["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["rejected", "invalid_json"]);
    assert_eq!(body["best_iteration"], 1);
    assert_eq!(body["artifact"], fill(&["W-1", "W-2"]), "the best so far");
    assert!(body["escalation"]["summary"].is_string(), "{body}");
    let said = text(&last);
    assert!(said.starts_with("Attempt 2 of 2: rejected.") && said.contains("No attempts left."), "{said}");
    assert!(said.contains("1. (root): ") && said.contains("[invalid_json]"), "{said}");
    assert!(said.contains("MaxRetriesExceeded") && said.contains("Question: "), "{said}");

    // Later submissions are not checked; the answer stays the same error.
    args["artifact"] = fill(&["W-2", "W-3"]);
    let after = client.call("submit", args).await;
    assert_eq!(after["isError"], true);
    assert!(text(&after).starts_with("No attempts left for fill"), "{}", text(&after));
    assert_eq!(after["structuredContent"]["history"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn bad_submissions_are_tool_errors_and_count_nothing() {
    let mut client = Client::start(setup(config(""))).await;
    let err = client.error("submit", json!({"artifact": {}})).await;
    assert!(err.contains("`target_type`"), "{err}");
    let err = client.error("submit", json!({"target_type": "nope", "artifact": {}})).await;
    assert!(err.contains("unknown kind `nope`"), "{err}");
    let err = client.error("submit", json!({"schema": {"type": 5}, "artifact": {}})).await;
    assert!(err.contains("not a valid JSON Schema"), "{err}");
    let mut args = submission(&["W-1"]);
    args["max_attempts"] = json!(0);
    let err = client.error("submit", args).await;
    assert!(err.contains("`max_attempts`"), "{err}");
    // None of those started a count.
    let first = client.call("submit", submission(&["W-1"])).await;
    assert!(text(&first).starts_with("Attempt 1 of 3"), "{}", text(&first));
}

#[tokio::test]
async fn the_configs_limits_on_model_calls_do_not_bind_a_submitter() {
    // A budget (which needs a model's price), a wall time and an attempt timeout are limits on
    // calls to a model; a submitter calls none, so its count goes on as without them.
    // The fresh strategy is how a model is asked again; a submitter reads the feedback message.
    let limits = "strategy = \"fresh\"\n[policy]\nmax_budget_usd = 0.5\nmax_wall_time = \"1ms\"\n\
                  attempt_timeout = \"1ms\"\nmax_iterations = 9\n";
    let mut client = Client::start(setup(config(limits))).await;
    let first = client.call("submit", submission(&["W-1", "W-2"])).await;
    assert_eq!(first["isError"], false, "{first}");
    assert!(text(&first).starts_with("Attempt 1 of 3: rejected."), "{}", text(&first));
    assert!(text(&first).contains("2 attempts left"), "{}", text(&first));
    let second = client.call("submit", submission(&["W-2", "W-3"])).await;
    assert_eq!(text(&second), "Attempt 2 of 3: accepted.");
}
