//! `POST /v1/responses` through the router: translated to a chat completion and back, on the
//! same loop; input items, streams and what is refused.

use redraft_testkit::{call, reply, tool_calls};
use serde_json::{Value, json};

use crate::{CITY_SCHEMA, harness, sse_events};

fn city_format() -> Value {
    json!({"format": {"type": "json_schema", "name": "city", "schema": serde_json::from_str::<Value>(CITY_SCHEMA).unwrap()}})
}

#[tokio::test]
async fn a_checked_response_is_retried_and_answered_as_a_response() {
    let h = harness(vec![reply(r#"{"town": "Toledo"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    let body = json!({"model": "fake/m", "instructions": "Answer about contracts.", "input": "Where is C-7?", "text": city_format(), "max_output_tokens": 50});
    let a = h.call("POST", "/v1/responses", Some(body)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.header("x-redraft-attempts"), Some("2"));
    let r = &a.json;
    assert_eq!((r["object"].as_str(), r["status"].as_str()), (Some("response"), Some("completed")));
    assert!(r["id"].as_str().unwrap().starts_with("resp_"));
    let item = &r["output"][0];
    assert_eq!((item["type"].as_str(), item["role"].as_str()), (Some("message"), Some("assistant")));
    assert_eq!(item["content"][0]["type"], "output_text");
    assert_eq!(
        serde_json::from_str::<Value>(item["content"][0]["text"].as_str().unwrap()).unwrap(),
        json!({"city": "Toledo"})
    );
    assert_eq!((r["usage"]["input_tokens"].as_u64(), r["usage"]["output_tokens"].as_u64()), (Some(200), Some(40)));
    assert_eq!(r["redraft"]["attempts"], 2);
    assert_eq!(r["text"], city_format(), "the request's settings are echoed");
    let sent = h.model.bodies().await;
    assert_eq!(sent[0]["messages"][0], json!({"role": "system", "content": "Answer about contracts."}));
    assert_eq!(sent[0]["max_tokens"], 50);
}

#[tokio::test]
async fn function_calls_and_their_outputs_go_back_as_a_conversation() {
    let h =
        harness(vec![tool_calls(json!([call("c1", "get_weather", r#"{"city": "Osaka"}"#)])), reply("Sunny in Osaka.")])
            .await;
    let tool = json!({"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}});
    let ask = json!({"role": "user", "content": [{"type": "input_text", "text": "Weather in Osaka?"}]});
    let a = h.call("POST", "/v1/responses", Some(json!({"model": "fake/m", "input": [ask], "tools": [tool]}))).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let call = &a.json["output"][0];
    assert_eq!(
        (call["type"].as_str(), call["call_id"].as_str(), call["name"].as_str()),
        (Some("function_call"), Some("c1"), Some("get_weather"))
    );
    // The client sends the call and its output back, with the question.
    let output = json!({"type": "function_call_output", "call_id": "c1", "output": "sunny"});
    let input = json!([ask, call, output]);
    let a = h.call("POST", "/v1/responses", Some(json!({"model": "fake/m", "input": input, "tools": [tool]}))).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json["output"][0]["content"][0]["text"], "Sunny in Osaka.");
    let sent = &h.model.bodies().await[1];
    assert_eq!(sent["messages"][1]["tool_calls"][0]["function"]["name"], "get_weather", "{sent}");
    assert_eq!(sent["messages"][2], json!({"role": "tool", "tool_call_id": "c1", "content": "sunny"}));
    assert_eq!(sent["tools"][0]["function"]["name"], "get_weather", "chat completions' tool shape");
}

#[tokio::test]
async fn a_streamed_response_opens_at_once_and_a_failed_one_ends_with_an_error_event() {
    let h = harness(vec![
        reply(r#"{"town": "A"}"#),
        reply(r#"{"town": "B"}"#),
        reply(r#"{"town": "C"}"#),
        reply(r#"{"city": "Toledo"}"#),
    ])
    .await;
    let body = json!({"model": "fake/m", "input": "Where?", "text": city_format(), "stream": true});
    let a = h.call("POST", "/v1/responses", Some(body.clone())).await;
    assert_eq!(a.status, 200);
    assert!(a.text.starts_with(": redraft: working"), "{}", a.text);
    let events = sse_events(&a.text);
    let kinds: Vec<&str> = events.iter().map(|(kind, _)| kind.as_str()).collect();
    assert_eq!(kinds, ["response.created", "response.in_progress", "error"], "{}", a.text);
    let error = &events[2].1;
    assert_eq!(
        (error["code"].as_str(), error["error"]["code"].as_str()),
        (Some("max_iterations"), Some("max_iterations"))
    );
    assert_eq!(error["sequence_number"], 2);

    let a = h.call("POST", "/v1/responses", Some(body)).await;
    let events = sse_events(&a.text);
    let kinds: Vec<&str> = events.iter().map(|(kind, _)| kind.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"response.created"));
    assert_eq!(kinds.last(), Some(&"response.completed"));
    let text: String = events
        .iter()
        .filter(|(kind, _)| kind == "response.output_text.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, r#"{"city":"Toledo"}"#);
    let numbers: Vec<u64> = events.iter().map(|(_, d)| d["sequence_number"].as_u64().unwrap()).collect();
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn what_the_proxy_does_not_serve_is_refused_by_name() {
    let h = harness(vec![]).await;
    for (extra, named) in [
        (json!({"previous_response_id": "resp_1"}), "previous_response_id"),
        (json!({"conversation": "conv_1"}), "conversation"),
        (json!({"background": true}), "background"),
        (json!({"tools": [{"type": "web_search"}]}), "web_search"),
        (json!({"input": [{"type": "image_generation_call", "id": "x"}]}), "image_generation_call"),
        (json!({"include": ["file_search_call.results"]}), "file_search_call.results"),
        (json!({"text": {"format": {"type": "yaml"}}}), "yaml"),
    ] {
        let mut body = json!({"model": "fake/m", "input": "Hi"});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let a = h.call("POST", "/v1/responses", Some(body)).await;
        assert_eq!(a.status, 400, "{extra}: {}", a.text);
        assert!(a.json["error"]["message"].as_str().unwrap().contains(named), "{extra}: {}", a.text);
        assert_eq!(a.json["error"]["type"], "invalid_request_error");
    }
    assert_eq!(h.model.calls().await, 0);
}
