//! Known secrets out of every response: the outermost layer of the router, so every route, the
//! fallback and the gate's refusals pass it — JSON answers and errors, the proxy's completions
//! and streams, server-sent events, `/metrics`, the viewer and the API it reads. A whole body
//! is redacted at once; a streamed one piece by piece ([`StreamRedactor`]), a secret split
//! between two pieces included. Server-sent events are redacted event by event, and the text a
//! model streams in a chat completion's chunks ([`EventRedactor`]) as a stream of its own, so a
//! secret streamed token by token is found too. With no secret known a body passes untouched.

use std::borrow::Cow;
use std::collections::HashMap;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures_util::StreamExt;
use redraft::core::secrets::{self, StreamRedactor};
use serde_json::Value;

/// `response` with every known secret ([`redraft::core::secrets`]) in its body and headers
/// replaced with `[redacted]`.
pub(crate) async fn response(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    if secrets::active() {
        for value in parts.headers.values_mut() {
            if let Cow::Owned(redacted) = secrets::redact_bytes(value.as_bytes())
                && let Ok(redacted) = HeaderValue::from_bytes(&redacted)
            {
                *value = redacted;
            }
        }
    }
    if body.size_hint().exact().is_some() {
        if !secrets::active() {
            return Response::from_parts(parts, body);
        }
        // The body is whole (JSON, text): read it at once.
        let bytes = match axum::body::to_bytes(body, usize::MAX).await {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!("cannot read a response body to redact it: {e}");
                parts.headers.remove(header::CONTENT_LENGTH);
                return Response::from_parts(parts, Body::empty());
            }
        };
        return match secrets::redact_bytes(&bytes) {
            Cow::Borrowed(_) => Response::from_parts(parts, Body::from(bytes)),
            Cow::Owned(redacted) => {
                parts.headers.remove(header::CONTENT_LENGTH);
                Response::from_parts(parts, Body::from(redacted))
            }
        };
    }
    // Streamed (server-sent events, a proxied stream): a secret may be registered while it
    // runs, so every stream is watched.
    parts.headers.remove(header::CONTENT_LENGTH);
    let events = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim_start().starts_with("text/event-stream"));
    let redactor =
        if events { Redactor::Events(EventRedactor::default()) } else { Redactor::Bytes(StreamRedactor::new()) };
    Response::from_parts(parts, Body::from_stream(redacted_stream(body, redactor)))
}

/// How a stream is redacted: as bytes, or as server-sent events.
#[derive(Debug)]
enum Redactor {
    Bytes(StreamRedactor),
    Events(EventRedactor),
}

impl Redactor {
    fn push(&mut self, piece: &[u8]) -> Vec<u8> {
        match self {
            Redactor::Bytes(r) => r.push(piece),
            Redactor::Events(r) => r.push(piece),
        }
    }

    fn finish(&mut self) -> Vec<u8> {
        match self {
            Redactor::Bytes(r) => r.finish(),
            Redactor::Events(r) => r.finish(),
        }
    }
}

/// The pieces of `body`, redacted as they come; an empty piece (all of it held back) is not
/// sent.
fn redacted_stream(
    body: Body,
    redactor: Redactor,
) -> impl futures_util::Stream<Item = Result<Bytes, axum::Error>> + Send {
    let state = (body.into_data_stream(), redactor, false);
    futures_util::stream::unfold(state, |(mut data, mut redactor, done)| async move {
        if done {
            return None;
        }
        loop {
            match data.next().await {
                // Nothing was ever registered, so nothing is held: pass the piece as it is.
                Some(Ok(piece)) if !secrets::active() => return Some((Ok(piece), (data, redactor, false))),
                Some(Ok(piece)) => {
                    let out = redactor.push(&piece);
                    if !out.is_empty() {
                        return Some((Ok(Bytes::from(out)), (data, redactor, false)));
                    }
                }
                Some(Err(e)) => return Some((Err(e), (data, redactor, true))),
                None => {
                    let rest = redactor.finish();
                    return (!rest.is_empty()).then(|| (Ok(Bytes::from(rest)), (data, redactor, true)));
                }
            }
        }
    })
}

