use serde_json::json;

use crate::{Client, config, setup};

fn check(iteration: u32, test: &str, output: &str) -> serde_json::Value {
    json!({
        "task_id": "task-003",
        "current_iteration": iteration,
        "max_iterations": 3,
        "test_result": {"status": test, "output": output},
        "review_result": {"status": "pending", "feedback": ""}
    })
}

const FAIL: &str = "FAIL src/auth/login.test.ts\n  Expected: token to contain userId\n  Received: undefined\n";

#[tokio::test]
async fn decide_retries_then_escalates_with_the_sessions_earlier_checks() {
    let mut client = Client::start(setup(config(""))).await;
    let retry = client.ok("decide", check(2, "fail", FAIL)).await;
    assert_eq!(retry["decision"]["action"], "retry");
    assert_eq!(retry["decision"]["iteration"], 3);
    assert_eq!(retry["decision"]["feedback"]["priority"], "high");

    // `{"iteration_check": {…}}` is read too.
    let escalate = client.ok("decide", json!({"iteration_check": check(3, "fail", FAIL)})).await;
    let decision = &escalate["decision"];
    assert_eq!(decision["action"], "escalate");
    let summary = decision["context"]["attempts_summary"].as_array().unwrap();
    assert_eq!(summary.len(), 2, "iteration 2 is remembered: {decision}");
    assert!(decision["question"].as_str().unwrap().contains("3 attempts"), "{decision}");

    let proceed = client
        .ok(
            "decide",
            json!({"task_id": "t", "current_iteration": 1, "max_iterations": 3,
                   "test_result": {"status": "pass"}, "review_result": {"status": "approve"}}),
        )
        .await;
    assert_eq!(proceed["decision"]["action"], "proceed");

    let err = client.error("decide", json!({"task_id": "t", "current_iteration": 1})).await;
    assert!(err.contains("max_iterations"), "{err}");
    let err = client
        .error(
            "decide",
            json!({"task_id": "t", "current_iteration": 1, "max_iterations": 3,
        "test_result": {"status": "flaky"}}),
        )
        .await;
    assert!(err.contains("flaky"), "{err}");
}

#[tokio::test]
async fn decide_follows_the_config() {
    let mut client = Client::start(setup(config("[decide]\nauto_retry_on_test_fail = false\n"))).await;
    let decision = client.ok("decide", check(1, "fail", FAIL)).await;
    assert_eq!(decision["decision"]["action"], "escalate");
}
