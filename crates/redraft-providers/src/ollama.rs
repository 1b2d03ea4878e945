//! `ollama/MODEL`: Ollama's native chat API (`POST {host}/api/chat`, not streamed), with
//! `num_predict`/`temperature` as options and Ollama's `{"error": …}` bodies summarised.

use std::net::IpAddr;
use std::time::Duration;

use redraft_core::{ChatProvider, ChatRequest, ChatResponse, FinishReason, ProviderError, Role, Usage};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

use crate::http;
use crate::openai::retry_after;

/// Where to reach an Ollama server.
#[derive(Debug, Clone, PartialEq)]
pub struct OllamaConfig {
    /// The `provider/model` name users wrote (for messages and prices).
    pub name: String,
    /// The model name sent to the server (`llama3.2`, `qwen2.5-coder:7b`, …).
    pub model: String,
    /// Base URL without `/api` (see [`base_url_from_host`] for `OLLAMA_HOST`). By default,
    /// [`DEFAULT_BASE_URL`].
    pub base_url: String,
    /// Bound on one HTTP request (loading a model counts).
    pub request_timeout: Duration,
    /// The largest answer read, in bytes; a longer one is [`ProviderError::ResponseTooLarge`].
    /// By default, [`crate::DEFAULT_MAX_RESPONSE_BYTES`] (4 MiB).
    pub max_response_bytes: usize,
}

/// Where Ollama listens by default.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:11434";

/// Ollama's port, when `OLLAMA_HOST` names none and no scheme.
pub const DEFAULT_PORT: u16 = 11434;

/// The base URL for an `OLLAMA_HOST` value, read as Ollama itself reads it: `http://` when no
/// scheme is given; port 11434 when none is given (80 or 443 with an explicit `http://` or
/// `https://`); an unspecified bind address (`0.0.0.0`, `::`) or an empty host reached at
/// loopback; a path kept (a reverse proxy's prefix); an invalid port replaced by the default.
pub fn base_url_from_host(host: &str) -> String {
    let s = host.trim();
    let (scheme, rest, default_port) = match s.split_once("://") {
        None => (String::from("http"), s, DEFAULT_PORT),
        Some((scheme, rest)) => {
            let scheme = scheme.to_ascii_lowercase();
            let port = match scheme.as_str() {
                "http" => 80,
                "https" => 443,
                _ => DEFAULT_PORT,
            };
            (scheme, rest, port)
        }
    };
    let (hostport, path) = match rest.split_once('/') {
        Some((hostport, path)) => (hostport, path.trim_end_matches('/')),
        None => (rest, ""),
    };
    let (host, port) = split_host_port(hostport);
    let port = port.and_then(|p| p.parse::<u16>().ok()).filter(|p| *p != 0).unwrap_or(default_port);
    let host = match host.parse::<IpAddr>() {
        Ok(ip) if ip.is_unspecified() && ip.is_ipv6() => String::from("[::1]"),
        Ok(ip) if ip.is_unspecified() => String::from("127.0.0.1"),
        Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
        Ok(IpAddr::V4(ip)) => ip.to_string(),
        Err(_) if host.is_empty() => String::from("127.0.0.1"),
        Err(_) => host.to_owned(),
    };
    let mut url = format!("{scheme}://{host}");
    if !matches!((scheme.as_str(), port), ("http", 80) | ("https", 443)) {
        url.push_str(&format!(":{port}"));
    }
    if !path.is_empty() {
        url.push('/');
        url.push_str(path);
    }
    url
}

/// `host:port`, `[v6]:port`, `[v6]`, a bare IPv6 address or a bare host.
fn split_host_port(s: &str) -> (&str, Option<&str>) {
    if let Some(rest) = s.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((host, after)) => (host, after.strip_prefix(':')),
            None => (rest, None),
        };
    }
    match s.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, Some(port)),
        _ => (s, None),
    }
}

/// An Ollama native chat client.
#[derive(Debug, Clone)]
pub struct OllamaProvider {
    config: OllamaConfig,
    url: String,
    client: reqwest::Client,
}

impl OllamaProvider {
    /// A client for `config`. A password in its `base_url` becomes a known secret
    /// ([`redraft_core::secrets`]), never written out.
    pub fn new(config: OllamaConfig) -> Result<Self, ProviderError> {
        http::register_credentials(None, &config.base_url);
        let client = http::client(config.request_timeout)?;
        let url = format!("{}/api/chat", config.base_url.trim_end_matches('/'));
        Ok(Self { config, url, client })
    }

    fn transport_error(&self, e: &reqwest::Error) -> ProviderError {
        match http::transport_error(&self.url, e) {
            ProviderError::Connect { url, message } if e.is_connect() => {
                ProviderError::Connect { url, message: format!("{message} (is `ollama serve` running?)") }
            }
            other => other,
        }
    }

