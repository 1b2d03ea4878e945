//! The proposer port: chat messages, requests, responses and the [`ChatProvider`] trait.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Self { role: Role::System, content: content.into() }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self { role: Role::User, content: content.into() }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self { role: Role::Assistant, content: content.into() }
    }
}

/// What a proposer is asked for one attempt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    /// Sampling temperature. By default, the provider's own default.
    pub temperature: Option<f32>,
    /// Upper bound on output tokens. By default, the provider's own default.
    pub max_tokens: Option<u32>,
    /// The attempt this request is for, from 1 (command proposers pass it on).
    pub iteration: u32,
    /// The run's `max_iterations`.
    pub max_iterations: u32,
    /// A function the answer must call: providers with function calling (OpenAI-compatible
    /// servers) are asked for a call of it, and its arguments are the answer's text. Others
    /// ignore it: the prompt already shows the arguments' schema.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "tool_as_is")]
    pub tool: Option<Arc<ToolSpec>>,
    /// The backend's own parameters (`top_p`, `stop`, `seed`, …) as the user set them, in
    /// OpenAI's names: sent as they are to OpenAI-compatible servers, mapped for the others.
    /// Checked beforehand against [`ChatProvider::refused_parameter`]. By default, none.
    #[serde(skip_serializing_if = "no_parameters", serialize_with = "parameters_as_is")]
    pub parameters: Parameters,
    /// The JSON Schema the answer must match, for providers that can constrain decoding to it
    /// (`native_response_format`); the prompt shows it too. `None` for text, or a function call.
    #[serde(skip)]
    pub schema: Option<Arc<serde_json::Value>>,
}

fn no_parameters(parameters: &Parameters) -> bool {
    parameters.is_empty()
}

fn parameters_as_is<S: serde::Serializer>(parameters: &Parameters, s: S) -> Result<S::Ok, S::Error> {
    parameters.as_ref().serialize(s)
}

/// Parameters of a chat request for the backend, shared by a run's every attempt.
pub type Parameters = Arc<serde_json::Map<String, serde_json::Value>>;

/// The request members redraft sets itself: a parameter cannot set them, and the message says
/// what to use instead.
pub fn reserved_parameter(name: &str) -> Option<&'static str> {
    Some(match name {
        "model" => "name the model with `model`",
        "messages" | "prompt" => "the messages are the task's and the loop's",
        "temperature" => "use `temperature`",
        "max_tokens" | "max_completion_tokens" | "max_output_tokens" => "use `max_tokens`",
        "stream" | "stream_options" => "an attempt is read whole",
        "n" => "one answer is checked per attempt",
        "tools" | "tool_choice" | "functions" | "function_call" => {
            "a forced function is the run's `tool`; other tools are for passing a request through"
        }
        "response_format" => "the schema is the run's `schema` (or `kind`)",
        _ => return None,
    })
}

fn tool_as_is<S: serde::Serializer>(tool: &Option<Arc<ToolSpec>>, s: S) -> Result<S::Ok, S::Error> {
    tool.as_deref().serialize(s)
}

/// A function whose call is the answer: the arguments are the artifact, checked against
/// `parameters` (the run's schema) like any other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The function's name.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the arguments.
    pub parameters: serde_json::Value,
    /// OpenAI's strict function calling: the backend is asked to follow `parameters` exactly.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
}

impl ChatRequest {
    /// A request for attempt 1 of 1 with these messages and the provider's defaults.
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            temperature: None,
            max_tokens: None,
            iteration: 1,
            max_iterations: 1,
            tool: None,
            parameters: Parameters::default(),
            schema: None,
        }
    }

    /// The whole conversation as one text, for proposers that take a single prompt: the
    /// last user message when it is the only message, else every message under a role heading.
    pub fn as_prompt(&self) -> String {
        if let [only] = self.messages.as_slice() {
            return only.content.clone();
        }
        let mut out = String::new();
        for m in &self.messages {
            let role = match m.role {
                Role::System => "System",
                Role::User => "User",
                Role::Assistant => "Assistant",
            };
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(&format!("## {role}\n\n{}", m.content));
        }
        out
    }

    /// Characters across all messages (for token estimates).
    pub fn chars(&self) -> usize {
        self.messages.iter().map(|m| m.content.chars().count()).sum()
    }
}

/// Token counts reported by a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Why the proposer stopped producing text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural stop.
    Stop,
    /// Cut off at `max_tokens`.
    Length,
    /// Anything else the provider reported.
    #[serde(untagged)]
    Other(String),
}

