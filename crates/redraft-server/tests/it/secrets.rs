//! No known secret leaves in a response: a model's answer, a model server's error, a stored
//! run, its events, `/metrics` and a passed-through stream that carry one (whole, cut between
//! two pieces, or streamed token by token) show `[redacted]` instead, and a stream is not held
//! back for it.

use axum::body::Bytes;
use futures_util::StreamExt;
use redraft::core::secrets;
use redraft_testkit::{Reply, reply};
use serde_json::json;
use tokio::sync::mpsc;
use tower::ServiceExt;

use crate::streaming::{Sent, chunk_event, next_piece, proxy_over, streaming_backend};
use crate::{CITY_SCHEMA, harness, request};

/// Made known as the test begins (as a provider's key would be when it is read).
const SECRET: &str = "sk-server-test-0f1e2d3c4b5a";

#[tokio::test]
async fn no_response_carries_a_known_secret() {
    secrets::register(SECRET);
    let error = Reply::new(400).set_body_json(json!({"error": {"message": format!("bad key `{SECRET}`")}}));
    let h = harness(vec![reply(&format!(r#"{{"city": "{SECRET}"}}"#)), reply(&format!("the key is {SECRET}")), error])
        .await;
    let schema: serde_json::Value = serde_json::from_str(CITY_SCHEMA).unwrap();
    let run = h.call("POST", "/v1/iterate", Some(json!({"prompt": "Which city?", "schema": schema}))).await;
    assert_eq!(run.json["artifact"], json!({"city": "[redacted]"}), "{}", run.text);
    let id = run.json["run_id"].as_str().unwrap().to_owned();
    let chat = h.call("POST", "/v1/chat", Some(json!({"prompt": "Hi"}))).await;
    assert_eq!(chat.json["text"], "the key is [redacted]", "{}", chat.text);
    let failed = h.call("POST", "/v1/chat", Some(json!({"prompt": "Hi"}))).await;
    assert_eq!(failed.status, 502, "{}", failed.text);
    assert!(failed.text.contains("bad key `[redacted]`"), "{}", failed.text);

    let mut texts = vec![run.text, chat.text, failed.text];
    for path in [format!("/v1/runs/{id}"), format!("/v1/runs/{id}/events"), "/v1/runs".into(), "/metrics".into()] {
        let answer = h.call("GET", &path, None).await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.text);
        texts.push(answer.text);
    }
    assert!(texts[4].contains("[redacted]"), "the events show the redacted answer: {}", texts[4]);
    for text in texts {
        assert!(!text.contains(SECRET), "{text}");
    }
}

#[tokio::test]
async fn a_secret_split_in_a_stream_is_redacted_without_holding_the_stream_back() {
    secrets::register(SECRET);
    let (send, events) = mpsc::unbounded_channel::<Sent>();
    let (url, _) = streaming_backend(events).await;
    let h = proxy_over(url).await;
    let ask = json!({"model": "fake/m", "messages": [{"role": "user", "content": "Hi"}], "stream": true});
    let res = h.app.clone().oneshot(request("POST", "/v1/chat/completions", Some(&ask))).await.unwrap();
    assert_eq!(res.status(), 200);
    let mut body = res.into_body().into_data_stream();

    // An event without a secret passes at once.
    send.send(Ok(Bytes::from(chunk_event("Hel")))).unwrap();
    assert_eq!(next_piece(&mut body).await, chunk_event("Hel"));
    // One event written in two pieces, the secret cut between them: it goes on once whole.
    let event = chunk_event(&format!("key: {SECRET}!"));
    let cut = event.find(SECRET).unwrap() + 6;
    send.send(Ok(Bytes::from(event[..cut].to_owned()))).unwrap();
    send.send(Ok(Bytes::from(event[cut..].to_owned()))).unwrap();
    assert_eq!(next_piece(&mut body).await, chunk_event("key: [redacted]!"));
    // A secret the model streams token by token: each event goes on at once, the start of the
    // secret held back from its text until the next event of the choice tells what it is.
    let (start, end) = SECRET.split_at(9);
    send.send(Ok(Bytes::from(chunk_event(&format!("again {start}"))))).unwrap();
    assert_eq!(next_piece(&mut body).await, chunk_event("again "));
    send.send(Ok(Bytes::from(chunk_event(&format!("{end}, done"))))).unwrap();
    assert_eq!(next_piece(&mut body).await, chunk_event("[redacted], done"));
    send.send(Ok(Bytes::from_static(b"data: [DONE]\n\n"))).unwrap();
    drop(send);
    let mut rest = String::new();
    while let Some(piece) = body.next().await {
        rest.push_str(std::str::from_utf8(&piece.unwrap()).unwrap());
    }
    assert_eq!(rest, "data: [DONE]\n\n");
}

/// Every string a client can rebuild from `events` (SSE text, any line ends): for each choice
/// and field path (array elements as `*`), its pieces in order.
fn rebuilt_texts(events: &str) -> std::collections::HashMap<String, String> {
    fn walk(value: &serde_json::Value, path: String, out: &mut std::collections::HashMap<String, String>) {
        match value {
            serde_json::Value::String(s) => out.entry(path).or_default().push_str(s),
            serde_json::Value::Array(items) => items.iter().for_each(|i| walk(i, format!("{path}/*"), out)),
            serde_json::Value::Object(fields) => fields.iter().for_each(|(k, v)| walk(v, format!("{path}/{k}"), out)),
            _ => {}
        }
    }
    let normalised = events.replace("\r\n", "\n").replace('\r', "\n");
    let mut out = std::collections::HashMap::new();
    for event in normalised.split("\n\n") {
        let data: Vec<&str> =
            event.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
        let Ok(chunk) = serde_json::from_str::<serde_json::Value>(&data.join("\n")) else { continue };
        walk(&chunk["choices"], String::new(), &mut out);
    }
    out
}

#[tokio::test]
async fn a_passed_through_stream_is_redacted_in_every_field_however_its_events_are_written() {
    secrets::register(SECRET);
    let (start, end) = SECRET.split_at(11);
    let choice = |delta: serde_json::Value| json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
    let hostile = [
        // Reasoning and thinking texts, CR-only line ends.
        format!("data: {}\r\r", choice(json!({"reasoning": format!("thinking of {start}")}))),
        format!("data: {}\r\r", choice(json!({"reasoning": format!("{end} now")}))),
        // A key split between two tool calls, CRLF line ends.
        format!(
            "data: {}\r\n\r\n",
            choice(
                json!({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": format!("{{\"a\": \"{start}")}}]})
            )
        ),
        format!(
            "data: {}\r\n\r\n",
            choice(json!({"tool_calls": [{"index": 1, "function": {"name": "g", "arguments": format!("{end}\"}}")}}]}))
        ),
        // Logprobs tokens, the JSON spread over several `data:` lines.
        format!(
            "data: {{\"choices\": [{{\"index\": 0,\ndata: \"delta\": {{}}, \"logprobs\": {{\"content\": [{{\"token\": \"{start}\", \"bytes\": []}}]}}}}]}}\n\n"
        ),
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {}, "logprobs": {"content": [{"token": end}]}}]})
        ),
        format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
        "data: [DONE]\n\n".to_owned(),
    ];
    let (send, events) = mpsc::unbounded_channel::<Sent>();
    let (url, _) = streaming_backend(events).await;
    let h = proxy_over(url).await;
    let ask = json!({"model": "fake/m", "messages": [{"role": "user", "content": "Hi"}], "stream": true});
    let res = h.app.clone().oneshot(request("POST", "/v1/chat/completions", Some(&ask))).await.unwrap();
    assert_eq!(res.status(), 200);
    for event in hostile {
        send.send(Ok(Bytes::from(event))).unwrap();
    }
    drop(send);
    let body = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap();
    let body = String::from_utf8(body.to_vec()).unwrap();
    assert!(!body.contains(SECRET), "{body}");
    let texts = rebuilt_texts(&body);
    for (path, text) in &texts {
        assert!(!text.contains(SECRET), "{path}: {text}\n{body}");
    }
    assert_eq!(texts["/*/delta/reasoning"], "thinking of [redacted] now", "{body}");
    assert_eq!(texts["/*/delta/tool_calls/*/function/arguments"], "{\"a\": \"[redacted]\"}", "{body}");
    assert_eq!(texts["/*/logprobs/content/*/token"], "[redacted]", "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
}

#[tokio::test]
async fn a_passed_through_answer_is_redacted_across_its_content_parts() {
    secrets::register(SECRET);
    let (start, end) = SECRET.split_at(11);
    let answer = json!({"id": "c", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": [{"type": "text", "text": format!("key {start}")}, {"type": "text", "text": format!("{end}.")}]}}]});
    let h = harness(vec![Reply::new(200).set_body_json(answer)]).await;
    let ask = json!({"model": "fake/m", "messages": [{"role": "user", "content": "Hi"}]});
    let res = h.call("POST", "/v1/chat/completions", Some(ask)).await;
    assert_eq!(res.status, 200, "{}", res.text);
    let parts = res.json["choices"][0]["message"]["content"].as_array().unwrap();
    let text: String = parts.iter().filter_map(|p| p["text"].as_str()).collect();
    assert_eq!(text, "key [redacted].", "{}", res.text);
}