    fn status_error(&self, status: StatusCode, headers: &HeaderMap, body: &str) -> ProviderError {
        let url = self.url.clone();
        match status.as_u16() {
            // Ollama itself does not limit rates, but a proxy in front of it may.
            429 => ProviderError::RateLimited { url, retry_after: retry_after(headers) },
            // No key is configured for Ollama: 401/403 (from a proxy) stay plain statuses.
            // A missing model is a 404: not transient.
            code => ProviderError::Status { url, status: code, body: http::error_summary(body).into() },
        }
    }

    fn invalid(&self, message: String) -> ProviderError {
        ProviderError::InvalidResponse { url: self.url.clone(), message: message.into() }
    }
}

/// The parameters (OpenAI's names) Ollama takes, as options of the same name.
const PARAMETERS: [&str; 7] = ["top_p", "top_k", "min_p", "seed", "stop", "presence_penalty", "frequency_penalty"];

/// The `/api/chat` body for `request`: roles as they are, not streamed, `temperature` and
/// `num_predict` (from `max_tokens`) as options when set.
fn request_body(model: &str, request: &ChatRequest) -> Value {
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
    let mut body = json!({"model": model, "messages": messages, "stream": false});
    let mut options = Map::new();
    if let Some(t) = request.temperature {
        options.insert("temperature".into(), http::temperature(t));
    }
    if let Some(n) = request.max_tokens {
        options.insert("num_predict".into(), json!(n));
    }
    // The sampling options Ollama shares with OpenAI's API, under the same names.
    for (name, value) in request.parameters.iter() {
        let stop = name == "stop" && value.is_string();
        options.insert(name.clone(), if stop { json!([value]) } else { value.clone() });
    }
    if !options.is_empty() {
        body["options"] = Value::Object(options);
    }
    body
}

/// Read an `/api/chat` answer: `message.content`, usage from `prompt_eval_count` and
/// `eval_count` (none unless both are there: Ollama leaves the first out when the prompt was
/// cached) and `done_reason`.
pub fn parse_chat(body: &Value) -> Result<ChatResponse, String> {
    let Some(message) = body.get("message") else {
        return Err(match body.get("error").and_then(Value::as_str) {
            Some(error) => format!("an error instead of an answer: {}", http::truncate(error)),
            None => String::from("the answer has no `message`"),
        });
    };
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => return Err(format!("`message.content` is not text: {}", http::truncate(&other.to_string()))),
    };
    let input = body.get("prompt_eval_count").and_then(Value::as_u64);
    let output = body.get("eval_count").and_then(Value::as_u64);
    let usage = input.zip(output).map(|(input_tokens, output_tokens)| Usage { input_tokens, output_tokens });
    let finish_reason =
        body.get("done_reason").and_then(Value::as_str).filter(|s| !s.is_empty()).map(FinishReason::parse);
    let served_model = body.get("model").and_then(Value::as_str).filter(|m| !m.is_empty()).map(str::to_owned);
    Ok(ChatResponse { text, usage, finish_reason, cost_usd: None, served_model })
}

#[async_trait::async_trait]
impl ChatProvider for OllamaProvider {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn refused_parameter(&self, name: &str) -> Option<String> {
        (!PARAMETERS.contains(&name)).then(|| {
            format!("Ollama (`{}`) has no option `{name}`; it takes {}", self.config.name, PARAMETERS.join(", "))
        })
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let body = request_body(&self.config.model, request);
        let response =
            http::post_json(&self.client, &self.url, &body).send().await.map_err(|e| self.transport_error(&e))?;
        let answer = http::read_bounded(&self.url, response, self.config.max_response_bytes).await?;
        if !answer.status.is_success() {
            return Err(self.status_error(answer.status, &answer.headers, &answer.text()));
        }
        let body = http::parse_json(&self.url, &answer.body)?;
        drop(answer);
        parse_chat(&body).map_err(|message| self.invalid(message))
    }
}

#[cfg(test)]
mod tests {
    use redraft_core::Message;

    use super::*;

    #[test]
    fn hosts_are_read_as_ollama_reads_them() {
        for (host, url) in [
            ("", DEFAULT_BASE_URL),
            ("  ", DEFAULT_BASE_URL),
            ("0.0.0.0", "http://127.0.0.1:11434"),
            ("0.0.0.0:8080", "http://127.0.0.1:8080"),
            (":11435", "http://127.0.0.1:11435"),
            ("localhost", "http://localhost:11434"),
            (" 10.0.0.5 ", "http://10.0.0.5:11434"),
            ("gpu-box:1234", "http://gpu-box:1234"),
            ("gpu-box:notaport", "http://gpu-box:11434"),
            ("gpu-box:", "http://gpu-box:11434"),
            ("http://gpu-box", "http://gpu-box"),
            ("http://gpu-box:11434/", "http://gpu-box:11434"),
            ("https://ollama.example.com/", "https://ollama.example.com"),
            ("https://proxy:8443/ollama/", "https://proxy:8443/ollama"),
            ("HTTP://gpu-box:80", "http://gpu-box"),
            ("[::1]:9000", "http://[::1]:9000"),
            ("[::1]", "http://[::1]:11434"),
            ("::1", "http://[::1]:11434"),
            ("[::]:11434", "http://[::1]:11434"),
            ("http://127.0.0.1:11434", "http://127.0.0.1:11434"),
        ] {
            assert_eq!(base_url_from_host(host), url, "OLLAMA_HOST={host:?}");
        }
    }