impl FinishReason {
    /// Parse a provider's finish reason (`stop`, `length`, `max_tokens`, `end_turn`, …).
    pub fn parse(s: &str) -> Self {
        match s {
            "stop" | "end_turn" | "stop_sequence" | "eos" => FinishReason::Stop,
            "length" | "max_tokens" | "model_length" => FinishReason::Length,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

/// A proposer's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// The text, verbatim.
    pub text: String,
    /// Token usage when the provider reported it.
    pub usage: Option<Usage>,
    pub finish_reason: Option<FinishReason>,
    /// Cost the proposer reported itself (command proposers); otherwise computed from prices.
    pub cost_usd: Option<f64>,
    /// The model the server says answered (`gpt-4o-mini-2024-07-18`), when it says.
    pub served_model: Option<String>,
}

impl ChatResponse {
    /// A response with only text.
    pub fn text(text: impl Into<String>) -> Self {
        Self { text: text.into(), usage: None, finish_reason: None, cost_usd: None, served_model: None }
    }
}

/// A proposer that answers chat requests: an LLM API, a scripted mock, a command.
#[async_trait::async_trait]
pub trait ChatProvider: Send + Sync + fmt::Debug {
    /// The `provider/model` name, as users write it.
    fn name(&self) -> &str;

    /// Answer one request. Transport failures are returned as classified errors; retrying
    /// them is the caller's decision (see [`crate::retry`]).
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError>;

    /// Send an OpenAI chat completions request body as it is, with `model` set to this
    /// provider's model, and return the server's JSON answer: the proxy's pass-through, which
    /// keeps what redraft's own request type has no field for (tools, tool messages, every
    /// sampling parameter). `None` when this provider does not speak that API.
    async fn forward(&self, body: serde_json::Value) -> Option<Result<serde_json::Value, ProviderError>> {
        let _ = body;
        None
    }

    /// [`Self::forward`] with `stream: true`: once the server has accepted the request (an
    /// error status is an error), its answer — server-sent events — read as it arrives, for the
    /// proxy to pass on as it comes (or the whole answer, from a server that does not stream).
    /// `None` when this provider does not speak that API.
    async fn forward_stream(&self, body: serde_json::Value) -> Option<Result<Forwarded, ProviderError>> {
        let _ = body;
        None
    }

    /// The models the provider's server lists (OpenAI's `GET /models`: their ids, as the server
    /// names them). `None` when this provider has no such list.
    async fn list_models(&self) -> Option<Result<Vec<String>, ProviderError>> {
        None
    }

    /// Why this provider cannot take the request parameter `name` (OpenAI's name for it), or
    /// `None` when it sends it on. By default, every parameter is refused: a provider sends on
    /// only what it knows how to.
    fn refused_parameter(&self, name: &str) -> Option<String> {
        Some(format!("`{}` takes no parameter `{name}`", self.name()))
    }
}

/// What a server answered a request to stream.
#[derive(Debug)]
pub enum Forwarded {
    /// Server-sent events, read as they arrive.
    Events(Box<dyn StreamedBody>),
    /// The whole answer at once, from a server that does not stream.
    Whole(serde_json::Value),
}

/// The body of an answer the server streams, read piece by piece as it comes.
#[async_trait::async_trait]
pub trait StreamedBody: Send + fmt::Debug {
    /// The next bytes the server sent, as they came; `None` once it has sent everything. An
    /// error (the connection cut, the time limit reached) ends the body.
    async fn next_bytes(&mut self) -> Result<Option<Vec<u8>>, ProviderError>;
}

/// A proposer failed to answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The server could not be reached.
    #[error("cannot connect to `{url}`: {message}")]
    Connect { url: String, message: String },
    /// The request took too long.
    #[error("the request to `{url}` timed out")]
    Timeout { url: String },
    /// HTTP 429.
    #[error("rate limited by `{url}`{}", retry_after.map(|d| format!(" (retry after {}s)", d.as_secs_f64())).unwrap_or_default())]
    RateLimited { url: String, retry_after: Option<Duration> },
    /// Any other non-success HTTP status. The body is kept [`Redacted`](crate::Redacted): a
    /// server that repeats the request's credentials in its error leaks nothing.
    #[error("`{url}` answered HTTP {status}: {body}")]
    Status { url: String, status: u16, body: crate::Redacted },
    /// HTTP 401/403.
    #[error(
        "`{url}` refused the credentials (HTTP {status})\nhint: check that the API key variable (`{key_env}`) is set and valid"
    )]
    Unauthorized { url: String, status: u16, key_env: String },
    /// The answer could not be understood.
    #[error("`{url}` sent an answer redraft cannot read: {message}")]
    InvalidResponse { url: String, message: crate::Redacted },
    /// The connection broke while the answer was being read: reset, closed before the promised
    /// length, or closed in the middle of the JSON. Transient, like a failure to connect.
    #[error("the answer from `{url}` was cut off: {message}")]
    Cut { url: String, message: String },
    /// The answer is longer than the proposer's `max_response_bytes`; reading stopped there.
    /// Not transient: asking again would get the same answer. The runner ends the attempt with
    /// a `response_too_large` issue instead of halting the run.
    #[error(
        "the answer from `{from}` is larger than the limit of `{limit}` bytes (`max_response_bytes`)\nhint: raise `max_response_bytes` in the provider's `[providers.NAME]` table if answers this long are expected"
    )]
    ResponseTooLarge { from: String, limit: usize },
    /// The server asked to wait (`Retry-After`) longer than the run may wait.
    #[error("{}", wait_too_long(url, *wait, bound))]
    WaitTooLong { url: String, wait: Duration, bound: WaitBound },
    /// A scripted provider has no reply left.
    #[error("the script `{script}` has no reply left for attempt {call} (it holds {len})")]
    ScriptExhausted { script: String, call: usize, len: usize },
    /// The proposer failed in a way that is not about transport (an agent's last lines of
    /// stderr, say: kept [`Redacted`](crate::Redacted)).
    #[error("{message}")]
    Failed { message: crate::Redacted },
}

