//! The proxy's streams: a passed-through stream reaches the client event by event as the
//! backend sends it; a checked run's stream keeps the connection alive while attempts run, then
//! sends the accepted answer, or ends with an error event in OpenAI's shape.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::Response;
use futures_util::StreamExt;
use redraft_testkit::{reply, slow};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tower::ServiceExt;

use crate::{CITY_SCHEMA, Harness, harness, harness_with, request, sse_events};

/// What the streaming backend sends: bytes, or a cut connection.
pub(crate) type Sent = Result<Bytes, std::io::Error>;

/// An OpenAI-compatible backend on 127.0.0.1 whose one streamed answer is written by the test
/// as it goes (what it writes reaches the proxy when it writes it); the request bodies it got.
pub(crate) async fn streaming_backend(events: mpsc::UnboundedReceiver<Sent>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let events = Arc::new(Mutex::new(Some(events)));
    let seen = bodies.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |body: Bytes| {
            let (seen, events) = (seen.clone(), events.clone());
            async move {
                seen.lock().unwrap().push(serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null));
                let events = events.lock().unwrap().take().expect("one streamed answer");
                Response::builder()
                    .header(header::CONTENT_TYPE, "text/event-stream")
                    .body(Body::from_stream(UnboundedReceiverStream::new(events)))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, bodies)
}

/// A proxy whose `fake` provider is `url`.
pub(crate) async fn proxy_over(url: String) -> Harness {
    harness_with(vec![], vec![], move |c| c.providers.get_mut("fake").unwrap().base_url = Some(url)).await
}

pub(crate) fn chunk_event(content: &str) -> String {
    let chunk = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m-2026",
                       "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]});
    format!("data: {chunk}\n\n")
}

/// The next piece of a response body, failing the test if none comes within 20 s (a proxy that
/// holds the backend's events back until the end never sends it: the backend is waiting for it).
pub(crate) async fn next_piece(
    body: &mut (impl futures_util::Stream<Item = Result<Bytes, axum::Error>> + Unpin),
) -> String {
    let piece = tokio::time::timeout(Duration::from_secs(20), body.next()).await;
    let piece = piece.expect("the proxy passed nothing on").expect("the stream ended").unwrap();
    String::from_utf8(piece.to_vec()).unwrap()
}

#[tokio::test]
async fn a_passed_through_stream_reaches_the_client_event_by_event() {
    let (send, events) = mpsc::unbounded_channel::<Sent>();
    let (url, bodies) = streaming_backend(events).await;
    let h = proxy_over(url).await;
    let ask = json!({"model": "fake/m", "messages": [{"role": "user", "content": "Hi"}], "stream": true,
                     "stream_options": {"include_usage": true}, "top_p": 0.5});
    let res = h.app.clone().oneshot(request("POST", "/v1/chat/completions", Some(&ask))).await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/event-stream"));
    let mut body = res.into_body().into_data_stream();

    // Each event is on the client's side before the backend sends the next one.
    send.send(Ok(Bytes::from(chunk_event("Hel")))).unwrap();
    assert_eq!(next_piece(&mut body).await, chunk_event("Hel"));
    send.send(Ok(Bytes::from(chunk_event("lo")))).unwrap();
    assert_eq!(next_piece(&mut body).await, chunk_event("lo"));
    send.send(Ok(Bytes::from_static(b"data: [DONE]\n\n"))).unwrap();
    drop(send);
    let mut rest = String::new();
    while let Some(piece) = body.next().await {
        rest.push_str(std::str::from_utf8(&piece.unwrap()).unwrap());
    }
    assert_eq!(rest, "data: [DONE]\n\n", "the backend's events, as they are (its model name included)");

    // The backend was asked to stream, with the client's own options and parameters.
    let sent = bodies.lock().unwrap()[0].clone();
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
    assert_eq!((sent["model"].as_str(), sent["top_p"].as_f64()), (Some("m"), Some(0.5)));
}

#[tokio::test]
async fn a_passed_through_stream_cut_midway_ends_with_an_error_event() {
    let (send, events) = mpsc::unbounded_channel::<Sent>();
    let (url, _) = streaming_backend(events).await;
    let h = proxy_over(url).await;
    let ask = json!({"model": "fake/m", "messages": [{"role": "user", "content": "Hi"}], "stream": true});
    let res = h.app.clone().oneshot(request("POST", "/v1/chat/completions", Some(&ask))).await.unwrap();
    assert_eq!(res.status(), 200);
    let mut body = res.into_body().into_data_stream();
    send.send(Ok(Bytes::from(chunk_event("Hel")))).unwrap();
    assert_eq!(next_piece(&mut body).await, chunk_event("Hel"));
    // The backend's connection breaks in the middle of the answer.
    send.send(Err(std::io::Error::other("the backend crashed"))).unwrap();
    let mut rest = String::new();
    while let Some(piece) = body.next().await {
        rest.push_str(std::str::from_utf8(&piece.unwrap()).unwrap());
    }
    let events = sse_events(&rest);
    assert_eq!(events.len(), 1, "{rest}");
    let error = &events[0].1["error"];
    assert_eq!(error["type"], "upstream_error", "{rest}");
    assert!(error["message"].as_str().unwrap().contains("127.0.0.1"), "{error}");
    assert!(!rest.contains("[DONE]"), "a cut stream is not a finished one: {rest}");
}

