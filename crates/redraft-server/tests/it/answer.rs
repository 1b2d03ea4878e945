//! A person in the loop over HTTP: a run that would fail stops awaiting an answer, is listed as
//! such, and goes on with the answer (or is aborted).

use redraft_testkit::processes::eventually_async;
use redraft_testkit::{last_user_message, reply};
use serde_json::{Value, json};

use crate::{Harness, WAIT, harness, sse_events};

/// The `city` kind's run, allowed one attempt, that awaits a person when it would fail.
fn awaiting_spec() -> Value {
    json!({
        "kind": "city",
        "prompt": "Which city is the contract in?",
        "context": {"city": "Toledo"},
        "max_iterations": 1,
        "on_escalation": "await",
    })
}

impl Harness {
    /// Wait until the stored run is in `state`; the run as `GET /v1/runs/{id}` shows it.
    async fn in_state(&self, run_id: &str, state: &str) -> Value {
        let uri = format!("/v1/runs/{run_id}");
        let reached = eventually_async(WAIT, || async { self.call("GET", &uri, None).await.json["state"] == state });
        assert!(reached.await, "run {run_id} never reached `{state}`");
        self.call("GET", &uri, None).await.json
    }
}

#[tokio::test]
async fn an_escalated_run_awaits_an_answer_and_finishes_on_it() {
    let h = harness(vec![reply(r#"{"city": "Louisville"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    let a = h.call("POST", "/v1/iterate", Some(awaiting_spec())).await;
    assert_eq!(a.status, 202, "awaiting is neither a success nor a failure: {}", a.text);
    assert_eq!(a.json["status"], "awaiting_input");
    let run_id = a.json["run_id"].as_str().unwrap().to_owned();
    assert_eq!(a.header("location"), Some(format!("/v1/runs/{run_id}").as_str()));
    let question = a.json["escalation"]["question"].as_str().unwrap().to_owned();
    assert!(!question.is_empty(), "{}", a.text);
    assert_eq!(a.json["artifact"], json!({"city": "Louisville"}), "the best so far is kept");

    let waiting = h.call("GET", "/v1/runs?status=awaiting_input", None).await;
    assert_eq!(waiting.json["runs"][0]["run_id"], run_id.as_str(), "{}", waiting.text);
    let events = h.call("GET", &format!("/v1/runs/{run_id}/events"), None).await;
    let names: Vec<String> = sse_events(&events.text).into_iter().map(|(e, _)| e).collect();
    assert_eq!(names.last().map(String::as_str), Some("awaiting_input"), "{names:?}");

    // Bad answers change nothing.
    for (body, code) in [
        (json!({"answer": "  "}), "invalid_request"),
        (json!({"answer": "Toledo", "max_iterations": 0}), "invalid_request"),
        (json!({"answer": "Toledo", "max_iterations": 100000}), "invalid_request"),
        (json!({"text": "Toledo"}), "invalid_request"),
    ] {
        let bad = h.call("POST", &format!("/v1/runs/{run_id}/answer"), Some(body.clone())).await;
        assert_eq!((bad.status, bad.json["error"]["code"].as_str()), (400, Some(code)), "{body}: {}", bad.text);
        assert!(bad.json["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}: {}", bad.text);
    }
    assert_eq!(h.model.calls().await, 1);
    assert_eq!(h.in_state(&run_id, "awaiting_input").await["iterations"], 1);

    let answered = h
        .call("POST", &format!("/v1/runs/{run_id}/answer"), Some(json!({"answer": "The contract is in Toledo, OH"})))
        .await;
    assert_eq!(answered.status, 202, "{}", answered.text);
    assert_eq!(answered.json, json!({"run_id": run_id, "state": "queued"}));
    let done = h.in_state(&run_id, "succeeded").await;
    assert_eq!((done["status"].as_str(), done["iterations"].as_u64()), (Some("succeeded"), Some(2)), "{done}");
    assert_eq!(done["artifact"], json!({"city": "Toledo"}));
    let reply = &done["history"][1]["reply"];
    assert_eq!(reply["answer"], "The contract is in Toledo, OH");
    assert_eq!((reply["question"].as_str(), reply["after_iteration"].as_u64()), (Some(question.as_str()), Some(1)));
    assert_eq!(reply["max_iterations"], 1, "by default as many attempts as the run had");
    // The model got it as a person's reply to the question, after the feedback.
    let bodies = h.model.bodies().await;
    let told = last_user_message(&bodies[1]);
    assert!(told.contains("Louisville"), "the feedback on the last attempt: {told}");
    assert!(told.contains(&format!("Question: {question}\nAnswer: The contract is in Toledo, OH")), "{told}");
    assert_eq!(done["history"][1]["prompt"].as_str(), Some(told.as_str()), "the record says what was sent");

    // Answered once: neither a second answer nor an abort.
    for action in ["answer", "abort"] {
        let again = h.call("POST", &format!("/v1/runs/{run_id}/{action}"), Some(json!({"answer": "x"}))).await;
        assert_eq!((again.status, again.json["error"]["code"].as_str()), (409, Some("not_awaiting_input")), "{action}");
    }
    for action in ["answer", "abort"] {
        let unknown = h.call("POST", &format!("/v1/runs/nope/{action}"), Some(json!({"answer": "x"}))).await;
        assert_eq!(unknown.status, 404, "{action}: {}", unknown.text);
    }
}

#[tokio::test]
async fn an_awaiting_run_can_be_aborted_and_then_it_failed() {
    let h = harness(vec![reply(r#"{"city": "Louisville"}"#)]).await;
    let mut spec = awaiting_spec();
    spec["max_iterations"] = json!(1);
    let a = h.call("POST", "/v1/runs", Some(spec)).await;
    assert_eq!(a.status, 202, "{}", a.text);
    let run_id = a.json["run_id"].as_str().unwrap().to_owned();
    let waiting = h.in_state(&run_id, "awaiting_input").await;
    assert!(waiting["escalation"].is_object());

    let aborted = h.call("POST", &format!("/v1/runs/{run_id}/abort"), Some(json!({}))).await;
    assert_eq!(aborted.status, 200, "{}", aborted.text);
    assert_eq!(
        (aborted.json["status"].as_str(), aborted.json["halted_because"].as_str()),
        (Some("failed"), Some("max_iterations"))
    );
    assert_eq!(aborted.json["escalation"], waiting["escalation"], "the escalation is kept");
    let shown = h.in_state(&run_id, "failed").await;
    assert_eq!(shown["status"], "failed");
    assert_eq!(h.call("GET", "/v1/runs?status=awaiting_input", None).await.json["runs"], json!([]));
    let late = h.call("POST", &format!("/v1/runs/{run_id}/answer"), Some(json!({"answer": "Toledo"}))).await;
    assert_eq!((late.status, late.json["error"]["code"].as_str()), (409, Some("not_awaiting_input")));
    assert_eq!(h.model.calls().await, 1, "nothing more was asked");
}

#[tokio::test]
async fn cancelling_an_awaiting_run_aborts_it() {
    let h = harness(vec![reply(r#"{"city": "Louisville"}"#)]).await;
    let a = h.call("POST", "/v1/iterate", Some(awaiting_spec())).await;
    let run_id = a.json["run_id"].as_str().unwrap().to_owned();
    let cancelled = h.call("DELETE", &format!("/v1/runs/{run_id}"), None).await;
    assert!(cancelled.status < 300, "{}: {}", cancelled.status, cancelled.text);
    assert_eq!(h.in_state(&run_id, "failed").await["status"], "failed");
}

#[tokio::test]
async fn without_await_a_run_that_would_fail_fails() {
    let h = harness(vec![reply(r#"{"city": "Louisville"}"#)]).await;
    let mut spec = awaiting_spec();
    spec["on_escalation"] = json!("fail");
    let a = h.call("POST", "/v1/iterate", Some(spec)).await;
    assert_eq!((a.status, a.json["status"].as_str()), (422, Some("failed")), "{}", a.text);
    let bad = h.call("POST", "/v1/iterate", Some(json!({"prompt": "x", "on_escalation": "later"}))).await;
    assert_eq!(bad.status, 400, "{}", bad.text);
    assert!(bad.text.contains("on_escalation"), "{}", bad.text);
}
