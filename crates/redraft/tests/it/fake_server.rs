//! A fake OpenAI-compatible server on 127.0.0.1:0, scripted reply by reply. Strict: a call
//! beyond the script is answered 500 with "unexpected call" and fails the test's asserts.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub struct Script(Mutex<VecDeque<ResponseTemplate>>);

impl Respond for Script {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        self.0
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| ResponseTemplate::new(500).set_body_string("unexpected call: the script is exhausted"))
    }
}

/// Start a server that answers `POST /v1/chat/completions` with `replies` in order.
pub async fn serve(replies: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Script(Mutex::new(replies.into())))
        .mount(&server)
        .await;
    server
}

/// The server's base URL, as `OPENAI_BASE_URL` would hold it.
pub fn base_url(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

/// A 200 chat completion with `content` and usage.
pub fn reply(content: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    }))
}

/// A 200 chat completion that reports no usage.
pub fn reply_without_usage(content: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]
    }))
}

pub fn status(code: u16) -> ResponseTemplate {
    ResponseTemplate::new(code).set_body_json(json!({"error": {"message": format!("scripted {code}")}}))
}

pub fn rate_limited(retry_after_secs: u64) -> ResponseTemplate {
    status(429).insert_header("retry-after", retry_after_secs.to_string().as_str())
}

pub fn slow(content: &str, delay: Duration) -> ResponseTemplate {
    reply(content).set_delay(delay)
}

/// The JSON bodies the server received.
pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server.received_requests().await.unwrap_or_default().iter().map(|r| r.body_json().unwrap()).collect()
}

/// The last user message of a received body.
pub fn last_user_message(body: &Value) -> String {
    body["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "user").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned()
}
