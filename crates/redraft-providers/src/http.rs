//! HTTP plumbing shared by the native API adapters (`anthropic`, `ollama`): the client, the
//! classification of transport failures and the summary of error bodies.

use std::time::Duration;

use redraft_core::ProviderError;
use serde_json::Value;

/// An HTTP client bounded by `request_timeout` (10 s to connect).
pub(crate) fn client(request_timeout: Duration) -> Result<reqwest::Client, ProviderError> {
    reqwest::Client::builder()
        .timeout(request_timeout)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| ProviderError::Failed { message: format!("cannot build an HTTP client: {e}") })
}

/// Classify a failure to send a request or to read its answer. A connection cut while the
/// answer is read counts as a connection failure (transient), not as an unreadable answer.
pub(crate) fn transport_error(url: &str, e: &reqwest::Error) -> ProviderError {
    let url = url.to_owned();
    if e.is_timeout() {
        ProviderError::Timeout { url }
    } else if e.is_connect() || e.is_request() || e.is_body() {
        ProviderError::Connect { url, message: root_cause(e) }
    } else {
        ProviderError::InvalidResponse { url, message: root_cause(e) }
    }
}

/// The innermost error's message (`connection refused`, not `error sending request`).
pub(crate) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// At most 300 characters of `text`, trimmed, with `…` when cut.
pub(crate) fn truncate(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// An error body summarised: `overloaded_error: Overloaded` from Anthropic's
/// `{"type":"error","error":{"type":…,"message":…}}`, the message of OpenAI's
/// `{"error":{"message":…}}` or Ollama's `{"error":"…"}`, else the text; cut at 300 characters.
pub(crate) fn error_summary(body: &str) -> String {
    let summary = serde_json::from_str::<Value>(body.trim()).ok().and_then(|v| {
        let error = v.get("error")?;
        if let Some(s) = error.as_str() {
            return Some(s.to_owned());
        }
        let message = error.get("message").and_then(Value::as_str);
        match (error.get("type").and_then(Value::as_str), message) {
            (Some(kind), Some(message)) => Some(format!("{kind}: {message}")),
            (Some(kind), None) => Some(kind.to_owned()),
            (None, message) => message.map(str::to_owned),
        }
    });
    truncate(&summary.unwrap_or_else(|| body.to_owned()))
}

/// A temperature as the shortest decimal that reads back as the same `f32`: `0.2`, not the
/// `0.20000000298023224` a widening cast to `f64` would send.
pub(crate) fn temperature(t: f32) -> Value {
    let shortest = t.to_string().parse::<f64>().unwrap_or(f64::from(t));
    serde_json::Number::from_f64(shortest).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temperatures_are_sent_as_written() {
        assert_eq!(temperature(0.2).to_string(), "0.2");
        assert_eq!(temperature(1.0).to_string(), "1.0");
        assert_eq!(temperature(0.0).to_string(), "0.0");
        assert_eq!(temperature(f32::NAN), Value::Null);
    }

    #[test]
    fn error_bodies_are_summarised() {
        let overloaded = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_summary(overloaded), "overloaded_error: Overloaded");
        assert_eq!(error_summary(r#"{"error":{"message":"no"}}"#), "no");
        assert_eq!(
            error_summary(r#"{"error":"model \"x\" not found, try pulling it first"}"#),
            "model \"x\" not found, try pulling it first"
        );
        assert_eq!(error_summary("<html>bad gateway</html>\n"), "<html>bad gateway</html>");
        assert_eq!(error_summary(r#"{"detail":"nope"}"#), r#"{"detail":"nope"}"#);
        assert!(error_summary(&"x".repeat(1000)).ends_with('…'));
    }

    #[test]
    fn long_texts_are_cut() {
        assert_eq!(truncate("  short \n"), "short");
        let long = truncate(&"é".repeat(400));
        assert_eq!(long.chars().count(), 301);
        assert!(long.ends_with('…'));
    }
}
