//! Pass-through: without `response_format` a request goes to the backend once, streamed or
//! not, tools and all, and a refusal keeps its status and reason.

use redraft_testkit::{Reply, call, reply, status, tool_calls};
use serde_json::{Value, json};

use super::{streamed_calls, weather_tool};
use crate::{assert_result_snapshot, harness, sse_events};

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
