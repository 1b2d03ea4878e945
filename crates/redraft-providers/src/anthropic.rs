//! `anthropic/MODEL`: Anthropic's Messages API (`POST {base}/v1/messages`), with the system
//! prompt sent natively, Anthropic's error bodies summarised and its 529 "overloaded" kept
//! transient.

use std::fmt;
use std::time::Duration;

use redraft_core::{ChatProvider, ChatRequest, ChatResponse, FinishReason, ProviderError, Role, Usage};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

use crate::http;
use crate::openai::retry_after;

/// Where and how to reach the Messages API.
#[derive(Clone, PartialEq)]
pub struct AnthropicConfig {
    /// The `provider/model` name users wrote (for messages and prices).
    pub name: String,
    /// The model name sent to the API (`claude-…`).
    pub model: String,
    /// Base URL without `/v1` (as `ANTHROPIC_BASE_URL` holds it). By default, [`DEFAULT_BASE_URL`].
    pub base_url: String,
    /// The API key, sent as `x-api-key` (omitted when `None`: a proxy may add it).
    pub api_key: Option<String>,
    /// The variable the key came from (named in errors, never the key itself).
    pub api_key_env: String,
    /// Bound on one HTTP request.
    pub request_timeout: Duration,
    /// The largest answer read, in bytes; a longer one is [`ProviderError::ResponseTooLarge`].
    /// By default, [`crate::DEFAULT_MAX_RESPONSE_BYTES`] (4 MiB).
    pub max_response_bytes: usize,
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("request_timeout", &self.request_timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

/// Anthropic's public API.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The `anthropic-version` header sent with every request.
pub const API_VERSION: &str = "2023-06-01";

/// `max_tokens` when the request sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A Messages API client.
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    config: AnthropicConfig,
    url: String,
    client: reqwest::Client,
}

impl AnthropicProvider {
    /// A client for `config`.
    /// A provider for `config`. Its API key (and a password in its `base_url`) become known
    /// secrets ([`redraft_core::secrets`]), never written out.
    pub fn new(config: AnthropicConfig) -> Result<Self, ProviderError> {
        crate::http::register_credentials(config.api_key.as_deref(), &config.base_url);
        let client = http::client(config.request_timeout)?;
        let url = format!("{}/v1/messages", config.base_url.trim_end_matches('/'));
        Ok(Self { config, url, client })
    }

    fn status_error(&self, status: StatusCode, headers: &HeaderMap, body: &str) -> ProviderError {
        let url = self.url.clone();
        match status.as_u16() {
            429 => ProviderError::RateLimited { url, retry_after: retry_after(headers) },
            401 | 403 => {
                ProviderError::Unauthorized { url, status: status.as_u16(), key_env: self.config.api_key_env.clone() }
            }
            // 529 (overloaded) is a 5xx: transient.
            code => ProviderError::Status { url, status: code, body: http::error_summary(body).into() },
        }
    }

    fn invalid(&self, message: String) -> ProviderError {
        ProviderError::InvalidResponse { url: self.url.clone(), message: message.into() }
    }
}

/// The Messages API body for `request`: system messages joined into the top-level `system`,
/// consecutive messages of one role merged (the API wants turns to alternate), `max_tokens`
/// always set. Fails when no user message opens the conversation.
fn request_body(model: &str, request: &ChatRequest) -> Result<Value, String> {
    let system: Vec<&str> =
        request.messages.iter().filter(|m| m.role == Role::System).map(|m| m.content.as_str()).collect();
    let mut turns: Vec<(&str, String)> = Vec::new();
    for m in &request.messages {
        let role = match m.role {
            Role::System => continue,
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        match turns.last_mut() {
            Some((last, content)) if *last == role => {
                content.push_str("\n\n");
                content.push_str(&m.content);
            }
            _ => turns.push((role, m.content.clone())),
        }
    }
    match turns.first() {
        Some(("user", _)) => {}
        Some(_) => return Err("the Messages API needs the conversation to open with a user message".into()),
        None => return Err("the Messages API needs at least one user message".into()),
    }
    let messages: Vec<Value> =
        turns.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect();
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
    });
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    body["messages"] = json!(messages);
    if let Some(t) = request.temperature {
        body["temperature"] = http::temperature(t);
    }
    for (name, value) in request.parameters.iter() {
        match name.as_str() {
            "top_p" | "top_k" => body[name] = value.clone(),
            // OpenAI's `stop` is a string or a list of them.
            "stop" => body["stop_sequences"] = if value.is_string() { json!([value]) } else { value.clone() },
            "user" => body["metadata"] = json!({"user_id": value}),
            // Refused before any request (`refused_parameter`).
            _ => {}
        }
    }
    Ok(body)
}

/// The parameters (OpenAI's names) the Messages API takes, mapped by [`request_body`].
const PARAMETERS: [&str; 4] = ["top_p", "top_k", "stop", "user"];