/// The fields of a chat completion chunk's `delta` whose text a model streams piece by piece.
const STREAMED_TEXT: [&str; 3] = ["content", "reasoning_content", "refusal"];

/// Redaction of server-sent events. Each event is redacted whole once it has arrived (an event
/// is short: this holds it back only until its end). In a chat completion chunk, the text of
/// each choice — its `content`, `reasoning_content`, `refusal`, and each tool call's
/// `arguments` — is also redacted as a stream of its own across events, since a model streams
/// a secret token by token: text that could begin a secret is held back until the next chunk
/// of that choice tells, and given back with the chunk that finishes the choice.
#[derive(Debug, Default)]
pub(crate) struct EventRedactor {
    /// The start of an event whose end has not come.
    pending: Vec<u8>,
    /// A redactor per streamed text: `choice/field`, or `choice/tool/index`.
    texts: HashMap<String, StreamRedactor>,
}

impl EventRedactor {
    pub(crate) fn push(&mut self, piece: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(piece);
        let mut out = Vec::new();
        while let Some(end) = event_end(&self.pending) {
            let event: Vec<u8> = self.pending.drain(..end).collect();
            out.extend(self.event(&event));
        }
        out
    }

    /// The end of the stream: an unfinished last event, redacted. Text still held for a choice
    /// that never finished is dropped: it is the start of a secret, or too little to matter.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.pending);
        if rest.is_empty() { rest } else { self.event(&rest) }
    }

    /// One whole event (its blank line included), redacted.
    fn event(&mut self, event: &[u8]) -> Vec<u8> {
        let rewritten = std::str::from_utf8(event).ok().and_then(|text| self.chunk_texts(text));
        let event = rewritten.as_deref().map_or(event, str::as_bytes);
        secrets::redact_bytes(event).into_owned()
    }

    /// `event` with the texts of its chat completion chunk redacted as streams, when it holds
    /// one and anything changed.
    fn chunk_texts(&mut self, event: &str) -> Option<String> {
        let mut changed = false;
        let mut lines = Vec::new();
        for line in event.split_inclusive('\n') {
            let Some(data) = line.strip_prefix("data:") else {
                lines.push(line.to_owned());
                continue;
            };
            // Only a chat completion chunk has texts streamed across events (a run's events,
            // say, are whole): the others are not parsed.
            if !data.contains("\"choices\"") {
                lines.push(line.to_owned());
                continue;
            }
            let end = &data[data.trim_end_matches(['\r', '\n']).len()..];
            match serde_json::from_str::<Value>(data.trim()) {
                Ok(mut chunk) => {
                    if self.redact_chunk(&mut chunk) {
                        changed = true;
                        lines.push(format!("data: {chunk}{end}"));
                    } else {
                        lines.push(line.to_owned());
                    }
                }
                Err(_) => lines.push(line.to_owned()),
            }
        }
        changed.then(|| lines.concat())
    }

    /// Redact the streamed texts of `chunk`'s choices; whether any changed.
    fn redact_chunk(&mut self, chunk: &mut Value) -> bool {
        let Some(choices) = chunk.get_mut("choices").and_then(Value::as_array_mut) else { return false };
        let mut changed = false;
        for (position, choice) in choices.iter_mut().enumerate() {
            let index = choice.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
            let finished = choice.get("finish_reason").is_some_and(|f| !f.is_null());
            let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut) else { continue };
            for field in STREAMED_TEXT {
                if let Some(Value::String(text)) = delta.get_mut(field) {
                    changed |= self.redact_text(format!("{index}/{field}"), text);
                }
            }
            if let Some(calls) = delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
                for (at, call) in calls.iter_mut().enumerate() {
                    let tool = call.get("index").and_then(Value::as_u64).unwrap_or(at as u64);
                    if let Some(Value::String(arguments)) = call.pointer_mut("/function/arguments") {
                        changed |= self.redact_text(format!("{index}/tool/{tool}"), arguments);
                    }
                }
            }
            if finished {
                changed |= self.give_back(index, delta);
            }
        }
        changed
    }

    /// `text`, the next piece of the streamed text `key`, redacted; whether it changed.
    fn redact_text(&mut self, key: String, text: &mut String) -> bool {
        let out = self.texts.entry(key).or_default().push(text.as_bytes());
        if out == text.as_bytes() {
            return false;
        }
        *text = String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        true
    }

    /// The choice `index` finished: what its texts still hold goes into its last `delta`.
    fn give_back(&mut self, index: u64, delta: &mut serde_json::Map<String, Value>) -> bool {
        let prefix = format!("{index}/");
        let mut changed = false;
        let keys: Vec<String> = self.texts.keys().filter(|k| k.starts_with(&prefix)).cloned().collect();
        for key in keys {
            let Some(mut redactor) = self.texts.remove(&key) else { continue };
            let rest = String::from_utf8_lossy(&redactor.finish()).into_owned();
            if rest.is_empty() {
                continue;
            }
            changed = true;
            let field = &key[prefix.len()..];
            match field.strip_prefix("tool/").and_then(|t| t.parse::<u64>().ok()) {
                Some(tool) => {
                    let call = serde_json::json!({"index": tool, "function": {"arguments": rest}});
                    match delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
                        Some(calls) => calls.push(call),
                        None => {
                            delta.insert("tool_calls".into(), Value::Array(vec![call]));
                        }
                    }
                }
                None => {
                    let text = delta.entry(field.to_owned()).or_insert_with(|| Value::String(String::new()));
                    if let Value::String(text) = text {
                        text.push_str(&rest);
                    }
                }
            }
        }
        changed
    }
}