fn checked_stream() -> Value {
    json!({
        "model": "fake/m",
        "messages": [{"role": "user", "content": "Which city?"}],
        "stream": true,
        "stream_options": {"include_usage": true},
        "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": serde_json::from_str::<Value>(CITY_SCHEMA).unwrap()}},
    })
}

/// The comment lines of a stream (`: …`), in order.
fn comments(text: &str) -> Vec<&str> {
    text.lines().filter_map(|l| l.strip_prefix(':')).map(str::trim).collect()
}

#[tokio::test]
async fn a_checked_stream_keeps_the_connection_alive_then_sends_the_accepted_answer() {
    // The first answer is wrong and the second takes 3 s: longer than a keep-alive's interval.
    let h = harness(vec![reply(r#"{"town": "Toledo"}"#), slow(r#"{"city": "Toledo"}"#, Duration::from_secs(3))]).await;
    let res = h.app.clone().oneshot(request("POST", "/v1/chat/completions", Some(&checked_stream()))).await.unwrap();
    assert_eq!(res.status(), 200);
    let run_id = res.headers()["x-redraft-run-id"].to_str().unwrap().to_owned();
    let mut body = res.into_body().into_data_stream();
    // Something at once, before any attempt is done.
    assert!(next_piece(&mut body).await.starts_with(": redraft: working"));
    let mut text = String::new();
    while let Some(piece) = body.next().await {
        text.push_str(std::str::from_utf8(&piece.unwrap()).unwrap());
    }
    let first_data = text.find("data:").unwrap();
    assert!(!comments(&text[..first_data]).is_empty(), "a keep-alive while the second attempt ran: {text}");

    let events = sse_events(&text);
    assert_eq!(events.last().unwrap().1, json!("[DONE]"));
    let chunks: Vec<&Value> = events.iter().map(|(_, d)| d).filter(|d| d.is_object()).collect();
    let content: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(serde_json::from_str::<Value>(&content).unwrap(), json!({"city": "Toledo"}));
    let finish = chunks.iter().find(|c| c["choices"][0]["finish_reason"] == "stop").unwrap();
    assert_eq!(
        (finish["redraft"]["run_id"].as_str(), finish["redraft"]["attempts"].as_u64()),
        (Some(&*run_id), Some(2))
    );
    // `include_usage`: every attempt's tokens.
    assert_eq!(chunks.last().unwrap()["usage"]["total_tokens"], 240);
}

#[tokio::test]
async fn a_checked_stream_that_fails_ends_with_an_error_event_in_openais_shape() {
    let h = harness(vec![reply(r#"{"town": "A"}"#), reply(r#"{"town": "B"}"#), reply(r#"{"town": "C"}"#)]).await;
    let a = h.call("POST", "/v1/chat/completions", Some(checked_stream())).await;
    assert_eq!(a.status, 200, "the stream had started");
    let run_id = a.header("x-redraft-run-id").unwrap();
    assert!(!a.text.contains("[DONE]"), "{}", a.text);
    let events = sse_events(&a.text);
    assert_eq!(events.len(), 1, "no answer, only the error: {}", a.text);
    let error = &events[0].1["error"];
    assert_eq!((error["code"].as_str(), error["type"].as_str()), (Some("max_iterations"), Some("validation_error")));
    assert_eq!((error["run_id"].as_str(), error["attempts"].as_u64()), (Some(run_id), Some(3)));
    assert!(error["message"].as_str().unwrap().contains("city"), "{error}");
    assert_eq!(events[0].1["redraft"]["history"], json!(["rejected", "rejected", "rejected"]));
}

#[tokio::test]
async fn a_stream_refused_before_it_starts_keeps_its_status() {
    // A bad request is refused with its status, not inside a stream.
    let h = harness(vec![]).await;
    let mut ask = checked_stream();
    ask["temperature"] = json!(9);
    let a = h.call("POST", "/v1/chat/completions", Some(ask)).await;
    assert_eq!(a.status, 400, "{}", a.text);
    assert_eq!(a.json["error"]["type"], "invalid_request_error");
    assert_eq!(h.model.calls().await, 0);
}
