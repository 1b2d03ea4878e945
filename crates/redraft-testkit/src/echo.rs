//! A hostile OpenAI-compatible server that repeats the credentials it was sent: every answer —
//! an error or a completion — holds the request's `Authorization` header, as a careless
//! gateway's error page or a model that was shown its key would. What it answers is chosen by
//! the last user message, so that every face can ask for each case:
//!
//! - it contains `status 400` (or `status 500`): that status, with an OpenAI-style error body
//!   whose message repeats the header;
//! - otherwise: a completion whose content is `{"city": "<the header>"}` (as server-sent events
//!   when the request asks to stream).

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// A server on 127.0.0.1 that echoes the `Authorization` header it receives.
#[derive(Debug)]
pub struct EchoingOpenAi {
    server: MockServer,
}

impl EchoingOpenAi {
    /// Start the server.
    pub async fn start() -> Self {
        let server = MockServer::start().await;
        Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(answer).mount(&server).await;
        Self { server }
    }

    /// The base URL, as `OPENAI_BASE_URL` holds it (ends in `/v1`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// How many requests were received.
    pub async fn calls(&self) -> usize {
        self.server.received_requests().await.map_or(0, |r| r.len())
    }

    /// The bodies received, in order, as sent (to check what a model server was shown).
    pub async fn bodies(&self) -> Vec<String> {
        let requests = self.server.received_requests().await.unwrap_or_default();
        requests.iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect()
    }

    /// The `Authorization` headers received, in order (to check the key was sent at all).
    pub async fn authorizations(&self) -> Vec<String> {
        let requests = self.server.received_requests().await.unwrap_or_default();
        requests.iter().map(authorization).collect()
    }
}

fn authorization(request: &Request) -> String {
    request.headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("(none)").to_owned()
}

fn answer(request: &Request) -> ResponseTemplate {
    let auth = authorization(request);
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let prompt = crate::last_user_message(&body);
    for code in [400, 500] {
        if prompt.contains(&format!("status {code}")) {
            return ResponseTemplate::new(code).set_body_json(json!({
                "error": {"message": format!("invalid request; you sent `Authorization: {auth}`"), "type": "invalid_request_error"}
            }));
        }
    }
    let content = json!({"city": auth}).to_string();
    if body["stream"] == json!(true) {
        let chunk = |delta: Value, finish: Value| json!({"id": "chatcmpl-echo", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        let events = [
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            chunk(json!({"content": content}), Value::Null),
            chunk(json!({}), json!("stop")),
        ];
        let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        text.push_str("data: [DONE]\n\n");
        return ResponseTemplate::new(200).set_body_raw(text, "text/event-stream");
    }
    crate::reply(&content)
}