/// Read a Messages API answer: the `text` blocks of `content` concatenated (other blocks,
/// such as `thinking`, skipped), usage from `usage` (cache reads and writes counted as input)
/// and `stop_reason`.
pub fn parse_message(body: &Value) -> Result<ChatResponse, String> {
    if body.get("type").and_then(Value::as_str) == Some("error") {
        return Err(format!("an error instead of a message: {}", http::error_summary(&body.to_string())));
    }
    let blocks = body.get("content").and_then(Value::as_array).ok_or("the answer has no `content` list")?;
    let mut text = String::new();
    for block in blocks {
        if block.get("type").and_then(Value::as_str) == Some("text") {
            let part = block.get("text").and_then(Value::as_str).ok_or("a `text` block has no text")?;
            text.push_str(part);
        }
    }
    let usage = body.get("usage").and_then(|u| {
        let count = |key: &str| u.get(key).and_then(Value::as_u64);
        let input = count("input_tokens")?;
        let output = count("output_tokens")?;
        let cached = count("cache_creation_input_tokens")
            .unwrap_or(0)
            .saturating_add(count("cache_read_input_tokens").unwrap_or(0));
        Some(Usage { input_tokens: input.saturating_add(cached), output_tokens: output })
    });
    let finish_reason =
        body.get("stop_reason").and_then(Value::as_str).filter(|s| !s.is_empty()).map(FinishReason::parse);
    let served_model = body.get("model").and_then(Value::as_str).filter(|m| !m.is_empty()).map(str::to_owned);
    Ok(ChatResponse { text, usage, finish_reason, cost_usd: None, served_model })
}

#[async_trait::async_trait]
impl ChatProvider for AnthropicProvider {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn refused_parameter(&self, name: &str) -> Option<String> {
        (!PARAMETERS.contains(&name)).then(|| {
            format!(
                "Anthropic's Messages API (`{}`) has no parameter `{name}`; it takes {}",
                self.config.name,
                PARAMETERS.join(", ")
            )
        })
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let body = request_body(&self.config.model, request)
            .map_err(|message| ProviderError::Failed { message: format!("{}: {message}", self.config.name).into() })?;
        let mut builder = http::post_json(&self.client, &self.url, &body).header("anthropic-version", API_VERSION);
        if let Some(key) = &self.config.api_key {
            let mut value = HeaderValue::from_str(key).map_err(|_| ProviderError::Failed {
                message: format!("the API key in `{}` is not a valid HTTP header value", self.config.api_key_env)
                    .into(),
            })?;
            value.set_sensitive(true);
            builder = builder.header("x-api-key", value);
        }
        let response = builder.send().await.map_err(|e| http::transport_error(&self.url, &e))?;
        let answer = http::read_bounded(&self.url, response, self.config.max_response_bytes).await?;
        if !answer.status.is_success() {
            return Err(self.status_error(answer.status, &answer.headers, &answer.text()));
        }
        let body = http::parse_json(&self.url, &answer.body)?;
        drop(answer);
        parse_message(&body).map_err(|message| self.invalid(message))
    }
}

#[cfg(test)]
mod tests {
    use redraft_core::Message;

    use super::*;

    fn body(request: &ChatRequest) -> Value {
        request_body("claude-x", request).unwrap()
    }

    #[test]
    fn openais_parameters_are_mapped_and_others_are_refused_by_name() {
        let mut request = ChatRequest::new(vec![Message::user("hi")]);
        let parameters = json!({"top_p": 0.9, "top_k": 40, "stop": "END", "user": "u-1"});
        request.parameters = std::sync::Arc::new(parameters.as_object().unwrap().clone());
        let sent = body(&request);
        assert_eq!((sent["top_p"].as_f64(), sent["top_k"].as_u64()), (Some(0.9), Some(40)));
        assert_eq!((&sent["stop_sequences"], &sent["metadata"]), (&json!(["END"]), &json!({"user_id": "u-1"})));
        let provider = AnthropicProvider::new(AnthropicConfig {
            name: "anthropic/claude-x".into(),
            model: "claude-x".into(),
            base_url: "http://127.0.0.1:9".into(),
            api_key: None,
            api_key_env: "ANTHROPIC_API_KEY".into(),
            request_timeout: Duration::from_secs(5),
            max_response_bytes: 1024,
        })
        .unwrap();
        assert_eq!(provider.refused_parameter("stop"), None);
        let why = provider.refused_parameter("seed").unwrap();
        assert!(why.contains("`seed`") && why.contains("anthropic/claude-x"), "{why}");
    }

    #[test]
    fn system_messages_go_to_the_top_level_field() {
        let request = ChatRequest::new(vec![Message::system("be terse"), Message::user("hi"), Message::system("json")]);
        assert_eq!(
            body(&request),
            json!({
                "model": "claude-x",
                "max_tokens": 4096,
                "system": "be terse\n\njson",
                "messages": [{"role": "user", "content": "hi"}]
            })
        );
        let without = body(&ChatRequest::new(vec![Message::user("hi")]));
        assert!(without.get("system").is_none());
    }

    #[test]
    fn consecutive_messages_of_one_role_are_merged() {
        let request = ChatRequest::new(vec![
            Message::user("a"),
            Message::system("s"),
            Message::user("b"),
            Message::assistant("c"),
            Message::assistant("d"),
            Message::user("e"),
        ]);
        assert_eq!(
            body(&request)["messages"],
            json!([
                {"role": "user", "content": "a\n\nb"},
                {"role": "assistant", "content": "c\n\nd"},
                {"role": "user", "content": "e"}
            ])
        );
    }

