//! Known secrets out of every response: the outermost layer of the router, so every route, the
//! fallback and the gate's refusals pass it — JSON answers and errors, the proxy's completions
//! and streams, server-sent events, `/metrics`, the viewer and the API it reads. A whole body
//! is redacted at once; a streamed one piece by piece ([`StreamRedactor`]), a secret split
//! between two pieces included. Server-sent events are redacted event by event, and the text a
//! model streams in a chat completion's chunks ([`EventRedactor`]) as a stream of its own, so a
//! secret streamed token by token is found too. With no secret known a body passes untouched.

mod events;

use std::borrow::Cow;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures_util::StreamExt;
use redraft::core::secrets::{self, StreamRedactor};

use self::events::{EventRedactor, redact_completion};

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
        let json = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.trim_start().starts_with("application/json"));
        let bytes = if json { completion(bytes) } else { bytes };
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

/// `body` with the texts of a chat completion's choices redacted as wholes (a secret split
/// between the parts of a content array, or between two tool calls): see [`redact_completion`].
fn completion(body: Bytes) -> Bytes {
    if !body.windows(9).any(|w| w == b"\"choices\"") {
        return body;
    }
    let Ok(mut completion) = serde_json::from_slice::<serde_json::Value>(&body) else { return body };
    if redact_completion(&mut completion) { Bytes::from(completion.to_string()) } else { body }
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
