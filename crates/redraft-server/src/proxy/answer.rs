//! What the proxy answers with ([`Answer`]): a checked run's artifact or a failed run's error,
//! and how an answer becomes a `chat.completion` or a stream of `chat.completion.chunk` events.

use std::convert::Infallible;
use std::future::{self, Future};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt, stream};
use redraft::core::{HaltReason, RunResult};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::runs::failure_message;

/// Characters per streamed content chunk.
const CHUNK_CHARS: usize = 48;

/// How long a stream whose answer is being made stays quiet, at most: a comment is sent then.
const KEEP_ALIVE: Duration = Duration::from_secs(2);

/// The comment a stream sends while its answer is being made.
const WORKING: &str = "redraft: working";

/// What the proxy answers with, before it is shaped as a completion or a stream.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) id: String,
    pub(super) model: String,
    /// The assistant's message in OpenAI's shape (`content`, `tool_calls`, …).
    pub(super) message: Value,
    pub(super) finish_reason: String,
    pub(super) prompt_tokens: u64,
    pub(super) completion_tokens: u64,
    /// The run, when the answer was checked.
    pub(super) run: Option<Value>,
    /// The backend's whole answer, when it was passed through as it is.
    pub(super) raw: Option<Value>,
    pub(super) headers: HeaderMap,
}

impl Answer {
    /// Answer as a call of `name` whose arguments are the content (the accepted artifact).
    pub(super) fn make_call(&mut self, name: &str, legacy: bool) {
        let arguments = self.message["content"].take();
        let function = json!({"name": name, "arguments": arguments});
        if legacy {
            self.message = json!({"role": "assistant", "content": null, "function_call": function});
            self.finish_reason = "function_call".into();
        } else {
            let id = format!("call_{}", self.id.trim_start_matches("chatcmpl-"));
            self.message = json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": function}]});
            self.finish_reason = "tool_calls".into();
        }
    }
}

/// The `x-redraft-run-id` header.
pub(super) fn run_headers(run_id: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(run_id) {
        headers.insert("x-redraft-run-id", v);
    }
    headers
}

/// A run of the loop, finished: the accepted artifact as the answer, named after the model the
/// backend says answered (else the one asked).
pub(super) fn checked(result: RunResult, model: String) -> Result<Answer, ApiError> {
    let accepted = result.history.iter().rev().find(|a| a.status == redraft::core::AttemptStatus::Accepted);
    let model = accepted.and_then(|a| a.served_model.clone()).unwrap_or(model);
    let run = json!({
        "run_id": result.run_id,
        "attempts": result.iterations,
        "halted_because": result.halted_because,
        "history": result.history.iter().map(|a| a.status.as_str()).collect::<Vec<_>>(),
    });
    let mut headers = run_headers(&result.run_id);
    headers.insert("x-redraft-attempts", HeaderValue::from(result.iterations));
    match (&result.artifact, result.succeeded()) {
        (Some(artifact), true) => Ok(Answer {
            id: format!("chatcmpl-{}", result.run_id),
            model,
            message: json!({"role": "assistant", "content": artifact.to_string()}),
            finish_reason: "stop".into(),
            prompt_tokens: result.metrics.tokens_in,
            completion_tokens: result.metrics.tokens_out,
            run: Some(run),
            raw: None,
            headers,
        }),
        _ => Err(failed(&result, run, headers)),
    }
}

/// A failed run: 422 (502 when the model's server failed), with the run and its headers.
/// OpenAI's clients expose only `error`: it carries the halt reason (`code`), the question a
/// person would be asked (`message`), the run id and the attempts. A 502 comes after redraft's
/// own transport retries, so it tells the client not to retry (`x-should-retry: false`).
fn failed(result: &RunResult, run: Value, mut headers: HeaderMap) -> ApiError {
    let (status, code) = match result.halted_because {
        HaltReason::ProviderError => (StatusCode::BAD_GATEWAY, "provider_error"),
        other => (StatusCode::UNPROCESSABLE_ENTITY, other.as_str()),
    };
    let mut message = match (&result.error, &result.escalation) {
        (Some(error), _) if status == StatusCode::BAD_GATEWAY => {
            format!("the model's server failed: {}", error.message)
        }
        (_, Some(escalation)) if !escalation.question.trim().is_empty() => {
            format!("{}. {}", escalation.summary.trim_end_matches('.'), escalation.question)
        }
        _ => failure_message(result),
    };
    if let Some(best) = result.history.iter().rev().find(|a| !a.issues.is_empty()) {
        let issues: Vec<String> = best
            .issues
            .iter()
            .take(5)
            .map(|i| format!("{} {}: {}", if i.path.is_empty() { "(root)" } else { &i.path }, i.code, i.message))
            .collect();
        message.push_str(&format!("; last issues: {}", issues.join("; ")));
    }
    if status == StatusCode::BAD_GATEWAY {
        headers.insert("x-should-retry", HeaderValue::from_static("false"));
    }
    ApiError::new(status, code, message)
        .with_run_id(result.run_id.clone())
        .with_error_field("attempts", json!(result.iterations))
        .with_error_field("halted_because", json!(result.halted_because))
        .with_extra("redraft", run)
        .with_headers(headers)
}

