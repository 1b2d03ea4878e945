//! `http:URL`: an HTTP validator judges the artifact. POST `{kind?, artifact, context}`;
//! 200 passes (the body is the report), 422 rejects with the issues in the body — either
//! `{"issues": [...]}` or a gateway-style `{"error": "...", ...}` — and anything else (another
//! status, a timeout, a refused connection) means the validator broke: `evaluator_error`.
//! Redirects are never followed: a validator that answers 3xx is reported as broken, naming
//! where it pointed, so an allowed URL can never lead somewhere that is not allowed.
//!
//! Its answer is read streaming and bounded ([`MAX_BODY_BYTES`] by default): a rejection whose
//! body is longer (announced or as it streams in) is a broken validator, reading stopped at the
//! limit; of a rejection's issues the first
//! [`MAX_ISSUES_PER_ATTEMPT`](redraft_core::MAX_ISSUES_PER_ATTEMPT) are made, the others counted.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use redraft_core::body::{BoundedBody, Past};
use redraft_core::{BoundedIssues, EvalInput, Evaluator, EvaluatorError, Issue, Severity, Verdict, Work};
use serde_json::{Value, json};

/// The issue code of a rejection that names no code of its own.
pub const HTTP_REJECTED: &str = "http_rejected";

/// The most bytes of a validator's answer read by default: 1 MiB.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How much of an answer that is neither a pass nor a rejection is read: enough for the start
/// of its text, which is all its error shows.
const ERROR_BODY_BYTES: usize = 64 * 1024;

/// An HTTP validator.
#[derive(Debug, Clone)]
pub struct HttpEvaluator {
    url: String,
    kind: Option<String>,
    client: reqwest::Client,
    max_body_bytes: usize,
}

impl HttpEvaluator {
    /// POST to `url`; `kind` is sent along when the run has one. Requests time out after
    /// `timeout`; redirects are not followed.
    pub fn new(url: impl Into<String>, kind: Option<String>, timeout: Duration) -> Result<Self, EvaluatorError> {
        let url = url.into();
        let client = shared_client(timeout).map_err(|e| EvaluatorError::Failed {
            evaluator: format!("http:{url}"),
            message: format!("cannot build an HTTP client: {e}"),
        })?;
        Ok(Self { url, kind, client, max_body_bytes: MAX_BODY_BYTES })
    }

    /// Read at most `bytes` of the validator's answer (a rejection with a longer body is a
    /// broken validator). By default, [`MAX_BODY_BYTES`].
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    fn failed(&self, message: String) -> EvaluatorError {
        EvaluatorError::Failed { evaluator: format!("http:{}", self.url), message }
    }
}

