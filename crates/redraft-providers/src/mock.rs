//! `mock/NAME`: a strict scripted proposer for tests and demos. It replays replies in order
//! and fails loudly when asked for more than the script holds.
//!
//! A script file is JSON Lines (or one JSON array); each entry is one call's reply:
//!
//! ```text
//! "I think the answer is Toledo."                                  plain text
//! {"text": "{\"city\": \"Toledo\"}", "usage": {"input_tokens": 40, "output_tokens": 9}}
//! {"text": "{\"items\": [1, 2", "finish_reason": "length"}         cut at max_tokens
//! {"error": {"status": 500}}                                       a transport failure
//! {"error": {"status": 429, "retry_after": 2}}                     rate limited
//! {"error": {"status": 500, "delay_ms": 3000}}                     a slow failure
//! {"text": "…", "delay_ms": 3000}                                  a slow reply
//! {"hang": true}                                                   never answers
//! ```

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use redraft_core::{ChatProvider, ChatRequest, ChatResponse, FinishReason, ProviderError, Usage};
use serde::Deserialize;

/// One scripted reply.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum MockReply {
    /// Answer with this text.
    Text(String),
    /// A full answer.
    Answer {
        text: String,
        #[serde(default)]
        usage: Option<Usage>,
        #[serde(default)]
        finish_reason: Option<String>,
        #[serde(default)]
        delay_ms: u64,
    },
    /// Fail as a server would.
    Error { error: MockError },
    /// Never answer (until cancelled).
    Hang { hang: bool },
}

/// A scripted failure.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockError {
    /// HTTP status: 429 is rate limiting, 401/403 refused credentials, others as given.
    pub status: u16,
    /// Seconds, for 429.
    #[serde(default)]
    pub retry_after: Option<f64>,
    #[serde(default)]
    pub body: String,
    /// Milliseconds before the failure arrives. By default, 0.
    #[serde(default)]
    pub delay_ms: u64,
}

/// A script cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    #[error(
        "cannot read the mock script `{path}`: {source}\nhint: `mock/PATH` names a script file of replies (JSON Lines), e.g. `--model mock/examples/replies.jsonl`"
    )]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "line {line} of the mock script `{path}` is not a reply: {message}\nhint: each line is a JSON string, or an object with `text`, `error` or `hang`"
    )]
    Parse { path: PathBuf, line: usize, message: String },
    #[error("the mock script `{path}` holds no replies")]
    Empty { path: PathBuf },
}

/// A strict scripted proposer.
#[derive(Debug)]
pub struct MockProvider {
    name: String,
    script: String,
    replies: Vec<MockReply>,
    calls: Mutex<Vec<ChatRequest>>,
}

impl MockProvider {
    /// A provider named `name` that replays `replies`.
    pub fn new(name: impl Into<String>, replies: Vec<MockReply>) -> Self {
        let name = name.into();
        Self { script: name.clone(), name, replies, calls: Mutex::new(Vec::new()) }
    }

    /// A provider that answers with these texts, in order.
    pub fn texts<S: Into<String>>(name: impl Into<String>, texts: impl IntoIterator<Item = S>) -> Self {
        Self::new(name, texts.into_iter().map(|t| MockReply::Text(t.into())).collect())
    }

    /// Read a script file (JSON Lines, or one JSON array).
    pub fn from_file(name: impl Into<String>, path: &Path) -> Result<Self, ScriptError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ScriptError::Read { path: path.to_owned(), source })?;
        let replies = parse_script(&text).map_err(|(line, message)| ScriptError::Parse {
            path: path.to_owned(),
            line,
            message,
        })?;
        if replies.is_empty() {
            return Err(ScriptError::Empty { path: path.to_owned() });
        }
        let mut provider = Self::new(name, replies);
        provider.script = path.display().to_string();
        Ok(provider)
    }

    /// The requests received so far.
    pub fn calls(&self) -> Vec<ChatRequest> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

