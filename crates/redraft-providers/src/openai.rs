//! `openai/MODEL`: the chat completions API, as spoken by OpenAI, vLLM, llama.cpp's
//! server, Ollama's OpenAI endpoint, LM Studio, OpenRouter and others.

use std::time::Duration;

use crate::http;
use redraft_core::{ChatProvider, ChatRequest, ChatResponse, FinishReason, Forwarded, ProviderError, Role, Usage};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

/// Where and how to reach an OpenAI-compatible server.
#[derive(Clone, PartialEq)]
pub struct OpenAiConfig {
    /// The `provider/model` name users wrote (for messages and prices).
    pub name: String,
    /// The model name sent to the server.
    pub model: String,
    /// Base URL up to and including `/v1`. By default, `$OPENAI_BASE_URL`, else OpenAI's.
    pub base_url: String,
    /// The API key, when one is needed (local servers usually need none).
    pub api_key: Option<String>,
    /// The variable the key came from (named in errors, never the key itself).
    pub api_key_env: String,
    /// Bound on one HTTP request. By default, 120 s.
    pub request_timeout: Duration,
    /// The largest answer read, in bytes; a longer one is [`ProviderError::ResponseTooLarge`].
    /// By default, [`crate::DEFAULT_MAX_RESPONSE_BYTES`] (4 MiB).
    pub max_response_bytes: usize,
    /// Also send the request's schema as `response_format` (constrained decoding). A server
    /// that refuses it (HTTP 400/422 on the request with it, success without) is asked without
    /// it from then on, in this process. By default, `false`.
    pub native_response_format: bool,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("request_timeout", &self.request_timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("native_response_format", &self.native_response_format)
            .finish()
    }
}

/// The servers (base URL and model) that refused `response_format`, in this process.
fn refused_native() -> &'static std::sync::Mutex<std::collections::HashSet<String>> {
    static REFUSED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<String>>> =
        std::sync::OnceLock::new();
    REFUSED.get_or_init(Default::default)
}

/// The default base URL when neither config nor `OPENAI_BASE_URL` names one.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// An OpenAI-compatible chat completions client.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    url: String,
    client: reqwest::Client,
}