/// Where the first whole event of `bytes` ends (after its blank line), if it has come.
fn event_end(bytes: &[u8]) -> Option<usize> {
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|at| at + 2);
    let crlf = bytes.windows(4).position(|w| w == b"\r\n\r\n").map(|at| at + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn chunk(delta: Value, finish: Value) -> String {
        format!("data: {}\n\n", json!({"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))
    }

    /// The text a client rebuilds from the events: each choice's content and tool arguments.
    fn rebuilt(events: &str) -> (String, String) {
        let (mut content, mut arguments) = (String::new(), String::new());
        for data in events.split("\n\n").filter_map(|e| e.strip_prefix("data: ")) {
            let Ok(chunk) = serde_json::from_str::<Value>(data) else { continue };
            let delta = &chunk["choices"][0]["delta"];
            content.push_str(delta["content"].as_str().unwrap_or_default());
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                arguments.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
            }
        }
        (content, arguments)
    }

    #[test]
    fn a_secret_streamed_token_by_token_is_redacted() {
        secrets::register("sk-stream-token-test-77");
        let tokens = ["The key", " is sk-", "stream", "-token-test", "-77", ", and sk-", "x."];
        let mut events: Vec<String> = tokens.iter().map(|t| chunk(json!({"content": t}), Value::Null)).collect();
        events.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"k\": \"sk-stream-"}}]}),
            Value::Null,
        ));
        events.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "token-test-77\"}"}}]}),
            Value::Null,
        ));
        events.push(chunk(json!({}), json!("stop")));
        events.push("data: [DONE]\n\n".to_owned());
        let stream = events.concat();
        // Whatever the pieces the events arrive in.
        for size in [1, 7, 64, stream.len()] {
            let mut redactor = EventRedactor::default();
            let mut out = Vec::new();
            for piece in stream.as_bytes().chunks(size) {
                out.extend(redactor.push(piece));
            }
            out.extend(redactor.finish());
            let out = String::from_utf8(out).unwrap();
            assert!(!out.contains("sk-stream-token-test-77"), "{out}");
            assert_eq!(
                rebuilt(&out),
                ("The key is [redacted], and sk-x.".into(), "{\"k\": \"[redacted]\"}".into()),
                "{out}"
            );
            assert!(out.ends_with("data: [DONE]\n\n"), "{out}");
        }
        // An event without a secret's start passes as it came.
        let mut redactor = EventRedactor::default();
        let plain = chunk(json!({"content": "Hello"}), Value::Null);
        assert_eq!(redactor.push(plain.as_bytes()), plain.as_bytes());
    }
}