    #[test]
    fn the_conversation_must_open_with_a_user_message() {
        let err = request_body("m", &ChatRequest::new(vec![Message::system("s"), Message::assistant("a")]));
        assert!(err.unwrap_err().contains("open with a user message"));
        let err = request_body("m", &ChatRequest::new(vec![Message::system("s")]));
        assert!(err.unwrap_err().contains("at least one user message"));
    }

    #[test]
    fn max_tokens_and_temperature_are_mapped() {
        let mut request = ChatRequest::new(vec![Message::user("hi")]);
        request.max_tokens = Some(512);
        request.temperature = Some(0.2);
        let b = body(&request);
        assert_eq!(b["max_tokens"], json!(512));
        assert_eq!(b["temperature"].to_string(), "0.2");
        assert!(body(&ChatRequest::new(vec![Message::user("hi")])).get("temperature").is_none());
    }

    #[test]
    fn parses_text_blocks_usage_and_stop_reasons() {
        let r = parse_message(&json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "{\"a\":"},
                {"type": "text", "text": "1}"}
            ],
            "stop_reason": "max_tokens", "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 3}
        }))
        .unwrap();
        assert_eq!(r.text, "{\"a\":1}");
        assert_eq!(r.finish_reason, Some(FinishReason::Length));
        assert_eq!(r.usage, Some(Usage { input_tokens: 12, output_tokens: 3 }));
        assert_eq!(r.cost_usd, None);

        for (reason, expected) in [("end_turn", FinishReason::Stop), ("stop_sequence", FinishReason::Stop)] {
            let r = parse_message(&json!({"content": [], "stop_reason": reason})).unwrap();
            assert_eq!(r.finish_reason, Some(expected));
            assert_eq!(r.text, "");
            assert_eq!(r.usage, None);
        }
        let r = parse_message(&json!({"content": [], "stop_reason": "refusal"})).unwrap();
        assert_eq!(r.finish_reason, Some(FinishReason::Other("refusal".into())));
        assert_eq!(parse_message(&json!({"content": [], "stop_reason": null})).unwrap().finish_reason, None);
    }

    #[test]
    fn cache_tokens_count_as_input_and_partial_usage_as_none() {
        let r = parse_message(&json!({"content": [], "usage": {
            "input_tokens": 10, "output_tokens": 2, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000
        }}))
        .unwrap();
        assert_eq!(r.usage, Some(Usage { input_tokens: 1110, output_tokens: 2 }));
        let r = parse_message(&json!({"content": [], "usage": {"input_tokens": 10}})).unwrap();
        assert_eq!(r.usage, None);
    }

    #[test]
    fn malformed_messages_are_refused() {
        assert!(parse_message(&json!({"choices": []})).unwrap_err().contains("`content`"));
        assert!(parse_message(&json!({"content": "text"})).is_err());
        assert!(parse_message(&json!({"content": [{"type": "text", "text": 3}]})).is_err());
        let err = parse_message(&json!({"type": "error", "error": {"type": "api_error", "message": "boom"}}));
        assert_eq!(err.unwrap_err(), "an error instead of a message: api_error: boom");
    }

    #[test]
    fn statuses_are_classified() {
        let provider = AnthropicProvider::new(AnthropicConfig {
            name: "anthropic/claude-x".into(),
            model: "claude-x".into(),
            base_url: "http://127.0.0.1:9/".into(),
            api_key: Some("secret".into()),
            api_key_env: "ANTHROPIC_API_KEY".into(),
            request_timeout: Duration::from_secs(1),
            max_response_bytes: crate::DEFAULT_MAX_RESPONSE_BYTES,
        })
        .unwrap();
        assert_eq!(provider.url, "http://127.0.0.1:9/v1/messages");
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("7"));
        let e = provider.status_error(StatusCode::TOO_MANY_REQUESTS, &headers, "");
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
        let e = provider.status_error(StatusCode::from_u16(529).unwrap(), &HeaderMap::new(), "");
        assert!(e.is_transient());
        let e = provider.status_error(StatusCode::FORBIDDEN, &HeaderMap::new(), "");
        assert!(
            matches!(e, ProviderError::Unauthorized { status: 403, ref key_env, .. } if key_env == "ANTHROPIC_API_KEY")
        );
        let e = provider.status_error(StatusCode::BAD_REQUEST, &HeaderMap::new(), "");
        assert!(!e.is_transient());
    }

    #[test]
    fn the_key_never_shows_in_debug_output() {
        let config = AnthropicConfig {
            name: "n".into(),
            model: "m".into(),
            base_url: DEFAULT_BASE_URL.into(),
            api_key: Some("sk-ant-secret".into()),
            api_key_env: "ANTHROPIC_API_KEY".into(),
            request_timeout: Duration::from_secs(1),
            max_response_bytes: crate::DEFAULT_MAX_RESPONSE_BYTES,
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("sk-ant-secret"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }
}
