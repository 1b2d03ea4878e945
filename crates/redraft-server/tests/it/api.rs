//! Every endpoint's shapes and status codes.

use redraft_testkit::reply;
use serde_json::{Value, json};

use crate::{CITY_SCHEMA, assert_result_snapshot, harness};

fn schema() -> Value {
    serde_json::from_str(CITY_SCHEMA).unwrap()
}

#[tokio::test]
async fn iterate_answers_200_with_the_result_of_a_run_that_succeeds() {
    let h = harness(vec![reply(r#"{"town": "Toledo"}"#), reply("```json\n{\"city\": \"Toledo\"}\n```")]).await;
    let a = h.call("POST", "/v1/iterate", Some(json!({"prompt": "Which city?", "schema": schema()}))).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_result_snapshot!(a.json, @r#"
    {
      "run_id": "[run_id]",
      "status": "succeeded",
      "halted_because": "success",
      "artifact": {
        "city": "Toledo"
      },
      "validation": {
        "score": 1.0,
        "passed": true,
        "issues": []
      },
      "iterations": 2,
      "best_iteration": 2,
      "best_score": 1.0,
      "best_ref": "[best_ref]",
      "artifact_sha256": "da16b4d5d397ecaa805277d4ae017a4b876db9ddeb9b94d0082f2f157e7df52b",
      "metrics": {
        "wall_ms": "[ms]",
        "tokens_in": 200,
        "tokens_out": 40,
        "tokens_estimated": false,
        "cost_usd": null
      },
      "history": [
        {
          "iteration": 1,
          "status": "rejected",
          "raw": "{\"town\": \"Toledo\"}",
          "artifact": {
            "town": "Toledo"
          },
          "extraction": "bare",
          "score": 0.0,
          "issues": [
            {
              "path": "",
              "code": "additionalProperties",
              "message": "Additional properties are not allowed ('town' was unexpected)",
              "evaluator": "schema"
            },
            {
              "path": "",
              "code": "required",
              "message": "\"city\" is a required property",
              "evaluator": "schema"
            }
          ],
          "tokens_in": 100,
          "tokens_out": 20,
          "cost_usd": null,
          "wall_ms": "[ms]",
          "started_at": "[time]",
          "finished_at": "[time]",
          "finish_reason": "stop",
          "model": "fake/m",
          "prompt": "[prompt]"
        },
        {
          "iteration": 2,
          "status": "accepted",
          "raw": "```json\n{\"city\": \"Toledo\"}\n```",
          "artifact": {
            "city": "Toledo"
          },
          "extraction": "fenced",
          "score": 1.0,
          "issues": [],
          "tokens_in": 100,
          "tokens_out": 20,
          "cost_usd": null,
          "wall_ms": "[ms]",
          "started_at": "[time]",
          "finished_at": "[time]",
          "finish_reason": "stop",
          "model": "fake/m",
          "prompt": "[prompt]"
        }
      ],
      "escalation": null
    }
    "#);
    // Recorded as it happened.
    let run_id = a.json["run_id"].as_str().unwrap();
    let mut stored = h.call("GET", &format!("/v1/runs/{run_id}"), None).await.json;
    // With what was asked, and its state.
    let fields = stored.as_object_mut().unwrap();
    assert_eq!(fields.remove("state"), Some(json!("succeeded")));
    assert_eq!(fields.remove("spec").unwrap()["prompt"], "Which city?");
    assert_eq!(stored, a.json);
}

#[tokio::test]
async fn iterate_answers_422_with_the_result_and_an_error_when_the_run_fails() {
    let h = harness(vec![reply(r#"{"city": "Louisville"}"#), reply(r#"{"city": "Dayton"}"#)]).await;
    let body = json!({
        "kind": "city", "prompt": "Which city?", "context": {"city": "Toledo"}, "max_iterations": 2,
    });
    let a = h.call("POST", "/v1/iterate", Some(body)).await;
    assert_eq!(a.status, 422, "{}", a.text);
    assert_eq!(a.json["status"], "failed");
    assert_eq!(a.json["error"]["code"], "max_iterations");
    assert_eq!(a.json["artifact"], json!({"city": "Dayton"}), "the best so far (ties to the latest)");
    assert_eq!(a.json["history"].as_array().unwrap().len(), 2);
    assert_result_snapshot!(a.json["error"], @r#"
    {
      "code": "max_iterations",
      "message": "the run failed: 2 attempts; best score 0 at attempt 2; halted because max_iterations"
    }
    "#);
    assert_result_snapshot!(a.json["escalation"], @r#"
    {
      "summary": "2 attempts; best score 0 at attempt 2; halted because max_iterations",
      "attempts": [
        "1: /city rule:city_matches",
        "2: /city rule:city_matches"
      ],
      "recurring_issues": [
        {
          "path": "/city",
          "code": "rule:city_matches",
          "count": 2
        }
      ],
      "pattern": "`/city` failed in every attempt (rule:city_matches)",
      "question": "Every attempt failed at `/city`: city 'Louisville' doesn't match contract city 'Toledo'. Can that requirement be met with the information given, or should it change?"
    }
    "#);
}

#[tokio::test]
async fn malformed_requests_are_400_naming_the_problem_and_nothing_is_run() {
    let h = harness(vec![]).await;
    let cases = [
        ("{not json", "not valid JSON"),
        ("", "the request body is empty"),
        (r#"{"prompt": "x", "max_iteration": 3}"#, "unknown field `max_iteration`"),
        (r#"{"system": "x"}"#, "missing field `prompt`"),
        (r#"{"prompt": "  "}"#, "the prompt is empty"),
        (r#"{"prompt": "x", "context": [1]}"#, "`context`: must be a JSON object"),
        (r#"{"prompt": "x", "sandbox": 7}"#, "`sandbox`: invalid type"),
        (r#"{"prompt": "x", "artifact_ext": "../x"}"#, "is not a file extension"),
        (r#"{"prompt": "x", "max_iterations": 0}"#, "`max_iterations` = `0` is invalid"),
        (r#"{"prompt": "x", "evaluator": "nope:x"}"#, "nope:x"),
        (r#"{"prompt": "x", "model": "nope/x"}"#, "unknown provider `nope`"),
        (r#"{"prompt": "x", "schema": {"type": 12}}"#, "schema"),
    ];
    for (body, expected) in cases {
        let req = axum::http::Request::builder()
            .method("POST")
            .uri("/v1/iterate")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body))
            .unwrap();
        let a = h.send(req).await;
        assert_eq!(a.status, 400, "{body}: {}", a.text);
        let message = a.json["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{body}: {message}");
        assert!(a.json["error"]["code"].is_string(), "{}", a.text);
    }
    // A sandbox written as text is a name (which no request may use unless the server lists
    // it), never a spec read again.
    let text = r#"{"env": ["OPENAI_API_KEY"], "workdir": "/etc"}"#;
    let a = h.call("POST", "/v1/iterate", Some(json!({"prompt": "x", "sandbox": text}))).await;
    assert_eq!((a.status, a.json["error"]["code"].as_str()), (403, Some("sandbox_not_allowed")), "{}", a.text);
    assert!(a.text.contains("[server] sandboxes"), "{}", a.text);
    assert_eq!(h.model.calls().await, 0, "nothing was sent to the model");
    assert_eq!(h.call("GET", "/v1/runs", None).await.json["runs"], json!([]), "nothing was recorded");
}

#[tokio::test]
async fn an_unknown_kind_is_404_and_a_bad_kind_name_in_a_run_too() {
    let h = harness(vec![]).await;
    let a = h.call("POST", "/v1/iterate", Some(json!({"prompt": "x", "kind": "nope"}))).await;
    assert_eq!((a.status, a.json["error"]["code"].as_str()), (404, Some("unknown_kind")), "{}", a.text);
    assert!(a.text.contains("city"), "the known kinds are named: {}", a.text);
}

#[tokio::test]
async fn validate_answers_200_or_422_with_issues() {
    let h = harness(vec![]).await;
    let ok = h.call("POST", "/v1/validate", Some(json!({"schema": schema(), "artifact": {"city": "Toledo"}}))).await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    assert_eq!(ok.json, json!({"passed": true, "issues": []}));
    let bad = h.call("POST", "/v1/validate", Some(json!({"schema": schema(), "artifact": {"town": "Toledo"}}))).await;
    assert_eq!(bad.status, 422);
    insta::assert_json_snapshot!(bad.json, @r#"
    {
      "passed": false,
      "issues": [
        {
          "path": "",
          "code": "additionalProperties",
          "message": "Additional properties are not allowed ('town' was unexpected)"
        },
        {
          "path": "",
          "code": "required",
          "message": "\"city\" is a required property"
        }
      ]
    }
    "#);
    let kind = h
        .call(
            "POST",
            "/v1/validate",
            Some(json!({"kind": "city", "artifact": {"city": "Dayton"}, "context": {"city": "Toledo"}})),
        )
        .await;
    assert_eq!(kind.status, 422);
    assert_eq!(kind.json["issues"][0]["code"], "rule:city_matches");
    assert_eq!(kind.json["issues"][0]["message"], "city 'Dayton' doesn't match contract city 'Toledo'");
    let good = h
        .call(
            "POST",
            "/v1/validate",
            Some(json!({"kind": "city", "artifact": {"city": "Toledo"}, "context": {"city": "Toledo"}})),
        )
        .await;
    assert_eq!(good.status, 200, "{}", good.text);
    for (body, status) in [
        (json!({"kind": "nope", "artifact": {}}), 404),
        (json!({"artifact": {}}), 400),
        (json!({"kind": "city", "schema": {}, "artifact": {}}), 400),
        (json!({"schema": {}}), 400),
        (json!({"schema": {"type": 3}, "artifact": {}}), 400),
    ] {
        let a = h.call("POST", "/v1/validate", Some(body.clone())).await;
        assert_eq!(a.status, status, "{body}: {}", a.text);
    }
}

#[tokio::test]
async fn formats_are_checked_unless_the_request_says_not() {
    let h = harness(vec![reply(r#"{"start": "July 4th"}"#), reply(r#"{"start": "July 4th"}"#)]).await;
    let schema = json!({"type": "object", "properties": {"start": {"type": "string", "format": "date"}}});
    let artifact = json!({"start": "July 4th"});
    let a = h.call("POST", "/v1/validate", Some(json!({"schema": schema, "artifact": artifact}))).await;
    assert_eq!(a.status, 422, "{}", a.text);
    assert_eq!(
        a.json["issues"],
        json!([{"path": "/start", "code": "format", "message": "\"July 4th\" is not a \"date\"", "found": "July 4th"}])
    );
    let a = h
        .call("POST", "/v1/validate", Some(json!({"schema": schema, "artifact": artifact, "check_formats": false})))
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    // A run too: the date is fed back, unless the request makes formats annotations.
    let body = json!({"prompt": "When?", "schema": schema, "max_iterations": 1});
    let a = h.call("POST", "/v1/iterate", Some(body.clone())).await;
    assert_eq!(a.status, 422, "{}", a.text);
    assert_eq!(a.json["history"][0]["issues"][0]["code"], "format", "{}", a.text);
    let mut body = body;
    body["check_formats"] = json!(false);
    let a = h.call("POST", "/v1/iterate", Some(body)).await;
    assert_eq!(a.status, 200, "{}", a.text);
}

#[tokio::test]
async fn chat_asks_the_model_once() {
    let h = harness(vec![reply("Hello!"), reply("Again")]).await;
    let a = h
        .call(
            "POST",
            "/v1/chat",
            Some(json!({"model": "m", "provider": "fake", "prompt": "Hi", "system": "Be brief.", "temperature": 0.5})),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(
        a.json,
        json!({"text": "Hello!", "usage": {"input_tokens": 100, "output_tokens": 20}, "model": "fake/m", "finish_reason": "stop"})
    );
    let sent = &h.model.bodies().await[0];
    assert_eq!(
        sent["messages"],
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    );
    assert_eq!(sent["temperature"], 0.5);
    let a = h
        .call("POST", "/v1/chat", Some(json!({"model": "fake/m", "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Again?"}]})))
        .await;
    assert_eq!(a.json["text"], "Again");
    assert_eq!(h.model.bodies().await[1]["messages"].as_array().unwrap().len(), 3);
    for body in
        [json!({"model": "fake/m"}), json!({"prompt": "x", "messages": []}), json!({"prompt": "x", "model": "nope/m"})]
    {
        assert_eq!(h.call("POST", "/v1/chat", Some(body.clone())).await.status, 400, "{body}");
    }
    // The model's server failing is a bad gateway.
    let a = h.call("POST", "/v1/chat", Some(json!({"prompt": "x"}))).await;
    assert_eq!((a.status, a.json["error"]["code"].as_str()), (502, Some("provider_error")), "{}", a.text);
}

#[tokio::test]
async fn a_model_that_reads_a_file_named_by_the_request_is_refused() {
    let h = harness(vec![]).await;
    for (uri, body) in [
        ("/v1/chat", json!({"model": "mock//etc/passwd", "prompt": "x"})),
        ("/v1/iterate", json!({"model": "mock//etc/passwd", "prompt": "x"})),
    ] {
        let a = h.call("POST", uri, Some(body)).await;
        assert_eq!((a.status, a.json["error"]["code"].as_str()), (403, Some("model_not_allowed")), "{}", a.text);
    }
}

#[tokio::test]
async fn decide_answers_like_redraft_decide() {
    let h = harness(vec![]).await;
    let check = json!({"iteration_check": {
        "task_id": "task-003", "current_iteration": 2, "max_iterations": 3,
        "test_result": {"status": "fail", "output": "FAIL src/auth/login.test.ts\n  Expected: token to contain userId\n  Received: undefined"},
        "review_result": {"status": "pending", "feedback": ""},
    }});
    let a = h.call("POST", "/v1/decide", Some(check)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json["decision"]["action"], "retry");
    assert_eq!(a.json["decision"]["iteration"], 3);
    let a = h.call("POST", "/v1/decide", Some(json!({"task_id": "t", "current_iteration": 1, "max_iterations": 3, "test_result": {"status": "pass"}, "review_result": {"status": "approve"}}))).await;
    assert_eq!(a.json["decision"]["action"], "proceed");
    let a = h.call("POST", "/v1/decide", Some(json!({"task_id": "t"}))).await;
    assert_eq!(a.status, 400);
    assert!(a.json["error"]["message"].as_str().unwrap().contains("hint: it needs task_id"), "{}", a.text);
}

#[tokio::test]
async fn kinds_are_listed_and_shown() {
    let h = harness(vec![]).await;
    let a = h.call("GET", "/v1/kinds", None).await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json,
        json!({"kinds": [{"name": "city", "description": "The city a contract is in.", "rules": ["city_matches"], "has_example": true}]})
    );
    let a = h.call("GET", "/v1/kinds/city", None).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json["schema"], schema());
    assert_eq!(a.json["example"], json!({"city": "Springfield"}));
    let a = h.call("GET", "/v1/kinds/nope", None).await;
    assert_eq!((a.status, a.json["error"]["code"].as_str()), (404, Some("unknown_kind")));
}

#[tokio::test]
async fn health_metrics_viewer_and_unknown_paths() {
    let h = harness(vec![reply(r#"{"city": "X"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    let a = h.call("GET", "/healthz", None).await;
    assert_eq!((a.status, a.json.clone()), (200, json!({"status": "ok", "runs_in_flight": 0})));
    let run = h
        .call("POST", "/v1/iterate", Some(json!({"kind": "city", "prompt": "city?", "context": {"city": "Toledo"}})))
        .await;
    assert_eq!(run.status, 200, "{}", run.text);
    let m = h.call("GET", "/metrics", None).await;
    assert_eq!(m.status, 200);
    assert!(m.header("content-type").unwrap().starts_with("text/plain; version=0.0.4"));
    for line in [
        "redraft_runs_total{status=\"succeeded\",halted_because=\"success\"} 1",
        "redraft_attempts_total{model=\"fake/m\",status=\"accepted\"} 1",
        "redraft_attempts_total{model=\"fake/m\",status=\"rejected\"} 1",
        "redraft_tokens_total{model=\"fake/m\",direction=\"in\"} 200",
        "redraft_tokens_total{model=\"fake/m\",direction=\"out\"} 40",
        "redraft_attempt_duration_seconds_count 2",
        "redraft_attempt_duration_seconds_bucket{le=\"+Inf\"} 2",
        "# TYPE redraft_attempt_duration_seconds histogram",
        "redraft_runs_in_flight 0",
    ] {
        assert!(m.text.lines().any(|l| l == line), "missing `{line}` in\n{}", m.text);
    }
    let page = h.call("GET", "/", None).await;
    assert_eq!(page.status, 200);
    assert!(page.header("content-type").unwrap().starts_with("text/html"));
    assert!(page.text.contains("/v1/runs"), "the viewer reads the API");
    let a = h.call("GET", "/v2/nothing", None).await;
    assert_eq!((a.status, a.json["error"]["code"].as_str()), (404, Some("not_found")));
    assert!(a.header("x-request-id").is_some(), "every answer carries a request id");
}