impl OpenAiProvider {
    /// A client for `config`.
    /// A provider for `config`. Its API key (and a password in its `base_url`) become known
    /// secrets ([`redraft_core::secrets`]), never written out.
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        crate::http::register_credentials(config.api_key.as_deref(), &config.base_url);
        let client = http::client(config.request_timeout)?;
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        Ok(Self { config, url, client })
    }

    /// Whether this request goes with the schema as `response_format`.
    fn native(&self, request: &ChatRequest) -> bool {
        self.config.native_response_format
            && request.schema.is_some()
            && request.tool.is_none()
            && !refused_native().lock().map(|r| r.contains(&self.native_key())).unwrap_or(false)
    }

    fn native_key(&self) -> String {
        format!("{} {}", self.url, self.config.model)
    }

    fn body(&self, request: &ChatRequest, native: bool) -> Value {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    Role::System => "system",
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                json!({"role": role, "content": m.content})
            })
            .collect();
        let mut body = json!({"model": self.config.model, "messages": messages});
        if let Some(t) = request.temperature {
            body["temperature"] = http::temperature(t);
        }
        if let Some(m) = request.max_tokens {
            body["max_tokens"] = json!(m);
        }
        // The backend's own parameters, as the user set them (none is one redraft sets: those
        // are refused before a run starts).
        if let Some(object) = body.as_object_mut() {
            for (name, value) in request.parameters.iter() {
                object.entry(name.clone()).or_insert_with(|| value.clone());
            }
        }
        if native && let Some(schema) = &request.schema {
            body["response_format"] =
                json!({"type": "json_schema", "json_schema": {"name": "answer", "schema": schema.as_ref()}});
        }
        if let Some(tool) = &request.tool {
            let mut function = json!({"name": tool.name, "parameters": tool.parameters});
            if let Some(d) = &tool.description {
                function["description"] = json!(d);
            }
            if tool.strict {
                function["strict"] = json!(true);
            }
            body["tools"] = json!([{"type": "function", "function": function}]);
            body["tool_choice"] = json!({"type": "function", "function": {"name": tool.name}});
        }
        body
    }

    /// POST `body` and read the JSON answer (an error status is an error).
    async fn post(&self, body: &Value) -> Result<Value, ProviderError> {
        let mut http = http::post_json(&self.client, &self.url, body);
        if let Some(key) = &self.config.api_key {
            http = http.bearer_auth(key);
        }
        let response = http.send().await.map_err(|e| self.transport_error(&e))?;
        let answer = http::read_bounded(&self.url, response, self.config.max_response_bytes).await?;
        if !answer.status.is_success() {
            return Err(self.status_error(answer.status, &answer.headers, &answer.text()));
        }
        http::parse_json(&self.url, &answer.body)
    }

    /// POST `body` and, once the server answers with a success, hand over its body as it
    /// streams in (an error status is an error, read whole; a server that answers JSON instead
    /// of events did not stream: its answer is read whole).
    async fn post_streamed(&self, body: &Value) -> Result<Forwarded, ProviderError> {
        let mut http = http::post_json(&self.client, &self.url, body);
        if let Some(key) = &self.config.api_key {
            http = http.bearer_auth(key);
        }
        let response = http.send().await.map_err(|e| self.transport_error(&e))?;
        if !response.status().is_success() {
            let answer = http::read_bounded(&self.url, response, self.config.max_response_bytes).await?;
            return Err(self.status_error(answer.status, &answer.headers, &answer.text()));
        }
        let kind = response.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
        if kind.is_some_and(|k| k.trim_start().to_ascii_lowercase().starts_with("text/event-stream")) {
            return Ok(Forwarded::Events(Box::new(http::EventBody::new(&self.url, response))));
        }
        let answer = http::read_bounded(&self.url, response, self.config.max_response_bytes).await?;
        let answer = http::parse_json(&self.url, &answer.body)?;
        self.completion(answer).map(Forwarded::Whole)
    }

    /// `GET /models`: the ids of `data`.
    async fn models(&self) -> Result<Vec<String>, ProviderError> {
        let url = format!("{}/models", self.config.base_url.trim_end_matches('/'));
        let mut http = self.client.get(&url);
        if let Some(key) = &self.config.api_key {
            http = http.bearer_auth(key);
        }
        let response = http.send().await.map_err(|e| http::transport_error(&url, &e))?;
        let answer = http::read_bounded(&url, response, self.config.max_response_bytes).await?;
        if !answer.status.is_success() {
            return Err(self.status_error(answer.status, &answer.headers, &answer.text()));
        }
        let list = http::parse_json(&url, &answer.body)?;
        let ids = list["data"]
            .as_array()
            .map(|models| models.iter().filter_map(|m| m["id"].as_str()).map(str::to_owned).collect::<Vec<_>>());
        ids.ok_or_else(|| ProviderError::InvalidResponse { url, message: "the list has no `data` array".into() })
    }

    /// A whole chat completion, as long as it has a first choice.
    fn completion(&self, answer: Value) -> Result<Value, ProviderError> {
        if answer.pointer("/choices/0").is_some() {
            Ok(answer)
        } else {
            Err(ProviderError::InvalidResponse {
                url: self.url.clone(),
                message: "the answer has no `choices[0]`".into(),
            })
        }
    }

    fn transport_error(&self, e: &reqwest::Error) -> ProviderError {
        http::transport_error(&self.url, e)
    }

    fn status_error(&self, status: StatusCode, headers: &HeaderMap, body: &str) -> ProviderError {
        let url = self.url.clone();
        match status.as_u16() {
            429 => ProviderError::RateLimited { url, retry_after: retry_after(headers) },
            401 | 403 => {
                ProviderError::Unauthorized { url, status: status.as_u16(), key_env: self.config.api_key_env.clone() }
            }
            code => ProviderError::Status { url, status: code, body: http::error_summary(body).into() },
        }
    }
}

/// `Retry-After` (seconds) or `retry-after-ms`, as servers send them.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    get("retry-after")
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// Read a chat completions answer leniently: compatible servers differ in details. With
/// `tool`, the arguments of the answer's call of that function (else of its first call) are
/// the text; without a call, the content is.
pub fn parse_completion(body: &Value, tool: Option<&str>) -> Result<ChatResponse, String> {
    let choice = body.pointer("/choices/0").ok_or("the answer has no `choices[0]`")?;
    let content = choice.pointer("/message/content").or_else(|| choice.get("text"));
    let calls = choice.pointer("/message/tool_calls").and_then(Value::as_array).filter(|_| tool.is_some());
    let call = calls.and_then(|calls| {
        let name = |c: &&Value| c.pointer("/function/name").and_then(Value::as_str) == tool;
        calls.iter().find(name).or_else(|| calls.first())
    });
    let arguments = call.and_then(|c| c.pointer("/function/arguments"));
    let text = match arguments.or(content) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect(),
        Some(Value::Null) | None => String::new(),
        // Some servers send the arguments as an object instead of its JSON text.
        Some(other) if arguments.is_some() => other.to_string(),
        Some(other) => return Err(format!("`choices[0].message.content` is not text: {other}")),
    };
    let finish_reason =
        choice.get("finish_reason").and_then(Value::as_str).filter(|s| !s.is_empty()).map(FinishReason::parse);
    let usage = body.get("usage").and_then(|u| {
        let input = u.get("prompt_tokens").or_else(|| u.get("input_tokens")).and_then(Value::as_u64)?;
        let output = u.get("completion_tokens").or_else(|| u.get("output_tokens")).and_then(Value::as_u64)?;
        Some(Usage { input_tokens: input, output_tokens: output })
    });
    let served_model = body.get("model").and_then(Value::as_str).filter(|m| !m.is_empty()).map(str::to_owned);
    Ok(ChatResponse { text, usage, finish_reason, cost_usd: None, served_model })
}

