//! A fake of Anthropic's Messages API on `127.0.0.1:0`: `POST /v1/messages` answered from a
//! script, reply by reply, in Anthropic's wire format. Strict: a call beyond the script gets
//! HTTP 500 (an `api_error` saying "unexpected call"), which fails the run under test visibly.

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use crate::scripted::ScriptedServer;

/// A scripted Messages API server.
#[derive(Debug)]
pub struct FakeAnthropic {
    server: ScriptedServer,
}

impl FakeAnthropic {
    /// Start a server that answers `POST /v1/messages` with `replies` in order.
    pub async fn start(replies: Vec<ResponseTemplate>) -> Self {
        let exhausted = error(500, "api_error", "unexpected call: the script is exhausted");
        Self { server: ScriptedServer::start("/v1/messages", replies, exhausted).await }
    }

    /// The base URL, as `ANTHROPIC_BASE_URL` holds it (without `/v1`).
    pub fn base_url(&self) -> String {
        self.server.uri()
    }

    /// The JSON bodies received so far.
    pub async fn bodies(&self) -> Vec<Value> {
        self.server.bodies().await
    }

    /// How many requests were received.
    pub async fn calls(&self) -> usize {
        self.server.calls().await
    }

    /// The value of header `name` in each request received (`None` where it was missing).
    pub async fn headers(&self, name: &str) -> Vec<Option<String>> {
        self.server.headers(name).await
    }
}

/// A Messages API answer body with `text`, stopped at `end_turn`, 100 input and 20 output tokens.
pub fn message_body(text: &str) -> Value {
    message_value(text, "end_turn", Some((100, 20)))
}

fn message(text: &str, stop_reason: &str, usage: Option<(u64, u64)>) -> ResponseTemplate {
    ResponseTemplate::new(200).insert_header("request-id", "req_fake").set_body_json(message_value(
        text,
        stop_reason,
        usage,
    ))
}

fn message_value(text: &str, stop_reason: &str, usage: Option<(u64, u64)>) -> Value {
    let mut body = json!({
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": null
    });
    if let Some((input, output)) = usage {
        body["usage"] = json!({"input_tokens": input, "output_tokens": output});
    }
    body
}

/// A 200 message with `text`, stopped at `end_turn`, reporting 100 input and 20 output tokens.
pub fn reply(text: &str) -> ResponseTemplate {
    message(text, "end_turn", Some((100, 20)))
}

/// A 200 message that reports no usage.
pub fn reply_without_usage(text: &str) -> ResponseTemplate {
    message(text, "end_turn", None)
}

/// A 200 message cut off at `max_tokens`.
pub fn truncated(text: &str) -> ResponseTemplate {
    message(text, "max_tokens", Some((100, 20)))
}

/// A reply that arrives after `delay`.
pub fn slow(text: &str, delay: Duration) -> ResponseTemplate {
    reply(text).set_delay(delay)
}

/// Status `code` with Anthropic's error body: `{"type":"error","error":{"type":…,"message":…}}`.
pub fn error(code: u16, kind: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(code)
        .insert_header("request-id", "req_fake")
        .set_body_json(json!({"type": "error", "error": {"type": kind, "message": message}}))
}

/// Status `code` with the error type Anthropic sends with it (`authentication_error` for
/// 401, `overloaded_error` for 529, …).
pub fn status(code: u16) -> ResponseTemplate {
    let kind = match code {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    error(code, kind, &format!("scripted {code}"))
}

/// HTTP 529: Anthropic is overloaded.
pub fn overloaded() -> ResponseTemplate {
    error(529, "overloaded_error", "Overloaded")
}

/// HTTP 429 with `retry-after` in seconds.
pub fn rate_limited(retry_after_secs: u64) -> ResponseTemplate {
    status(429).insert_header("retry-after", retry_after_secs.to_string().as_str())
}

/// A 200 whose body is not a message.
pub fn malformed() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_string("<html>gateway</html>")
}
