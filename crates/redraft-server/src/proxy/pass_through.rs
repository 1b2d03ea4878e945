//! A request without `response_format`: one call to the model it names, no loop, its answer
//! (or its stream) passed back as the backend gave it where the backend speaks OpenAI's API.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use futures_util::stream;
use redraft::core::price::estimate_tokens;
use redraft::core::{ChatRequest, Forwarded};
use redraft::queue::CallSlot;
use redraft::{RunSpec, Runner};
use serde_json::{Value, json};

use super::answer::{Answer, created, stream};
use super::request::{InMessage, messages};
use crate::error::ApiError;
use crate::state::AppState;

/// What a pass-through call is for.
pub(super) struct PassThrough<'a> {
    /// The `provider/model` it goes to.
    pub(super) model: &'a str,
    /// The model as the client named it.
    pub(super) asked: &'a str,
    pub(super) temperature: Option<f32>,
    pub(super) max_tokens: Option<u32>,
}

/// The runner of a pass-through call to `call.model`, through the face's guard, and a slot to
/// make it in.
async fn call_runner(state: &AppState, call: &PassThrough<'_>) -> Result<(Runner, CallSlot), ApiError> {
    let spec = RunSpec {
        model: Some(call.model.to_owned()),
        temperature: call.temperature,
        max_tokens: call.max_tokens,
        ..RunSpec::default()
    };
    let runner = spec.prepare_call(&state.setup())?;
    let slot = state.call_slot().await?;
    Ok((runner, slot))
}

/// One call, no loop. To an OpenAI-compatible backend the client's request goes as it is
/// (its model replaced), so tools, tool messages and every parameter reach the backend, and
/// the backend's answer comes back as it is. Other backends get the conversation as text.
pub(super) async fn pass_through(
    state: &AppState,
    call: PassThrough<'_>,
    mut raw: Value,
    input: &[InMessage],
    parameters: serde_json::Map<String, Value>,
    defines_tools: bool,
) -> Result<Answer, ApiError> {
    let (runner, _slot) = call_runner(state, &call).await?;
    if let Some(object) = raw.as_object_mut() {
        // The answer is streamed from the whole reply.
        object.remove("stream");
        object.remove("stream_options");
    }
    if let Some(answer) = runner.forward(raw).await {
        return Ok(forwarded(answer.map_err(refused_upstream)?, call.asked));
    }
    if defines_tools || input.iter().any(|m| m.role == "tool" || m.role == "function") {
        return Err(ApiError::bad_request(
            "unsupported",
            format!(
                "`{}` does not take OpenAI's function calling through the redraft proxy; use an OpenAI-compatible provider (`type = \"openai\"`), or force the function (`tool_choice`) to have redraft ask for its arguments",
                call.model
            ),
        ));
    }
    if let Some(why) = parameters.keys().find_map(|name| runner.refused_parameter(name)) {
        return Err(ApiError::bad_request("unsupported", why));
    }
    let request = ChatRequest {
        temperature: call.temperature,
        max_tokens: call.max_tokens,
        parameters: std::sync::Arc::new(parameters),
        ..ChatRequest::new(messages(input)?)
    };
    let response = runner.call(&request).await?;
    let (prompt_tokens, completion_tokens) = match response.usage {
        Some(u) => (u.input_tokens, u.output_tokens),
        None => (estimate_tokens(request.chars()), estimate_tokens(response.text.chars().count())),
    };
    let finish_reason = match response.finish_reason {
        Some(redraft::core::FinishReason::Length) => "length".to_owned(),
        Some(redraft::core::FinishReason::Other(other)) => other,
        _ => "stop".to_owned(),
    };
    Ok(Answer {
        id: format!("chatcmpl-{}", redraft::new_run_id()),
        model: response.served_model.clone().unwrap_or_else(|| call.model.to_owned()),
        message: json!({"role": "assistant", "content": response.text}),
        finish_reason,
        prompt_tokens,
        completion_tokens,
        run: None,
        raw: None,
        headers: HeaderMap::new(),
    })
}