#[async_trait::async_trait]
impl ChatProvider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.config.name
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let native = self.native(request);
        let body = match self.post(&self.body(request, native)).await {
            Err(ProviderError::Status { status: 400 | 422, body: why, .. }) if native => {
                // Refused with the schema: ask again without; if that is answered, the server
                // cannot take it, and is not sent it again.
                let body = self.post(&self.body(request, false)).await?;
                if let Ok(mut refused) = refused_native().lock() {
                    refused.insert(self.native_key());
                }
                tracing::warn!(
                    model = %self.config.name,
                    "the server refused the schema as `response_format` ({why}); asking without it (`native_response_format`)"
                );
                body
            }
            other => other?,
        };
        parse_completion(&body, request.tool.as_ref().map(|t| t.name.as_str()))
            .map_err(|message| ProviderError::InvalidResponse { url: self.url.clone(), message: message.into() })
    }

    async fn forward(&self, mut body: Value) -> Option<Result<Value, ProviderError>> {
        body["model"] = json!(self.config.model);
        Some(self.post(&body).await.and_then(|answer| self.completion(answer)))
    }

    async fn list_models(&self) -> Option<Result<Vec<String>, ProviderError>> {
        Some(self.models().await)
    }

    fn refused_parameter(&self, _name: &str) -> Option<String> {
        // Sent as they are: OpenAI-compatible servers take OpenAI's parameters and their own.
        None
    }

    async fn forward_stream(&self, mut body: Value) -> Option<Result<Forwarded, ProviderError>> {
        body["model"] = json!(self.config.model);
        body["stream"] = json!(true);
        Some(self.post_streamed(&body).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_compatible_answers() {
        let r = parse_completion(
            &json!({
                "choices": [{"message": {"role": "assistant", "content": "{\"a\":1}"}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 3}
            }),
            None,
        )
        .unwrap();
        assert_eq!(r.text, "{\"a\":1}");
        assert_eq!(r.finish_reason, Some(FinishReason::Length));
        assert_eq!(r.usage, Some(Usage { input_tokens: 12, output_tokens: 3 }));

        let r =
            parse_completion(&json!({"choices": [{"message": {"content": null}, "finish_reason": ""}]}), None).unwrap();
        assert_eq!(r.text, "");
        assert_eq!(r.finish_reason, None);
        assert_eq!(r.usage, None);

        let parts = json!({"choices": [{"message": {"content": [{"type": "text", "text": "ab"}, {"type": "text", "text": "c"}]}}]});
        assert_eq!(parse_completion(&parts, None).unwrap().text, "abc");
        assert!(parse_completion(&json!({"choices": []}), None).is_err());
    }

    #[test]
    fn a_forced_calls_arguments_are_the_text() {
        let answer = json!({"choices": [{"message": {"content": "Calling it.", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "other", "arguments": "{\"x\":1}"}},
            {"id": "b", "type": "function", "function": {"name": "place", "arguments": "{\"city\":\"Toledo\"}"}}
        ]}, "finish_reason": "tool_calls"}]});
        assert_eq!(parse_completion(&answer, Some("place")).unwrap().text, r#"{"city":"Toledo"}"#);
        assert_eq!(parse_completion(&answer, Some("missing")).unwrap().text, r#"{"x":1}"#, "else the first call");
        assert_eq!(parse_completion(&answer, None).unwrap().text, "Calling it.", "no tool asked: the content");
        let object = json!({"choices": [{"message": {"tool_calls": [{"function": {"name": "place", "arguments": {"city": "A"}}}]}}]});
        assert_eq!(parse_completion(&object, Some("place")).unwrap().text, r#"{"city":"A"}"#);
        let none = json!({"choices": [{"message": {"content": "no call"}}]});
        assert_eq!(parse_completion(&none, Some("place")).unwrap().text, "no call");
    }

    #[test]
    fn reads_retry_after_headers() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "1500".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn error_bodies_are_summarised() {
        assert_eq!(http::error_summary(r#"{"error": {"message": "model not found"}}"#), "model not found");
        assert_eq!(http::error_summary("plain"), "plain");
        assert!(http::error_summary(&"x".repeat(1000)).ends_with('…'));
    }
}