pub(super) fn created() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn usage(a: &Answer) -> Value {
    json!({"prompt_tokens": a.prompt_tokens, "completion_tokens": a.completion_tokens, "total_tokens": a.prompt_tokens + a.completion_tokens})
}

/// A `chat.completion`.
pub(super) fn completion(answer: Answer) -> Response {
    if let Some(raw) = answer.raw {
        return (answer.headers, Json(raw)).into_response();
    }
    let mut body = json!({
        "id": answer.id,
        "object": "chat.completion",
        "created": created(),
        "model": answer.model,
        "choices": [{
            "index": 0,
            "message": answer.message,
            "finish_reason": answer.finish_reason,
        }],
        "usage": usage(&answer),
    });
    if let Some(run) = &answer.run {
        body["redraft"] = run.clone();
    }
    (answer.headers, Json(body)).into_response()
}

/// `chat.completion.chunk` events, then `data: [DONE]`, at once.
pub(super) fn stream(answer: Answer, include_usage: bool) -> Response {
    let headers = answer.headers.clone();
    (headers, Sse::new(stream::iter(frames(answer, include_usage).into_iter().map(Ok::<_, Infallible>))))
        .into_response()
}

/// A stream whose answer is still being made (the loop's attempts): a comment at once and
/// then every [`KEEP_ALIVE`] while it is made, so that neither the client nor a proxy in
/// between gives up on a quiet connection; then the answer's chunks. An answer that fails ends
/// the stream with an event holding the error in OpenAI's shape (the clients raise it).
pub(super) fn stream_when_ready<F>(answer: F, include_usage: bool, headers: HeaderMap) -> Response
where
    F: Future<Output = Result<Answer, ApiError>> + Send + 'static,
{
    let events = stream::once(answer).flat_map(move |answer| {
        stream::iter(match answer {
            Ok(answer) => frames(answer, include_usage),
            Err(e) => vec![Event::default().data(e.openai().body().to_string())],
        })
    });
    (headers, kept_alive(events)).into_response()
}

/// Server-sent `events` that open at once with a comment and repeat it whenever they stay
/// quiet for [`KEEP_ALIVE`]: a client or a proxy in between never sees an idle connection
/// while an answer is being made.
pub(crate) fn kept_alive(events: impl Stream<Item = Event> + Send + 'static) -> Response {
    let opening = stream::once(future::ready(Event::default().comment(WORKING)));
    let events = opening.chain(events).map(Ok::<_, Infallible>);
    Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text(WORKING)).into_response()
}

/// The answer as `chat.completion.chunk` events, then `data: [DONE]`.
fn frames(answer: Answer, include_usage: bool) -> Vec<Event> {
    let created = created();
    let chunk = |delta: Value, finish_reason: Value| {
        json!({
            "id": answer.id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": answer.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        })
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
    if let Some(text) = answer.message.get("content").and_then(Value::as_str) {
        for piece in pieces(text) {
            events.push(chunk(json!({"content": piece}), Value::Null));
        }
    }
    for (index, call) in answer.message.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let name = call.pointer("/function/name").cloned().unwrap_or(Value::Null);
        let head = json!({"index": index, "id": call.get("id"), "type": "function", "function": {"name": name, "arguments": ""}});
        events.push(chunk(json!({"tool_calls": [head]}), Value::Null));
        let arguments = call.pointer("/function/arguments").and_then(Value::as_str).unwrap_or_default();
        for piece in pieces(arguments) {
            events
                .push(chunk(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}), Value::Null));
        }
    }
    if let Some(call) = answer.message.get("function_call") {
        let name = call.get("name").cloned().unwrap_or(Value::Null);
        events.push(chunk(json!({"function_call": {"name": name, "arguments": ""}}), Value::Null));
        for piece in pieces(call.get("arguments").and_then(Value::as_str).unwrap_or_default()) {
            events.push(chunk(json!({"function_call": {"arguments": piece}}), Value::Null));
        }
    }
    let mut last = chunk(json!({}), json!(answer.finish_reason));
    if let Some(run) = &answer.run {
        last["redraft"] = run.clone();
    }
    events.push(last);
    if include_usage {
        events.push(json!({
            "id": answer.id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": answer.model,
            "choices": [],
            "usage": usage(&answer),
        }));
    }
    let mut frames: Vec<Event> = events.into_iter().map(|e| Event::default().data(e.to_string())).collect();
    frames.push(Event::default().data("[DONE]"));
    frames
}

/// `text` in pieces of at most [`CHUNK_CHARS`] characters, redacted whole first: a known secret
/// is never cut into pieces that the events would pass one by one.
pub(crate) fn pieces(text: &str) -> Vec<String> {
    let text = redraft::core::secrets::redact(text);
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(CHUNK_CHARS).map(|c| c.iter().collect()).collect()
}