/// A client with `timeout` that follows no redirect, shared in this process: building one
/// loads the system's root certificates, too slow to do for every request a server takes.
fn shared_client(timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    static CLIENTS: OnceLock<Mutex<HashMap<Duration, reqwest::Client>>> = OnceLock::new();
    let mut clients = CLIENTS.get_or_init(Mutex::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(client) = clients.get(&timeout) {
        return Ok(client.clone());
    }
    let client = reqwest::Client::builder().timeout(timeout).redirect(reqwest::redirect::Policy::none()).build()?;
    clients.insert(timeout, client.clone());
    Ok(client)
}

/// Issues from a 422 body: `{"issues": [...]}` (objects or strings), `{"error": "…"}` (with
/// `details`/`errors` lists when present), or, failing both, the body as one issue. Of a list,
/// the first [`MAX_ISSUES_PER_ATTEMPT`](redraft_core::MAX_ISSUES_PER_ATTEMPT) items become
/// issues; the others are counted in a final `too_many_issues` issue.
pub fn issues_from_body(body: &Value, text: &str) -> Vec<Issue> {
    let list = body.get("issues").or_else(|| body.get("errors")).or_else(|| body.get("details"));
    if let Some(Value::Array(items)) = list
        && !items.is_empty()
    {
        let mut issues = BoundedIssues::new();
        let mut items = items.iter();
        for item in items.by_ref() {
            issues.push(issue_from_item(item));
            if issues.is_full() {
                break;
            }
        }
        for item in items {
            issues.count(1, severity_of(item));
        }
        return issues.finish();
    }
    match body.get("error") {
        Some(Value::String(message)) => {
            let path = body.get("path").and_then(Value::as_str).unwrap_or_default();
            let code = body.get("code").and_then(Value::as_str).unwrap_or(HTTP_REJECTED);
            vec![Issue::new(path, code, message.clone())]
        }
        Some(err @ Value::Object(_)) => vec![issue_from_item(err)],
        _ => {
            let text = text.trim();
            let message = if text.is_empty() { "the validator rejected the artifact (HTTP 422)" } else { text };
            vec![Issue::new("", HTTP_REJECTED, message)]
        }
    }
}

fn issue_from_item(item: &Value) -> Issue {
    match item {
        Value::String(message) => Issue::new("", HTTP_REJECTED, message.clone()),
        Value::Object(o) => {
            let text = |keys: &[&str]| keys.iter().find_map(|k| o.get(*k).and_then(Value::as_str)).map(str::to_owned);
            let mut issue = Issue::new(
                text(&["path", "pointer", "field", "loc"]).unwrap_or_default(),
                text(&["code", "type", "keyword"]).unwrap_or_else(|| HTTP_REJECTED.to_owned()),
                text(&["message", "msg", "error", "detail"]).unwrap_or_else(|| item.to_string()),
            );
            issue.severity = severity_of(item);
            issue.expected = o.get("expected").cloned().map(Box::new);
            issue.found = o.get("found").or_else(|| o.get("actual")).cloned().map(Box::new);
            issue
        }
        other => Issue::new("", HTTP_REJECTED, other.to_string()),
    }
}

/// The severity an item of a rejection's list names (`None`: an error).
fn severity_of(item: &Value) -> Option<Severity> {
    match item.get("severity").and_then(Value::as_str) {
        Some("warning") => Some(Severity::Warning),
        Some("info") => Some(Severity::Info),
        _ => None,
    }
}

#[async_trait::async_trait]
impl Evaluator for HttpEvaluator {
    fn name(&self) -> &str {
        "http"
    }

    async fn evaluate(&self, input: EvalInput<'_>) -> Result<Verdict, EvaluatorError> {
        let mut body = json!({"artifact": input.artifact, "context": input.context});
        if let Some(kind) = &self.kind {
            body["kind"] = json!(kind);
        }
        let started = std::time::Instant::now();
        let response = self.client.post(&self.url).json(&body).send().await.map_err(|e| {
            self.failed(if e.is_timeout() { "timed out".to_owned() } else { format!("cannot reach it: {e}") })
        })?;
        let status = response.status().as_u16();
        if response.status().is_redirection() {
            let to =
                response.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok()).unwrap_or("nowhere");
            let (to, _) = redraft_core::prompt::truncate_chars(to, 300);
            return Err(self.failed(format!(
                "answered HTTP {status}, a redirect to `{to}`; redirects are not followed (point the evaluator at the final URL)"
            )));
        }
        let text = self.read(response, status).await?;
        let wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match status {
            200 => Ok(Verdict { wall_ms, ..Verdict::pass() }),
            422 => {
                let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                Ok(Verdict { wall_ms, ..Verdict::from_issues(issues_from_body(&parsed, &text)) })
            }
            other => {
                let (snippet, _) = redraft_core::prompt::truncate_chars(text.trim(), 300);
                Err(self.failed(format!("answered HTTP {other} (expected 200 or 422): {snippet}")))
            }
        }
    }

    /// Calls a server and reads its answer: it computes little.
    fn work(&self) -> Work {
        Work::Wait
    }
}

