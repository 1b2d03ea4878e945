//! Checked answers: a `response_format` schema or a forced function call makes the request a run,
//! retried until the answer fits; a run that fails, a backend that keeps failing and a bad
//! request answer in OpenAI's error shape.

use redraft_testkit::{Reply, call, reply, status, tool_calls};
use serde_json::{Value, json};

use super::{checked, streamed_calls, weather_tool};
use crate::{assert_result_snapshot, harness, sse_events};

#[tokio::test]
async fn a_checked_answer_is_retried_until_it_fits_the_schema() {
    let h = harness(vec![reply(r#"The city is {"town": "Toledo"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    let body = checked(json!([
        {"role": "system", "content": "You answer about contracts."},
        {"role": "user", "content": "Contract C-7 is in Toledo, OH."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": [{"type": "text", "text": "Which city?"}]},
    ]));
    let a = h.call("POST", "/v1/chat/completions", Some(body)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.header("x-redraft-attempts"), Some("2"));
    let run_id = a.header("x-redraft-run-id").unwrap().to_owned();
    assert_eq!(a.json["redraft"]["run_id"], run_id.as_str());
    assert_result_snapshot!(a.json, @r#"
    {
      "id": "[id]",
      "object": "chat.completion",
      "created": "[time]",
      "model": "fake/m",
      "choices": [
        {
          "index": 0,
          "message": {
            "role": "assistant",
            "content": "{\"city\":\"Toledo\"}"
          },
          "finish_reason": "stop"
        }
      ],
      "usage": {
        "prompt_tokens": 200,
        "completion_tokens": 40,
        "total_tokens": 240
      },
      "redraft": {
        "run_id": "[run_id]",
        "attempts": 2,
        "halted_because": "success",
        "history": [
          "rejected",
          "accepted"
        ]
      }
    }
    "#);

    // The request's messages became the task: system, the earlier turns, then the last user
    // message (with the schema), and on attempt 2 the feedback in the same conversation.
    let sent = h.model.bodies().await;
    let roles = |b: &Value| {
        b["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    assert_eq!(roles(&sent[0]), ["system", "user", "assistant", "user"]);
    assert_eq!(roles(&sent[1]), ["system", "user", "assistant", "user", "assistant", "user"]);
    assert_eq!(sent[0]["messages"][0]["content"], "You answer about contracts.");
    assert_eq!(sent[0]["messages"][1]["content"], "Contract C-7 is in Toledo, OH.");
    let prompt = sent[0]["messages"][3]["content"].as_str().unwrap();
    assert!(prompt.starts_with("Which city?") && prompt.contains("JSON Schema"), "{prompt}");
    let feedback = sent[1]["messages"][5]["content"].as_str().unwrap();
    assert!(feedback.starts_with("Attempt 2 of 3.") && feedback.contains("city"), "{feedback}");

    // Recorded like any run.
    let stored = h.call("GET", &format!("/v1/runs/{run_id}"), None).await;
    assert_eq!((stored.json["status"].as_str(), stored.json["iterations"].as_u64()), (Some("succeeded"), Some(2)));
}

#[tokio::test]
async fn json_object_means_any_json_object() {
    let h = harness(vec![reply("[1, 2]"), reply(r#"{"type": "object"}"#), reply("Here: {\"a\": 1}")]).await;
    let a = h
        .call("POST", "/v1/chat/completions", Some(json!({"model": "m", "messages": [{"role": "user", "content": "An object please, as JSON"}], "response_format": {"type": "json_object"}})))
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json["choices"][0]["message"]["content"], r#"{"a":1}"#);
    assert_eq!(a.json["model"], "fake/m", "a bare model goes to the default provider");
    assert_eq!(a.json["redraft"]["history"], json!(["rejected", "rejected", "accepted"]));
    let sent = h.model.bodies().await;
    let first = sent[0]["messages"].to_string();
    assert!(!first.contains("Schema") && !first.contains("\\\"type\\\""), "no schema is shown: {first}");
    let feedback = sent[2]["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(feedback.contains("[schema_echo]"), "a schema given back is no answer: {feedback}");
}

#[tokio::test]
async fn a_failed_run_is_422_in_openais_error_shape() {
    let h = harness(vec![reply(r#"{"town": "A"}"#), reply(r#"{"town": "B"}"#), reply(r#"{"town": "C"}"#)]).await;
    let a = h
        .call("POST", "/v1/chat/completions", Some(checked(json!([{"role": "user", "content": "Which city?"}]))))
        .await;
    assert_eq!(a.status, 422, "{}", a.text);
    assert_eq!(a.header("x-redraft-attempts"), Some("3"));
    assert_eq!(a.json["error"]["run_id"], a.header("x-redraft-run-id").unwrap());
    assert_result_snapshot!(a.json, @r#"
    {
      "error": {
        "message": "3 attempts; best score 0 at attempt 3; halted because max_iterations. Every attempt failed at the whole answer: Additional properties are not allowed ('town' was unexpected). Can that requirement be met with the information given, or should it change?; last issues: (root) additionalProperties: Additional properties are not allowed ('town' was unexpected); (root) required: \"city\" is a required property",
        "code": "max_iterations",
        "type": "validation_error",
        "run_id": "[run_id]",
        "attempts": 3,
        "halted_because": "max_iterations"
      },
      "redraft": {
        "run_id": "[run_id]",
        "attempts": 3,
        "halted_because": "max_iterations",
        "history": [
          "rejected",
          "rejected",
          "rejected"
        ]
      }
    }
    "#);
}

#[tokio::test]
async fn a_backend_that_keeps_failing_is_502_naming_its_answer_and_not_to_be_retried() {
    let h = harness(vec![status(500), status(500), status(500), status(500), status(500), status(500)]).await;
    let a = h
        .call("POST", "/v1/chat/completions", Some(checked(json!([{"role": "user", "content": "Which city?"}]))))
        .await;
    assert_eq!(a.status, 502, "{}", a.text);
    assert_eq!(a.header("x-should-retry"), Some("false"), "redraft already retried");
    let message = a.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("HTTP 500") && message.contains("scripted 500"), "{message}");
    assert_eq!(a.json["error"]["code"], "provider_error");
    assert_eq!(a.json["error"]["attempts"], 0);
    let calls = h.model.calls().await;
    assert!((2..=3).contains(&calls), "redraft's own transport retries, once: {calls}");
}

#[tokio::test]
async fn bad_proxy_requests_are_400_in_openais_shape() {
    let h = harness(vec![status(503), status(503), status(503)]).await;
    for (body, expected) in [
        (json!({"messages": []}), "missing field `model`"),
        (json!({"model": "fake/m", "messages": []}), "`messages` is empty"),
        (
            json!({"model": "fake/m", "messages": [{"role": "critic", "content": "x"}], "response_format": {"type": "json_object"}}),
            "`critic`",
        ),
        (json!({"model": "fake/m", "messages": [{"role": "user", "content": "x"}], "n": 2}), "`n`"),
        (
            json!({"model": "fake/m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}}),
            "names the function `g`, which `tools` does not define",
        ),
        (
            json!({"model": "fake/m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}], "response_format": {"type": "json_object"}}),
            "`response_format` together with `tools`",
        ),
        (
            json!({"model": "fake/m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f bad"}}], "tool_choice": "required"}),
            "`f bad` is not a function name",
        ),
        (
            json!({"model": "fake/m", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}),
            "schema` is required",
        ),
        (
            json!({"model": "fake/m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "response_format": {"type": "json_object"}}),
            "`image_url` part",
        ),
    ] {
        let a = h.call("POST", "/v1/chat/completions", Some(body.clone())).await;
        assert_eq!(a.status, 400, "{body}: {}", a.text);
        assert_eq!(a.json["error"]["type"], "invalid_request_error", "{}", a.text);
        assert!(a.json["error"]["message"].as_str().unwrap().contains(expected), "{}", a.text);
    }
    // The upstream failing: 502.
    let a = h
        .call(
            "POST",
            "/v1/chat/completions",
            Some(json!({"model": "fake/m", "messages": [{"role": "user", "content": "x"}]})),
        )
        .await;
    assert_eq!((a.status, a.json["error"]["type"].as_str()), (502, Some("upstream_error")), "{}", a.text);
}

#[tokio::test]
async fn a_forced_function_call_is_checked_against_its_parameters() {
    let h = harness(vec![
        tool_calls(json!([call("c1", "weather", r#"{"town":"Paris"}"#)])),
        tool_calls(json!([call("c2", "weather", r#"{"city":"Paris"}"#)])),
        tool_calls(json!([call("c3", "weather", r#"{"city":"Lyon"}"#)])),
    ])
    .await;
    let messages = json!([{"role": "user", "content": "Weather in Paris?"}]);
    let forced = json!({"type": "function", "function": {"name": "weather"}});
    let body = json!({"model": "fake/m", "messages": messages, "tools": weather_tool(), "tool_choice": forced});
    let a = h.call("POST", "/v1/chat/completions", Some(body)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.header("x-redraft-attempts"), Some("2"), "the bad arguments were fed back");
    let message = &a.json["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null);
    assert_eq!(message["tool_calls"][0]["type"], "function");
    assert_eq!(message["tool_calls"][0]["function"]["name"], "weather");
    let arguments: Value =
        serde_json::from_str(message["tool_calls"][0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert!(message["tool_calls"][0]["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(a.json["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(a.json["redraft"]["history"], json!(["rejected", "accepted"]));
    let sent = h.model.bodies().await;
    assert_eq!(sent[0]["tool_choice"], forced, "the backend is asked for the call");
    assert_eq!(sent[0]["tools"][0]["function"]["parameters"], weather_tool()[0]["function"]["parameters"]);
    let feedback = sent[1]["messages"].as_array().unwrap();
    assert!(
        feedback.iter().any(|m| m["role"] == "assistant" && m["content"].as_str().unwrap().contains("town")),
        "{feedback:?}"
    );
    assert!(feedback.last().unwrap()["content"].as_str().unwrap().contains("city"), "the issue is named: {feedback:?}");

    // `required` with one tool is the same; streamed, the call arrives as deltas.
    let body = json!({"model": "fake/m", "messages": messages, "tools": weather_tool(), "tool_choice": "required", "stream": true});
    let s = h.call("POST", "/v1/chat/completions", Some(body)).await;
    assert_eq!(s.status, 200, "{}", s.text);
    let events = sse_events(&s.text);
    let chunks: Vec<&Value> = events.iter().map(|(_, d)| d).filter(|d| d.is_object()).collect();
    let calls = streamed_calls(&chunks);
    assert_eq!(calls.len(), 1);
    assert_eq!(
        serde_json::from_str::<Value>(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"city": "Lyon"})
    );
}

/// The answer names the model the backend says answered, as OpenAI's own answers do (a dated
/// snapshot), checked or passed through; without one, the model asked for.
#[tokio::test]
async fn the_answer_names_the_model_the_backend_says_answered() {
    let dated = |content: &str| {
        let mut body = redraft_testkit::completion(content);
        body["model"] = json!("m-2026-01-15");
        Reply::new(200).set_body_json(body)
    };
    let h =
        harness(vec![dated(r#"{"town": "Toledo"}"#), dated(r#"{"city": "Toledo"}"#), reply(r#"{"city": "Toledo"}"#)])
            .await;
    let a = h
        .call("POST", "/v1/chat/completions", Some(checked(json!([{"role": "user", "content": "Which city?"}]))))
        .await;
    assert_eq!((a.status, a.json["model"].as_str()), (200, Some("m-2026-01-15")), "{}", a.text);
    let run_id = a.header("x-redraft-run-id").unwrap();
    let stored = h.state.store().run(run_id).await.unwrap().unwrap();
    assert_eq!(stored.attempts[1].served_model.as_deref(), Some("m-2026-01-15"), "recorded with the attempt");
    assert_eq!(stored.attempts[1].model.as_deref(), Some("fake/m"));
    let a = h
        .call("POST", "/v1/chat/completions", Some(checked(json!([{"role": "user", "content": "Which city?"}]))))
        .await;
    assert_eq!(a.json["model"], "fake/m", "the backend named none: {}", a.text);
}
