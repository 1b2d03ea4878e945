//! A fake of Ollama's native chat API on `127.0.0.1:0`: `POST /api/chat` (not streamed)
//! answered from a script, reply by reply, in Ollama's wire format. Strict: a call beyond the
//! script gets HTTP 500 `{"error": "unexpected call: …"}`, which fails the run under test visibly.

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use crate::scripted::ScriptedServer;

/// A scripted Ollama server.
#[derive(Debug)]
pub struct FakeOllama {
    server: ScriptedServer,
}

impl FakeOllama {
    /// Start a server that answers `POST /api/chat` with `replies` in order.
    pub async fn start(replies: Vec<ResponseTemplate>) -> Self {
        let exhausted = error(500, "unexpected call: the script is exhausted");
        Self { server: ScriptedServer::start("/api/chat", replies, exhausted).await }
    }

    /// The base URL (`http://127.0.0.1:PORT`, without `/api`).
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
}

/// An `/api/chat` answer body with `content`, `done_reason: "stop"`, 100 prompt and 20 eval tokens.
pub fn chat_body(content: &str) -> Value {
    chat_value(content, "stop", Some((100, 20)))
}

fn chat(content: &str, done_reason: &str, counts: Option<(u64, u64)>) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(chat_value(content, done_reason, counts))
}

fn chat_value(content: &str, done_reason: &str, counts: Option<(u64, u64)>) -> Value {
    let mut body = json!({
        "model": "fake",
        "created_at": "2025-01-01T00:00:00.000000Z",
        "message": {"role": "assistant", "content": content},
        "done_reason": done_reason,
        "done": true,
        "total_duration": 1_000_000,
        "load_duration": 100_000
    });
    if let Some((prompt, eval)) = counts {
        body["prompt_eval_count"] = json!(prompt);
        body["prompt_eval_duration"] = json!(200_000);
        body["eval_count"] = json!(eval);
        body["eval_duration"] = json!(700_000);
    }
    body
}

/// A 200 answer with `content`, `done_reason: "stop"`, 100 prompt and 20 eval tokens.
pub fn reply(content: &str) -> ResponseTemplate {
    chat(content, "stop", Some((100, 20)))
}

/// A 200 answer without `prompt_eval_count`/`eval_count`.
pub fn reply_without_counts(content: &str) -> ResponseTemplate {
    chat(content, "stop", None)
}

/// A 200 answer cut off at `num_predict` (`done_reason: "length"`).
pub fn truncated(content: &str) -> ResponseTemplate {
    chat(content, "length", Some((100, 20)))
}

/// A reply that arrives after `delay`.
pub fn slow(content: &str, delay: Duration) -> ResponseTemplate {
    reply(content).set_delay(delay)
}

/// Status `code` with Ollama's error body `{"error": message}`.
pub fn error(code: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(code).set_body_json(json!({"error": message}))
}

/// Status `code` with `{"error": "scripted CODE"}`.
pub fn status(code: u16) -> ResponseTemplate {
    error(code, &format!("scripted {code}"))
}

/// HTTP 404 for a model that was never pulled, as Ollama words it.
pub fn not_found_model() -> ResponseTemplate {
    error(404, "model \"llama3.2\" not found, try pulling it first")
}

/// HTTP 503: Ollama's request queue is full.
pub fn busy() -> ResponseTemplate {
    error(503, "server busy, please try again.  maximum pending requests exceeded")
}

/// A 200 whose body is not an answer.
pub fn malformed() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_string("<html>gateway</html>")
}