impl HttpEvaluator {
    /// The answer's body as text, never holding more than `max_body_bytes` of it: a rejection
    /// (422) longer than that, announced or as it streams in, is refused and reading stops; of
    /// a pass only that much is read (its body is not used), of another status the start.
    async fn read(&self, mut response: reqwest::Response, status: u16) -> Result<String, EvaluatorError> {
        let limit = self.max_body_bytes;
        let (keep, past) = match status {
            422 => (limit, Past::Refuse),
            200 => (limit, Past::Cut),
            _ => (limit.min(ERROR_BODY_BYTES), Past::Cut),
        };
        let too_large = |_| {
            self.failed(format!(
                "answered HTTP {status} with a body larger than the limit of {limit} bytes, which was not read: a validator must answer with fewer or shorter issues"
            ))
        };
        let mut body = BoundedBody::new(keep, response.content_length(), past).map_err(too_large)?;
        loop {
            let chunk = response.chunk().await.map_err(|e| {
                self.failed(if e.is_timeout() {
                    "timed out".to_owned()
                } else {
                    format!("cannot read its answer: {e}")
                })
            })?;
            match chunk {
                Some(chunk) if body.push(&chunk).map_err(too_large)? => {}
                _ => break,
            }
        }
        Ok(String::from_utf8_lossy(&body.into_bytes()).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_body_shapes() {
        let issues = issues_from_body(
            &json!({"issues": [{"path": "/city", "code": "city", "message": "wrong city"}, "also this"]}),
            "",
        );
        let got: Vec<(&str, &str, &str)> =
            issues.iter().map(|i| (i.path.as_str(), i.code.as_str(), i.message.as_str())).collect();
        assert_eq!(got, [("/city", "city", "wrong city"), ("", HTTP_REJECTED, "also this")]);

        let issues = issues_from_body(
            &json!({"error": "city 'Louisville' doesn't match contract city 'Toledo'", "code": "rule:city"}),
            "",
        );
        assert_eq!(issues[0].code, "rule:city");
        assert_eq!(issues[0].message, "city 'Louisville' doesn't match contract city 'Toledo'");

        let issues = issues_from_body(
            &json!({"error": "invalid fill", "details": [{"field": "/fills/0", "msg": "unknown worker"}]}),
            "",
        );
        assert_eq!((issues[0].path.as_str(), issues[0].message.as_str()), ("/fills/0", "unknown worker"));

        let issues = issues_from_body(&Value::Null, "plain text reason");
        assert_eq!(issues[0].message, "plain text reason");
    }

    async fn judge(status: u16, body: &str, delay_ms: u64) -> Result<Verdict, EvaluatorError> {
        use wiremock::matchers::{body_partial_json, method};
        let server = wiremock::MockServer::start().await;
        wiremock::Mock::given(method("POST"))
            .and(body_partial_json(json!({"kind": "fill", "artifact": {"a": 1}, "context": {"city": "Toledo"}})))
            .respond_with(
                wiremock::ResponseTemplate::new(status)
                    .set_body_string(body)
                    .set_delay(Duration::from_millis(delay_ms)),
            )
            .mount(&server)
            .await;
        let ev =
            HttpEvaluator::new(format!("{}/check", server.uri()), Some("fill".into()), Duration::from_millis(500))?;
        let context = json!({"city": "Toledo"});
        ev.evaluate(EvalInput {
            artifact: &json!({"a": 1}),
            context: &context,
            iteration: 1,
            cancel: &redraft_core::CancelFlag::new(),
        })
        .await
    }

    /// `ev`'s verdict on `{"a": 1}`.
    async fn verdict_of(ev: &HttpEvaluator) -> Result<Verdict, EvaluatorError> {
        let cancel = redraft_core::CancelFlag::new();
        ev.evaluate(EvalInput { artifact: &json!({"a": 1}), context: &Value::Null, iteration: 1, cancel: &cancel })
            .await
    }

    #[tokio::test]
    async fn a_rejection_larger_than_the_limit_is_not_read() {
        use redraft_testkit::{RawReply, RawServer};
        const BIG: usize = 300_000_000;
        // Announced (refused before its body is read), then chunked (reading stops at the limit).
        for announce in [true, false] {
            let server = RawServer::start(vec![RawReply::huge(422, BIG, announce)]).await.unwrap();
            let ev = HttpEvaluator::new(format!("{}/check", server.uri()), None, Duration::from_secs(60)).unwrap();
            let err = verdict_of(&ev).await.unwrap_err();
            let message = err.to_string();
            assert!(message.contains("HTTP 422") && message.contains("limit of 1048576 bytes"), "{message}");
            assert_eq!(err.to_issue().code, redraft_core::codes::EVALUATOR_ERROR);
            // The fake could not push more than the socket buffers hold before it was dropped.
            assert!(server.streamed_bytes() < BIG / 10, "{} bytes were taken", server.streamed_bytes());
        }
        // A pass is a pass whatever its body; the limit can be set.
        let server = RawServer::start(vec![RawReply::huge(200, BIG, false)]).await.unwrap();
        let ev = HttpEvaluator::new(format!("{}/check", server.uri()), None, Duration::from_secs(60)).unwrap();
        assert!(verdict_of(&ev.max_body_bytes(10)).await.unwrap().passed);
    }

    #[tokio::test]
    async fn of_two_hundred_thousand_issues_the_first_thousand_are_made_and_the_rest_counted() {
        let items: Vec<Value> = (0..200_000).map(|i| json!(i.to_string())).collect();
        let body = json!({"issues": items}).to_string();

        let server = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::method("POST"))
            .respond_with(wiremock::ResponseTemplate::new(422).set_body_string(body))
            .mount(&server)
            .await;
        let ev = HttpEvaluator::new(format!("{}/check", server.uri()), None, Duration::from_secs(60)).unwrap();
        let verdict = verdict_of(&ev.max_body_bytes(4 * MAX_BODY_BYTES)).await.unwrap();
        assert!(!verdict.passed);
        assert_eq!(verdict.issues.len(), redraft_core::MAX_ISSUES_PER_ATTEMPT + 1);
        assert_eq!(verdict.issues[999].message, "999");
        let last = &verdict.issues[1000];
        assert_eq!(last.code, redraft_core::codes::TOO_MANY_ISSUES);
        assert!(last.message.starts_with("199000 more issues were found"), "{}", last.message);
    }

    #[tokio::test]
    async fn statuses_decide_the_verdict() {
        assert!(judge(200, "{\"ok\": true}", 0).await.unwrap().passed);
        let v = judge(422, r#"{"error": "city 'Louisville' doesn't match contract city 'Toledo'"}"#, 0).await.unwrap();
        assert!(!v.passed);
        assert_eq!(v.issues[0].message, "city 'Louisville' doesn't match contract city 'Toledo'");
        let err = judge(500, "boom", 0).await.unwrap_err().to_string();
        assert!(err.contains("HTTP 500") && err.contains("boom"), "{err}");
        let err = judge(200, "{}", 2000).await.unwrap_err().to_string();
        assert!(err.contains("timed out"), "{err}");
        // A redirect is a broken validator, never followed (even to a URL that would pass).
        let server = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::path("/check"))
            .respond_with(wiremock::ResponseTemplate::new(307).insert_header("location", "/elsewhere"))
            .mount(&server)
            .await;
        wiremock::Mock::given(wiremock::matchers::path("/elsewhere"))
            .respond_with(wiremock::ResponseTemplate::new(200))
            .expect(0)
            .mount(&server)
            .await;
        let ev = HttpEvaluator::new(format!("{}/check", server.uri()), None, Duration::from_millis(500)).unwrap();
        let err = ev
            .evaluate(EvalInput {
                artifact: &json!(1),
                context: &Value::Null,
                iteration: 1,
                cancel: &redraft_core::CancelFlag::new(),
            })
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("HTTP 307") && err.contains("`/elsewhere`") && err.contains("not followed"), "{err}");
        server.verify().await;
        // nothing listens there
        let ev = HttpEvaluator::new("http://127.0.0.1:9/nothing", None, Duration::from_millis(500)).unwrap();
        let err = ev
            .evaluate(EvalInput {
                artifact: &json!(1),
                context: &Value::Null,
                iteration: 1,
                cancel: &redraft_core::CancelFlag::new(),
            })
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot reach it"), "{err}");
    }
}
