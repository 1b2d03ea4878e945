//! The OpenAI-compatible proxy through the router: checked answers, pass-through, streaming,
//! failures in OpenAI's error shape.

use redraft_testkit::{Reply, call, reply, status, tool_calls};
use serde_json::{Value, json};

use crate::{CITY_SCHEMA, assert_result_snapshot, harness, sse_events};

fn checked(messages: Value) -> Value {
    json!({
        "model": "fake/m",
        "messages": messages,
        "response_format": {"type": "json_schema", "json_schema": {"name": "city", "strict": true, "schema": serde_json::from_str::<Value>(CITY_SCHEMA).unwrap()}},
    })
}

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
async fn without_response_format_it_passes_through_once() {
    let h =
        harness(vec![reply("Hello there"), reply("Streamed hello, long enough to make several chunks of content.")])
            .await;
    let a = h
        .call("POST", "/v1/chat/completions", Some(json!({"model": "fake/m", "messages": [{"role": "user", "content": "Hi"}], "temperature": 0.1, "max_tokens": 50, "user": "ignored"})))
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_result_snapshot!(a.json, @r#"
    {
      "id": "[id]",
      "object": "chat.completion",
      "choices": [
        {
          "index": 0,
          "message": {
            "role": "assistant",
            "content": "Hello there"
          },
          "finish_reason": "stop"
        }
      ],
      "usage": {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120
      },
      "model": "fake/m",
      "created": "[time]"
    }
    "#);
    assert!(a.header("x-redraft-run-id").is_none(), "no run");
    let sent = &h.model.bodies().await[0];
    assert_eq!((sent["temperature"].as_f64(), sent["max_tokens"].as_u64()), (Some(0.1), Some(50)));

    let s = h
        .call("POST", "/v1/chat/completions", Some(json!({"model": "fake/m", "messages": [{"role": "user", "content": "Hi"}], "stream": true, "stream_options": {"include_usage": true}})))
        .await;
    assert_eq!(s.status, 200);
    assert!(s.header("content-type").unwrap().starts_with("text/event-stream"));
    let events = sse_events(&s.text);
    assert_eq!(events.last().unwrap().1, json!("[DONE]"));
    let chunks: Vec<&Value> = events.iter().map(|(_, d)| d).filter(|d| d.is_object()).collect();
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk"));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text, "Streamed hello, long enough to make several chunks of content.");
    assert!(chunks.len() >= 4, "several content chunks: {}", s.text);
    assert_eq!(chunks[chunks.len() - 2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks.last().unwrap()["usage"]["total_tokens"], 120);
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
async fn models_lists_the_configured_models() {
    let h = crate::harness_with(vec![], vec![], |c| {
        c.fallback_models = vec!["fake/bigger".into()];
        c.models
            .insert("openai/gpt-4o-mini".into(), redraft::Price { input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.6 });
    })
    .await;
    let a = h.call("GET", "/v1/models", None).await;
    assert_eq!(a.status, 200);
    let ids: Vec<&str> = a.json["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["fake/m", "fake/bigger", "openai/gpt-4o-mini"]);
    assert_eq!(a.json["object"], "list");
}

/// `GET /v1/models/{id}` answers the model object for every listed id, `/` included (the
/// official clients send the id as it is), and for a bare name of the default provider; an
/// unknown one is 404 in OpenAI's error shape.
#[tokio::test]
async fn one_model_is_found_by_its_id_slash_and_all() {
    let h = crate::harness_with(vec![], vec![], |c| {
        c.models
            .insert("openai/gpt-4o-mini".into(), redraft::Price { input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.6 });
    })
    .await;
    for (asked, id) in
        [("fake/m", "fake/m"), ("openai/gpt-4o-mini", "openai/gpt-4o-mini"), ("m", "fake/m"), ("fake%2Fm", "fake/m")]
    {
        let a = h.call("GET", &format!("/v1/models/{asked}"), None).await;
        assert_eq!(a.status, 200, "{asked}: {}", a.text);
        assert_eq!((a.json["id"].as_str(), a.json["object"].as_str()), (Some(id), Some("model")), "{asked}");
        assert_eq!(a.json["owned_by"], id.split_once('/').unwrap().0);
    }
    for unknown in ["fake/other", "nobody/m", "fake/m/extra", "fake/m%00", "..%2Ffake%2Fm"] {
        let a = h.call("GET", &format!("/v1/models/{unknown}"), None).await;
        assert_eq!(a.status, 404, "{unknown}: {}", a.text);
        assert_eq!(a.json["error"]["code"], "model_not_found", "{unknown}");
        assert_eq!(a.json["error"]["type"], "not_found_error", "{unknown}: OpenAI's shape");
        assert!(a.json["error"]["message"].as_str().unwrap().contains("GET /v1/models"), "{}", a.text);
    }
}

fn weather_tool() -> Value {
    json!([{"type": "function", "function": {"name": "weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}}])
}

/// `tool_calls` rebuilt from streamed deltas, by index.
fn streamed_calls(chunks: &[&Value]) -> Vec<Value> {
    let mut calls: Vec<Value> = Vec::new();
    for delta in
        chunks.iter().flat_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array().cloned().unwrap_or_default())
    {
        let i = delta["index"].as_u64().unwrap() as usize;
        if i == calls.len() {
            calls.push(json!({"id": delta["id"], "type": delta["type"], "function": {"name": delta["function"]["name"], "arguments": ""}}));
        }
        let args = calls[i]["function"]["arguments"].as_str().unwrap().to_owned();
        calls[i]["function"]["arguments"] = json!(args + delta["function"]["arguments"].as_str().unwrap_or_default());
    }
    calls
}

#[tokio::test]
async fn tools_pass_through_to_the_backend_and_back() {
    let calls =
        json!([call("call_a", "weather", r#"{"city":"Paris"}"#), call("call_b", "weather", r#"{"city":"Lyon"}"#)]);
    let h = harness(vec![tool_calls(calls.clone()), reply("Paris 18 C, Lyon 20 C"), tool_calls(calls.clone())]).await;
    let ask = json!([{"role": "user", "content": "Weather in Paris and Lyon?"}]);
    let body = json!({"model": "fake/m", "messages": ask, "tools": weather_tool(), "tool_choice": "auto",
        "parallel_tool_calls": true, "top_p": 0.5, "seed": 7, "stop": ["END"], "user": "u-1", "metadata": {"team": "a"}});
    let a = h.call("POST", "/v1/chat/completions", Some(body)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json["choices"][0]["message"]["tool_calls"], calls, "both calls, as the backend made them");
    assert_eq!(a.json["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(a.json["object"], "chat.completion");
    assert!(a.json["created"].as_u64().is_some() && a.json["model"] == "fake/m", "filled in: {}", a.json);
    assert!(a.header("x-redraft-run-id").is_none(), "passed through: no run");
    let sent = h.model.bodies().await;
    assert_eq!(sent[0]["model"], "m", "the backend's model name");
    for key in ["tools", "tool_choice", "parallel_tool_calls", "top_p", "seed", "stop", "user", "metadata"] {
        assert!(sent[0].get(key).is_some(), "`{key}` forwarded: {}", sent[0]);
    }
    assert_eq!(sent[0]["tools"], weather_tool());

    // The results go back as `tool` messages, as they are.
    let turn = json!([ask[0], {"role": "assistant", "content": null, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_a", "content": "18 C"}, {"role": "tool", "tool_call_id": "call_b", "content": "20 C"}]);
    let a = h
        .call(
            "POST",
            "/v1/chat/completions",
            Some(json!({"model": "fake/m", "messages": turn, "tools": weather_tool()})),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json["choices"][0]["message"]["content"], "Paris 18 C, Lyon 20 C");
    assert_eq!(h.model.bodies().await[1]["messages"], turn);

    // Streamed: the calls arrive as deltas a client reassembles.
    let s = h
        .call(
            "POST",
            "/v1/chat/completions",
            Some(json!({"model": "fake/m", "messages": ask, "tools": weather_tool(), "stream": true})),
        )
        .await;
    assert_eq!(s.status, 200, "{}", s.text);
    let events = sse_events(&s.text);
    let chunks: Vec<&Value> = events.iter().map(|(_, d)| d).filter(|d| d.is_object()).collect();
    assert_eq!(Value::Array(streamed_calls(&chunks)), calls);
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "tool_calls");
    // Asked to stream, this backend answered whole: its answer, in chunks.
    assert_eq!(h.model.bodies().await[2]["stream"], true);
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

#[tokio::test]
async fn a_passed_through_request_the_backend_refuses_keeps_its_status_and_reason() {
    let refusal = Reply::new(400)
        .set_body_json(json!({"error": {"message": "Unrecognized request argument supplied: frobnicate"}}));
    let custom = json!([{"type": "custom", "custom": {"name": "grep"}}]);
    let h = harness(vec![refusal, reply("done"), status(500)]).await;
    let ask = json!([{"role": "user", "content": "Hi"}]);
    let a = h
        .call("POST", "/v1/chat/completions", Some(json!({"model": "fake/m", "messages": ask, "frobnicate": 1})))
        .await;
    assert_eq!(a.status, 400, "the client's request, refused: {}", a.text);
    let message = a.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("HTTP 400") && message.contains("frobnicate"), "{message}");
    assert_eq!(a.json["error"]["code"], "upstream_rejected");

    // `required` with one tool that is not a function: passed through, not checked.
    let a = h
        .call(
            "POST",
            "/v1/chat/completions",
            Some(json!({"model": "fake/m", "messages": ask, "tools": custom, "tool_choice": "required"})),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(h.model.bodies().await[1]["tools"], custom);

    // The backend failing is still the gateway's problem: 502.
    let a = h.call("POST", "/v1/chat/completions", Some(json!({"model": "fake/m", "messages": ask}))).await;
    assert_eq!(a.status, 502, "{}", a.text);
}

/// An OpenAI-compatible backend's own models are listed too (`provider/model`), and found by id;
/// a backend that cannot list them leaves only the configured ones.
#[tokio::test]
async fn models_lists_what_the_backend_lists_too() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let backend = MockServer::start().await;
    let list = json!({"object": "list", "data": [{"id": "m", "object": "model"}, {"id": "m-mini-2026", "object": "model"}, {"id": "org/embed", "object": "model"}]});
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(list))
        .expect(1)
        .mount(&backend)
        .await;
    let url = format!("{}/v1", backend.uri());
    let h =
        crate::harness_with(vec![], vec![], move |c| c.providers.get_mut("fake").unwrap().base_url = Some(url)).await;
    let a = h.call("GET", "/v1/models", None).await;
    let ids: Vec<&str> = a.json["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["fake/m", "fake/m-mini-2026", "fake/org/embed"], "the configured one once, then the backend's");
    // Found by id, and asked for once a minute at most (`expect(1)`).
    let a = h.call("GET", "/v1/models/fake/org/embed", None).await;
    assert_eq!((a.status, a.json["owned_by"].as_str()), (200, Some("fake")), "{}", a.text);
    let a = h.call("GET", "/v1/models/m-mini-2026", None).await;
    assert_eq!(a.json["id"], "fake/m-mini-2026", "a bare name is the default provider's: {}", a.text);

    // The default fake answers only chat completions: its list is left out, not an error.
    let h = crate::harness(vec![]).await;
    let a = h.call("GET", "/v1/models", None).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json["data"].as_array().unwrap().len(), 1, "{}", a.text);
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
