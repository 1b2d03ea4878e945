//! Fakes for tests, not mocks: fake OpenAI-compatible, Anthropic and Ollama servers on
//! `127.0.0.1:0` that answer from a script, reply by reply, and a raw HTTP server ([`raw`])
//! scripted per connection for broken transports (resets, short bodies) and huge bodies. They
//! are strict: a call beyond the script gets HTTP 500 "unexpected call", which fails the run
//! under test visibly.

pub mod anthropic;
pub mod conversation;
pub mod echo;
pub mod first_wrong;
pub mod hostile;
pub mod ollama;
pub mod processes;
pub mod raw;
mod scripted;

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::ResponseTemplate;

pub use conversation::ByAttempt;
pub use echo::EchoingOpenAi;
pub use first_wrong::FirstWrong;
pub use raw::{RawReply, RawRequest, RawServer};
pub use scripted::ScriptedServer;
pub use wiremock::ResponseTemplate as Reply;

/// A scripted OpenAI-compatible server (`POST /v1/chat/completions`).
#[derive(Debug)]
pub struct FakeOpenAi {
    server: ScriptedServer,
}

impl FakeOpenAi {
    /// Start a server that answers with `replies` in order.
    pub async fn start(replies: Vec<ResponseTemplate>) -> Self {
        let exhausted = ResponseTemplate::new(500).set_body_string("unexpected call: the script is exhausted");
        Self { server: ScriptedServer::start("/v1/chat/completions", replies, exhausted).await }
    }

    /// The base URL, as `OPENAI_BASE_URL` holds it (ends in `/v1`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// The JSON bodies received so far.
    pub async fn bodies(&self) -> Vec<Value> {
        self.server.bodies().await
    }

    /// How many requests were received.
    pub async fn calls(&self) -> usize {
        self.server.calls().await
    }
}

/// A chat completion body with `content`, reporting 100 input and 20 output tokens.
pub fn completion(content: &str) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    })
}

/// A 200 chat completion with `content`, reporting 100 input and 20 output tokens.
pub fn reply(content: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(completion(content))
}

/// A 200 chat completion whose message calls functions: `calls` is OpenAI's `tool_calls`
/// array. Reports 100 input and 20 output tokens.
pub fn tool_calls(calls: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": calls}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    }))
}

/// One call of `name` with `arguments` (JSON text), as an element of `tool_calls`.
pub fn call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

/// A 200 chat completion that reports no usage.
pub fn reply_without_usage(content: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]
    }))
}

/// An error status with an OpenAI-style error body.
pub fn status(code: u16) -> ResponseTemplate {
    ResponseTemplate::new(code).set_body_json(json!({"error": {"message": format!("scripted {code}")}}))
}

/// HTTP 429 with `Retry-After`.
pub fn rate_limited(retry_after_secs: u64) -> ResponseTemplate {
    status(429).insert_header("retry-after", retry_after_secs.to_string().as_str())
}

/// A reply that arrives after `delay`.
pub fn slow(content: &str, delay: Duration) -> ResponseTemplate {
    reply(content).set_delay(delay)
}

/// A 200 whose body is not a chat completion.
pub fn malformed() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_string("<html>gateway</html>")
}

/// The last user message of a received body.
pub fn last_user_message(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Whether `text` is a time as redraft writes them: RFC 3339 in UTC with milliseconds
/// (`2026-11-24T09:15:03.120Z`).
pub fn is_utc_time(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |r: std::ops::Range<usize>| r.clone().all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
    b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z'
}