impl ProviderError {
    /// Whether retrying the same request may succeed: connection errors (also a connection cut
    /// while the answer is read), timeouts, 429, 5xx.
    pub fn is_transient(&self) -> bool {
        match self {
            ProviderError::Connect { .. }
            | ProviderError::Cut { .. }
            | ProviderError::Timeout { .. }
            | ProviderError::RateLimited { .. } => true,
            ProviderError::Status { status, .. } => *status >= 500 || *status == 408,
            _ => false,
        }
    }

    /// The delay the server asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The URL the failed request went to, when there was one.
    pub fn url(&self) -> Option<&str> {
        match self {
            ProviderError::Connect { url, .. }
            | ProviderError::Timeout { url }
            | ProviderError::RateLimited { url, .. }
            | ProviderError::Status { url, .. }
            | ProviderError::Unauthorized { url, .. }
            | ProviderError::InvalidResponse { url, .. }
            | ProviderError::Cut { url, .. }
            | ProviderError::WaitTooLong { url, .. } => Some(url),
            ProviderError::ResponseTooLarge { .. }
            | ProviderError::ScriptExhausted { .. }
            | ProviderError::Failed { .. } => None,
        }
    }
}

/// What a wait asked for by a server was measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitBound {
    /// The time left before the run's `max_wall_time`.
    WallTime { left: Duration },
    /// The retry policy's longest wait, which applies when the run has no `max_wall_time`.
    MaxDelay { max: Duration },
}

fn wait_too_long(url: &str, wait: Duration, bound: &WaitBound) -> String {
    let wait = crate::duration::format(wait);
    match bound {
        WaitBound::WallTime { left } => {
            // Whole seconds: "85s left", not "84.997s left".
            let left = if left.as_secs() > 0 { Duration::from_secs(left.as_secs()) } else { *left };
            format!(
                "the server at `{url}` asked to wait {wait} (Retry-After), more than the {} left of `max_wall_time`\nhint: try again later, or allow a longer `max_wall_time`",
                crate::duration::format(left)
            )
        }
        WaitBound::MaxDelay { max } => format!(
            "the server at `{url}` asked to wait {wait} (Retry-After), longer than redraft waits between retries ({}) when no `max_wall_time` is set\nhint: set a `max_wall_time` long enough to wait (e.g. `--max-wall-time 15m`), or try again later",
            crate::duration::format(*max)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_transient_errors() {
        let url = String::from("http://x");
        assert!(ProviderError::Status { url: url.clone(), status: 503, body: Default::default() }.is_transient());
        assert!(ProviderError::RateLimited { url: url.clone(), retry_after: None }.is_transient());
        assert!(!ProviderError::Status { url: url.clone(), status: 400, body: Default::default() }.is_transient());
        assert!(!ProviderError::Unauthorized { url, status: 401, key_env: "K".into() }.is_transient());
    }

    #[test]
    fn finish_reasons() {
        assert_eq!(FinishReason::parse("length"), FinishReason::Length);
        assert_eq!(FinishReason::parse("max_tokens"), FinishReason::Length);
        assert_eq!(FinishReason::parse("end_turn"), FinishReason::Stop);
        assert_eq!(FinishReason::parse("content_filter"), FinishReason::Other("content_filter".into()));
    }
}