/// Parse a script: a JSON array of replies, or one reply per non-empty line.
pub fn parse_script(text: &str) -> Result<Vec<MockReply>, (usize, String)> {
    if text.trim_start().starts_with('[') {
        return serde_json::from_str(text).map_err(|e| (e.line(), e.to_string()));
    }
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| (i + 1, e.to_string())))
        .collect()
}

#[async_trait::async_trait]
impl ChatProvider for MockProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn refused_parameter(&self, _name: &str) -> Option<String> {
        // Replies are scripted: parameters are recorded with the request, nothing else.
        None
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let call = {
            let mut calls = self
                .calls
                .lock()
                .map_err(|_| ProviderError::Failed { message: "the mock's call log is poisoned".into() })?;
            calls.push(request.clone());
            calls.len()
        };
        let url = format!("mock:{}", self.script);
        let reply = self.replies.get(call - 1).ok_or_else(|| ProviderError::ScriptExhausted {
            script: self.script.clone(),
            call,
            len: self.replies.len(),
        })?;
        match reply {
            MockReply::Text(text) => Ok(ChatResponse::text(text.clone())),
            MockReply::Answer { text, usage, finish_reason, delay_ms } => {
                if *delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(*delay_ms)).await;
                }
                Ok(ChatResponse {
                    text: text.clone(),
                    usage: *usage,
                    finish_reason: finish_reason.as_deref().map(FinishReason::parse),
                    cost_usd: None,
                    served_model: None,
                })
            }
            MockReply::Error { error } => Err({
                if error.delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(error.delay_ms)).await;
                }
                match error.status {
                    429 => ProviderError::RateLimited {
                        url,
                        retry_after: error
                            .retry_after
                            .filter(|s| s.is_finite() && *s >= 0.0)
                            .map(Duration::from_secs_f64),
                    },
                    401 | 403 => ProviderError::Unauthorized { url, status: error.status, key_env: "(mock)".into() },
                    status => ProviderError::Status { url, status, body: error.body.clone().into() },
                }
            }),
            MockReply::Hang { .. } => {
                std::future::pending::<()>().await;
                Err(ProviderError::Timeout { url })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ChatRequest {
        ChatRequest::new(vec![redraft_core::Message::user("hi")])
    }

    #[test]
    fn parses_every_reply_form() {
        let script = r#"
"plain"
{"text": "t", "usage": {"input_tokens": 1, "output_tokens": 2}, "finish_reason": "length"}
{"error": {"status": 429, "retry_after": 2}}
{"hang": true}
"#;
        let replies = parse_script(script).unwrap();
        assert_eq!(replies.len(), 4);
        assert_eq!(replies[0], MockReply::Text("plain".into()));
        assert!(matches!(replies[2], MockReply::Error { .. }));
        assert_eq!(parse_script("\"a\"\n{oops}\n").unwrap_err().0, 2);
    }

    #[tokio::test]
    async fn replays_in_order_and_fails_when_exhausted() {
        let p = MockProvider::texts("mock/t", ["one", "two"]);
        assert_eq!(p.complete(&request()).await.unwrap().text, "one");
        assert_eq!(p.complete(&request()).await.unwrap().text, "two");
        let err = p.complete(&request()).await.unwrap_err();
        assert!(matches!(err, ProviderError::ScriptExhausted { call: 3, len: 2, .. }), "{err}");
        assert!(!err.is_transient());
        assert_eq!(p.calls().len(), 3);
    }

    #[tokio::test]
    async fn scripted_errors_are_classified() {
        let p = MockProvider::new(
            "mock/t",
            vec![MockReply::Error {
                error: MockError { status: 429, retry_after: Some(1.0), body: String::new(), delay_ms: 0 },
            }],
        );
        let err = p.complete(&request()).await.unwrap_err();
        assert!(err.is_transient());
        assert_eq!(err.retry_after(), Some(Duration::from_secs(1)));
    }

    #[test]
    fn missing_script_names_the_path() {
        let err = MockProvider::from_file("mock/x", Path::new("/nope/r.jsonl")).unwrap_err().to_string();
        assert!(err.contains("/nope/r.jsonl") && err.contains("hint:"), "{err}");
    }
}