/// A compatible backend's whole answer, as the client gets it: as it is, with what OpenAI's
/// clients require of a completion filled in where the server left it out.
fn forwarded(mut answer: Value, asked: &str) -> Answer {
    if answer.get("model").is_none_or(|m| !m.is_string()) {
        answer["model"] = json!(asked);
    }
    if answer.get("created").is_none_or(|c| !c.is_u64()) {
        answer["created"] = json!(created());
    }
    if answer.get("id").is_none_or(|c| !c.is_string()) {
        answer["id"] = json!(format!("chatcmpl-{}", redraft::new_run_id()));
    }
    answer["object"] = json!("chat.completion");
    let model = answer["model"].as_str().unwrap_or(asked).to_owned();
    let message = answer.pointer("/choices/0/message").cloned().unwrap_or_else(|| json!({"role": "assistant"}));
    let finish_reason = answer.pointer("/choices/0/finish_reason").and_then(Value::as_str).unwrap_or("stop").to_owned();
    let usage = |key: &str| answer.pointer(&format!("/usage/{key}")).and_then(Value::as_u64).unwrap_or(0);
    let (prompt_tokens, completion_tokens) = (usage("prompt_tokens"), usage("completion_tokens"));
    let id = answer["id"].as_str().unwrap_or_default().to_owned();
    Answer {
        id,
        model,
        message,
        finish_reason,
        prompt_tokens,
        completion_tokens,
        run: None,
        raw: Some(answer),
        headers: HeaderMap::new(),
    }
}

/// A passed-through request the backend refused as the client's fault (HTTP 400, 404, 413,
/// 422, …) keeps that status and the backend's message: it names what to change. The
/// server's own credentials, rate limits and failures stay a 502.
fn refused_upstream(e: redraft::core::ProviderError) -> ApiError {
    match e {
        redraft::core::ProviderError::Status { status, ref body, .. }
            if (400..500).contains(&status) && status != 408 =>
        {
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
            ApiError::new(
                code,
                "upstream_rejected",
                format!("the model's server refused the request (HTTP {status}): {body}"),
            )
        }
        other => other.into(),
    }
}

/// A pass-through stream: the backend's events passed on as they arrive, when it streams (an
/// OpenAI-compatible backend); `None` for a backend that does not. The backend refusing the
/// request is answered with its status, as without streaming; the connection failing midway
/// ends the stream with an error event.
pub(super) async fn pass_through_streamed(
    state: &AppState,
    call: &PassThrough<'_>,
    raw: Value,
    include_usage: bool,
) -> Result<Option<Response>, ApiError> {
    let (runner, slot) = call_runner(state, call).await?;
    let Some(opened) = runner.forward_stream(raw).await else { return Ok(None) };
    let body = match opened.map_err(refused_upstream)? {
        Forwarded::Events(body) => body,
        // The backend does not stream: its whole answer, in chunks.
        Forwarded::Whole(answer) => {
            return Ok(Some(stream(forwarded(answer, call.asked), include_usage)));
        }
    };
    // The call's slot is held while its events flow.
    let chunks = stream::unfold(Some((body, slot)), |state| async move {
        let (mut body, slot) = state?;
        match body.next_bytes().await {
            Ok(Some(bytes)) => Some((Ok::<_, Infallible>(Bytes::from(bytes)), Some((body, slot)))),
            Ok(None) => None,
            Err(e) => {
                // Blank lines first: whatever event the cut interrupted ends there.
                let error = ApiError::from(e).openai().body();
                Some((Ok(Bytes::from(format!("\n\ndata: {error}\n\n"))), None))
            }
        }
    });
    let response = Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(chunks))
        .map_err(|e| ApiError::internal(format!("cannot start the stream: {e}")))?;
    Ok(Some(response))
}