    #[test]
    fn openais_sampling_parameters_become_options_and_others_are_refused_by_name() {
        let mut request = ChatRequest::new(vec![Message::user("hi")]);
        let parameters = json!({"top_p": 0.9, "seed": 7, "stop": "END", "frequency_penalty": 0.1});
        request.parameters = std::sync::Arc::new(parameters.as_object().unwrap().clone());
        assert_eq!(
            request_body("m", &request)["options"],
            json!({"top_p": 0.9, "seed": 7, "stop": ["END"], "frequency_penalty": 0.1})
        );
        let provider = OllamaProvider::new(OllamaConfig {
            name: "ollama/m".into(),
            model: "m".into(),
            base_url: DEFAULT_BASE_URL.into(),
            request_timeout: Duration::from_secs(5),
            max_response_bytes: 1024,
        })
        .unwrap();
        assert_eq!(provider.refused_parameter("seed"), None);
        let why = provider.refused_parameter("logit_bias").unwrap();
        assert!(why.contains("`logit_bias`") && why.contains("ollama/m") && why.contains("top_p"), "{why}");
    }

    #[test]
    fn requests_keep_roles_and_map_options() {
        let mut request = ChatRequest::new(vec![Message::system("be terse"), Message::user("hi")]);
        assert_eq!(
            request_body("llama3.2", &request),
            json!({
                "model": "llama3.2",
                "messages": [{"role": "system", "content": "be terse"}, {"role": "user", "content": "hi"}],
                "stream": false
            })
        );
        request.temperature = Some(0.2);
        request.max_tokens = Some(256);
        let body = request_body("llama3.2", &request);
        assert_eq!(body["options"].to_string(), r#"{"temperature":0.2,"num_predict":256}"#);
        request.temperature = None;
        assert_eq!(request_body("m", &request)["options"], json!({"num_predict": 256}));
    }

    #[test]
    fn parses_answers_usage_and_done_reasons() {
        let r = parse_chat(&json!({
            "model": "llama3.2", "created_at": "2025-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": "{\"a\":1}"},
            "done": true, "done_reason": "length",
            "total_duration": 5, "prompt_eval_count": 26, "eval_count": 298
        }))
        .unwrap();
        assert_eq!(r.text, "{\"a\":1}");
        assert_eq!(r.usage, Some(Usage { input_tokens: 26, output_tokens: 298 }));
        assert_eq!(r.finish_reason, Some(FinishReason::Length));
        assert_eq!(r.cost_usd, None);

        let r = parse_chat(
            &json!({"message": {"role": "assistant", "content": "x"}, "done_reason": "stop", "eval_count": 3}),
        )
        .unwrap();
        assert_eq!(r.usage, None);
        assert_eq!(r.finish_reason, Some(FinishReason::Stop));
        let r = parse_chat(&json!({"message": {"role": "assistant", "content": "x"}, "prompt_eval_count": 3})).unwrap();
        assert_eq!(r.usage, None);
        assert_eq!(r.finish_reason, None);
        let r = parse_chat(&json!({"message": {"role": "assistant", "content": "x"}, "done_reason": "load"})).unwrap();
        assert_eq!(r.finish_reason, Some(FinishReason::Other("load".into())));
    }

    #[test]
    fn malformed_answers_are_refused() {
        assert_eq!(parse_chat(&json!({"error": "boom"})).unwrap_err(), "an error instead of an answer: boom");
        assert!(parse_chat(&json!({"choices": []})).unwrap_err().contains("no `message`"));
        assert!(parse_chat(&json!({"message": {"content": 3}})).is_err());
    }

    #[test]
    fn statuses_are_classified() {
        let provider = OllamaProvider::new(OllamaConfig {
            name: "ollama/llama3.2".into(),
            model: "llama3.2".into(),
            base_url: "http://127.0.0.1:9/".into(),
            request_timeout: Duration::from_secs(1),
            max_response_bytes: crate::DEFAULT_MAX_RESPONSE_BYTES,
        })
        .unwrap();
        assert_eq!(provider.url, "http://127.0.0.1:9/api/chat");
        let missing = r#"{"error":"model \"llama3.2\" not found, try pulling it first"}"#;
        let e = provider.status_error(StatusCode::NOT_FOUND, &HeaderMap::new(), missing);
        assert!(!e.is_transient());
        assert!(e.to_string().contains("model \"llama3.2\" not found"), "{e}");
        let e = provider.status_error(StatusCode::SERVICE_UNAVAILABLE, &HeaderMap::new(), r#"{"error":"server busy"}"#);
        assert!(e.is_transient());
        let e = provider.status_error(StatusCode::UNAUTHORIZED, &HeaderMap::new(), "");
        assert!(matches!(e, ProviderError::Status { status: 401, .. }));
    }
}
