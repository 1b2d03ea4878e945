//! HTTP plumbing shared by the adapters (`openai`, `anthropic`, `ollama`): the client, the
//! bounded reading of answers, the classification of transport failures and the summary of
//! error bodies.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use redraft_core::ProviderError;
use redraft_core::body::{BoundedBody, Past};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value;

/// How much of an error answer's body is read: enough for its message, whatever the limit.
const ERROR_BODY_BYTES: usize = 64 * 1024;

/// Kept-alive connections to one host, at most, once their requests are done. A burst of
/// thousands of runs opens as many connections; keeping them all would hold a descriptor and
/// the buffers of each (a quarter of a gigabyte after 5,000 runs) until they time out.
const IDLE_PER_HOST: usize = 64;

/// Make a provider's credentials known secrets: its API key, and a password in its base URL
/// (which every error message names).
pub(crate) fn register_credentials(api_key: Option<&str>, base_url: &str) {
    if let Some(key) = api_key {
        redraft_core::secrets::register(key);
    }
    redraft_core::secrets::register_url(base_url);
}

/// A POST of `body` to `url`: the one way a request reaches a model server, so that no known
/// secret ([`redraft_core::secrets`]) ever does — a verifier's output fed back, an answer echoed
/// in the conversation, a pass-through body are all redacted here. Headers are the caller's
/// (the API key goes there, untouched).
pub(crate) fn post_json(client: &reqwest::Client, url: &str, body: &Value) -> reqwest::RequestBuilder {
    client.post(url).header(reqwest::header::CONTENT_TYPE, "application/json").body(redacted_json(body))
}

/// `body` serialized, with every known secret in its strings (and keys) replaced.
fn redacted_json(body: &Value) -> Vec<u8> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    if !redraft_core::secrets::contains(&bytes) {
        return bytes;
    }
    let mut body = body.clone();
    redraft_core::secrets::redact_json(&mut body);
    serde_json::to_vec(&body).unwrap_or_default()
}

/// An HTTP client bounded by `request_timeout` (10 s to connect), shared by every provider with
/// that timeout in this process. Building a client loads the system's root certificates (a few
/// hundred files); a server making a provider per request would spend most of its time there,
/// and shared clients also share their pools of kept-alive connections.
pub(crate) fn client(request_timeout: Duration) -> Result<reqwest::Client, ProviderError> {
    static CLIENTS: OnceLock<Mutex<HashMap<Duration, reqwest::Client>>> = OnceLock::new();
    let clients = CLIENTS.get_or_init(Mutex::default);
    let mut clients = clients.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(client) = clients.get(&request_timeout) {
        return Ok(client.clone());
    }
    let client = reqwest::Client::builder()
        .timeout(request_timeout)
        .connect_timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(IDLE_PER_HOST)
        .pool_idle_timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| ProviderError::Failed { message: format!("cannot build an HTTP client: {e}").into() })?;
    clients.insert(request_timeout, client.clone());
    Ok(client)
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
        ProviderError::InvalidResponse { url, message: root_cause(e).into() }
    }
}

/// An answer read with its size bounded.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The body: whole on success; on an error status, at most its first 64 KiB.
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.body)
    }
}

/// Read `response` without ever holding more than `limit` bytes of its body. A success whose
/// body is longer (as announced by `Content-Length`, or as it streams in) is
/// [`ProviderError::ResponseTooLarge`], and reading stops there; an error status keeps only the
/// start of its body, which is all its summary needs. A connection broken while the body is read
/// is [`ProviderError::Cut`] (transient), a body that stops coming is a timeout.
pub(crate) async fn read_bounded(
    url: &str,
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Answer, ProviderError> {
    let status = response.status();
    let headers = response.headers().clone();
    let (keep, past) =
        if status.is_success() { (limit, Past::Refuse) } else { (limit.min(ERROR_BODY_BYTES), Past::Cut) };
    let too_large = |_| ProviderError::ResponseTooLarge { from: url.to_owned(), limit };
    let mut body = BoundedBody::new(keep, response.content_length(), past).map_err(too_large)?;
    while let Some(chunk) = response.chunk().await.map_err(|e| body_error(url, &e))? {
        if !body.push(&chunk).map_err(too_large)? {
            break;
        }
    }
    Ok(Answer { status, headers, body: body.into_bytes() })
}

/// A successful answer's body, handed over piece by piece as the server sends it (server-sent
/// events passed on by the proxy).
#[derive(Debug)]
pub(crate) struct EventBody {
    url: String,
    response: reqwest::Response,
}

impl EventBody {
    pub(crate) fn new(url: &str, response: reqwest::Response) -> Self {
        Self { url: url.to_owned(), response }
    }
}

#[async_trait::async_trait]
impl redraft_core::StreamedBody for EventBody {
    async fn next_bytes(&mut self) -> Result<Option<Vec<u8>>, ProviderError> {
        let chunk = self.response.chunk().await.map_err(|e| body_error(&self.url, &e))?;
        Ok(chunk.map(|bytes| bytes.to_vec()))
    }
}

/// Classify a failure while a body is read: the status line came, so the server was reached;
/// whatever breaks now (reqwest reports it as a decode or body error wrapping hyper's
/// "connection reset" or "end of file before message length reached") cut the answer off.
fn body_error(url: &str, e: &reqwest::Error) -> ProviderError {
    if e.is_timeout() {
        ProviderError::Timeout { url: url.to_owned() }
    } else {
        ProviderError::Cut { url: url.to_owned(), message: root_cause(e) }
    }
}

/// Parse a successful answer's body as JSON. A body that ends in the middle of the JSON was cut
/// off (a close-delimited answer whose connection closed early): that is a transient
/// [`ProviderError::Cut`], unlike a body that is not JSON at all.
pub(crate) fn parse_json(url: &str, body: &[u8]) -> Result<Value, ProviderError> {
    serde_json::from_slice(body).map_err(|e| {
        if e.is_eof() && !body.iter().all(u8::is_ascii_whitespace) {
            ProviderError::Cut { url: url.to_owned(), message: format!("the JSON ends early ({e})") }
        } else {
            ProviderError::InvalidResponse {
                url: url.to_owned(),
                message: format!("not JSON ({e}): {}", error_summary(&String::from_utf8_lossy(body))).into(),
            }
        }
    })
}

/// The innermost error's message (`connection refused`, not `error sending request`).
pub(crate) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// At most 300 characters of `text`, trimmed, with `…` when cut. Known secrets are taken out
/// first: a cut through one would leave its start, which no later redaction recognises.
pub(crate) fn truncate(text: &str) -> String {
    let text = redraft_core::secrets::redact(text);
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
