//! A fake OpenAI-compatible backend for the client libraries' own request shapes: it answers a
//! conversation wrongly the first time (no assistant or tool message in it yet) and rightly
//! after, in the shape the request asks for — text, a forced function call, or the calls a
//! model would choose — so that whoever retries (redraft, or the library itself) is seen to.
//!
//! The task is always the same person, Yuki Tanaka, 27. Wrong is prose without JSON for text,
//! arguments missing `age` for a call. A function named `get_weather` is called for Osaka; once
//! a conversation holds its result, the answer is text that repeats it.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The right answer, as JSON.
pub const PERSON: &str = r#"{"name": "Yuki Tanaka", "age": 27}"#;
/// A wrong answer in text: no JSON at all.
pub const PROSE: &str = "Sure! Yuki Tanaka is a nurse, twenty-seven years old.";
/// A wrong call's arguments: `age` is missing.
pub const PARTIAL: &str = r#"{"name": "Yuki Tanaka"}"#;

/// The fake server; see the module.
#[derive(Debug)]
pub struct FirstWrong {
    server: MockServer,
    bodies: Arc<Mutex<Vec<Value>>>,
}

struct Answer {
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Respond for Answer {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = request.body_json().unwrap_or(Value::Null);
        if let Ok(mut bodies) = self.bodies.lock() {
            bodies.push(body.clone());
        }
        let message = answer(&body);
        let finish = if message.get("tool_calls").is_some() { "tool_calls" } else { "stop" };
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-first-wrong",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        }))
    }
}

/// The assistant's message for `body`.
fn answer(body: &Value) -> Value {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let first = !messages.iter().any(|m| m["role"] == "assistant" || m["role"] == "tool");
    let tools: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let asked_weather = messages.iter().rev().find(|m| m["role"] == "assistant").is_some_and(|m| {
        m["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c.pointer("/function/name") == Some(&json!("get_weather")))
    });
    if let Some(result) = messages.last().filter(|m| m["role"] == "tool" && asked_weather) {
        return json!({"role": "assistant", "content": format!("The tool said: {}", result["content"])});
    }
    let forced = body.pointer("/tool_choice/function/name").and_then(Value::as_str).map(str::to_owned);
    let chosen = match (&forced, body["tool_choice"].as_str()) {
        (Some(name), _) => vec![name.clone()],
        (None, Some("none")) => Vec::new(),
        _ => tools.clone(),
    };
    if chosen.is_empty() {
        return json!({"role": "assistant", "content": if first { PROSE } else { PERSON }});
    }
    let calls: Vec<Value> = chosen
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let arguments = match name.as_str() {
                "get_weather" => r#"{"city": "Osaka"}"#,
                _ if first => PARTIAL,
                _ => PERSON,
            };
            json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": arguments}})
        })
        .collect();
    json!({"role": "assistant", "content": null, "tool_calls": calls})
}

impl FirstWrong {
    pub async fn start() -> Self {
        let server = MockServer::builder().body_print_limit(wiremock::BodyPrintLimit::Limited(0)).start().await;
        let bodies = Arc::new(Mutex::new(Vec::new()));
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(Answer { bodies: bodies.clone() })
            .mount(&server)
            .await;
        Self { server, bodies }
    }

    /// The base URL, as `OPENAI_BASE_URL` holds it (ends in `/v1`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// The request bodies received so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().map(|b| b.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_wrongly_first_then_rightly_in_the_shape_asked() {
        let ask = json!({"messages": [{"role": "user", "content": "Who?"}]});
        assert_eq!(answer(&ask)["content"], PROSE);
        let again = json!({"messages": [{"role": "user", "content": "Who?"}, {"role": "assistant", "content": PROSE}, {"role": "user", "content": "JSON please"}]});
        assert_eq!(answer(&again)["content"], PERSON);
        let forced = json!({"messages": [{"role": "user", "content": "Who?"}],
                            "tools": [{"type": "function", "function": {"name": "Person"}}, {"type": "function", "function": {"name": "get_weather"}}],
                            "tool_choice": {"type": "function", "function": {"name": "Person"}}});
        let call = &answer(&forced)["tool_calls"][0]["function"];
        assert_eq!((call["name"].as_str(), call["arguments"].as_str()), (Some("Person"), Some(PARTIAL)));
        let weather = json!({"messages": [{"role": "user", "content": "Weather?"}],
                             "tools": [{"type": "function", "function": {"name": "get_weather"}}]});
        assert_eq!(answer(&weather)["tool_calls"][0]["function"]["arguments"], r#"{"city": "Osaka"}"#);
        let called = json!({"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]});
        let result = json!({"messages": [{"role": "user", "content": "Weather?"}, called, {"role": "tool", "content": "sunny"}]});
        assert!(answer(&result)["content"].as_str().unwrap().contains("sunny"));
        // A tool message that reports a validation error is not a result: the call is made again.
        let mut retry = forced.clone();
        retry["messages"] = json!([{"role": "user", "content": "Who?"}, {"role": "assistant", "tool_calls": []}, {"role": "tool", "content": "age missing"}]);
        assert_eq!(answer(&retry)["tool_calls"][0]["function"]["arguments"], PERSON);
    }
}
