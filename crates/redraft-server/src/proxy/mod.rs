//! The OpenAI-compatible proxy: `POST /v1/chat/completions`.
//!
//! Without `response_format` (or with `text`) a request is passed through: one call to the
//! model it names, answered in OpenAI's shape. With `response_format` `json_schema` (or
//! `json_object`) it becomes a run of the one loop, recorded like any other: the request's
//! system messages become the task's system message, its last message (from the user) the
//! prompt, and the turns in between are kept before it; the schema (or "a JSON object") is
//! the evaluator and the conversation strategy feeds problems back. The answer's content is
//! the accepted artifact as JSON text; `usage` sums every attempt; a `redraft` member and the
//! `x-redraft-run-id` / `x-redraft-attempts` headers say what happened. A failed run answers
//! 422 in OpenAI's error shape.

mod answer;
mod pass_through;
mod request;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use redraft::RunSpec;
use redraft::core::PromptStyle;
use serde_json::Value;

use self::answer::{checked, completion, run_headers, stream, stream_when_ready};
pub(crate) use self::answer::{kept_alive, pieces};
use self::pass_through::{PassThrough, pass_through, pass_through_streamed};
use self::request::{CompletionRequest, ResponseFormat, forced, messages, spec};
use crate::body::{parse, read_error};
use crate::error::{ApiError, Flavor};
use crate::openapi::ErrorBody;
use crate::runs::start;
use crate::state::AppState;

/// The run fields a request may set for itself (`extra_body.redraft`, `x-redraft-*` headers),
/// within the server's ceilings and allow-lists like any run's.
const RUN_OPTIONS: [&str; 13] = [
    "max_iterations",
    "success_threshold",
    "patience",
    "max_budget_usd",
    "max_wall_time",
    "attempt_timeout",
    "repeat_limit",
    "prompt_style",
    "check_formats",
    "coerce",
    "kind",
    "evaluator",
    "context",
];

/// Parameters a checked answer cannot honour: it is rebuilt from the accepted attempt.
fn unavailable_when_checked(name: &str) -> Option<&'static str> {
    Some(match name {
        "logprobs" | "top_logprobs" => {
            "a checked answer is the accepted attempt's artifact, re-serialised: it has no log probabilities"
        }
        "modalities" | "audio" => "a checked answer is JSON text",
        _ => return None,
    })
}

/// An OpenAI-compatible chat completion; with `response_format` the answer is checked and
/// retried with feedback until it is valid.
#[utoipa::path(
    post,
    path = "/v1/chat/completions",
    tag = "openai",
    request_body(content = Object, description = "An OpenAI chat completion request; `model` is `provider/model` (a bare name goes to the default provider); `response_format` `json_schema` or `json_object` makes the answer checked and retried"),
    responses(
        (status = 200, description = "A `chat.completion` (or, with `stream: true`, `chat.completion.chunk` events then `data: [DONE]`), with a `redraft` member `{run_id, attempts, halted_because, history}` and `x-redraft-run-id` / `x-redraft-attempts` headers when checked", body = Object),
        (status = 400, description = "Malformed request (OpenAI's error shape)", body = ErrorBody),
        (status = 422, description = "No valid answer within the policy: `{error: {message, type, code, run_id}, redraft}`", body = ErrorBody),
        (status = 502, description = "The model's server failed", body = ErrorBody),
        (status = 503, description = "Every run slot is taken (see `Retry-After`)", body = ErrorBody),
    )
)]
pub async fn chat_completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match complete(&state, &headers, body).await {
        Ok(response) => response,
        Err(e) => e.openai().into_response(),
    }
}

async fn complete(
    state: &AppState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes = body.map_err(|r| read_error(&r, state, Flavor::OpenAi))?;
    complete_bytes(state, headers, &bytes).await
}

/// A chat completion request's body, answered (a completion, or a stream of chunks).
pub(crate) async fn complete_bytes(state: &AppState, headers: &HeaderMap, bytes: &Bytes) -> Result<Response, ApiError> {
    let mut req: CompletionRequest = parse(bytes)?;
    let options = run_options(req.redraft.take(), headers)?;
    if req.n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_request("unsupported", "`n` other than 1 is not supported by the redraft proxy"));
    }
    if req.messages.is_empty() {
        return Err(ApiError::bad_request("invalid_request", "`messages` is empty"));
    }
    let forced = forced(&req)?;
    let defines_tools =
        req.tools.as_ref().is_some_and(|t| !t.is_empty()) || req.functions.as_ref().is_some_and(|f| !f.is_empty());
    let config = state.config();
    let model = config.model_name(Some(&req.model))?;
    let max_tokens = req.max_tokens.or(req.max_completion_tokens);
    let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
    let checked_format = !matches!(req.response_format, None | Some(ResponseFormat::Text));
    // With a forced function the answer is a call, checked against the function's parameters:
    // a `response_format` (the shape of text) has nothing to apply to. With tools the model may
    // choose, an answer could be either: not served.
    if checked_format && defines_tools && forced.is_none() {
        return Err(ApiError::bad_request(
            "unsupported",
            "`response_format` together with `tools` the model may choose is not supported by the redraft proxy: force the function (`tool_choice`) to have its arguments checked, or drop `response_format` to pass the tools through",
        ));
    }
    let (spec, call) = match (req.response_format, forced) {
        (_, Some(forced)) => {
            let schema = forced.tool.parameters.clone();
            let mut spec = spec(messages(&req.messages)?, Some(schema), None, model, req.temperature, max_tokens)?;
            let call = (forced.tool.name.clone(), forced.legacy);
            spec.tool = Some(forced.tool);
            (spec, Some(call))
        }
        (None | Some(ResponseFormat::Text), None) => {
            if let Some(name) = options.keys().next() {
                return Err(ApiError::bad_request(
                    "unsupported",
                    format!(
                        "the redraft option `{name}` applies to checked requests (`response_format` `json_schema` or `json_object`, or a forced function); this one is passed through to the model as it is"
                    ),
                ));
            }
            let mut raw: Value = parse(bytes)?;
            if let Some(object) = raw.as_object_mut() {
                object.remove("redraft");
            }
            let call = PassThrough { model: &model, asked: &req.model, temperature: req.temperature, max_tokens };
            if req.stream
                && let Some(streamed) = pass_through_streamed(state, &call, raw.clone(), include_usage).await?
            {
                return Ok(streamed);
            }
            let answer = pass_through(state, call, raw, &req.messages, req.parameters, defines_tools).await?;
            return Ok(if req.stream { stream(answer, include_usage) } else { completion(answer) });
        }
        (Some(format), None) => {
            let messages = messages(&req.messages)?;
            let (schema, style) = match format {
                ResponseFormat::JsonSchema { json_schema } => {
                    let schema = json_schema.schema.ok_or_else(|| {
                        ApiError::bad_request("invalid_request", "`response_format.json_schema.schema` is required")
                    })?;
                    (Some(schema), None)
                }
                // "A JSON object", any: no schema to show (one would be copied back as the
                // answer); the messages say what the object holds.
                _ => (None, Some(PromptStyle::Schema)),
            };
            let mut spec = spec(messages, schema, style, model, req.temperature, max_tokens)?;
            spec.json_object = spec.schema.is_none();
            (spec, None)
        }
    };
    let spec = checked_spec(spec, req.parameters, options)?;
    // Stored (or refused with its status) before any answer starts.
    let started = start(state, &spec).await?;
    let run_id = started.run_id.clone();
    let model = spec.model.unwrap_or_default();
    let answer = async move {
        let mut answer = checked(started.result().await?, model)?;
        if let Some((name, legacy)) = call {
            answer.make_call(&name, legacy);
        }
        Ok(answer)
    };
    if req.stream {
        return Ok(stream_when_ready(answer, include_usage, run_headers(&run_id)));
    }
    Ok(completion(answer.await?))
}

/// The request's own options (`extra_body.redraft`, then `x-redraft-*` headers for what the
/// body leaves out), by run field name. An option that is not one of [`RUN_OPTIONS`] is refused
/// by name.
fn run_options(body: Option<Value>, headers: &HeaderMap) -> Result<serde_json::Map<String, Value>, ApiError> {
    let mut options = match body {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(options)) => options,
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_request",
                format!("`redraft` (extra_body) must be an object of run options, not `{other}`"),
            ));
        }
    };
    for (name, value) in headers {
        let Some(option) = name.as_str().strip_prefix("x-redraft-") else { continue };
        let option = option.replace('-', "_");
        let text = value
            .to_str()
            .map_err(|_| ApiError::bad_request("invalid_request", format!("the header `{name}` is not text")))?;
        // A number, `true`, an object, a list as JSON; anything else as the text it is.
        let value = serde_json::from_str::<Value>(text).unwrap_or_else(|_| Value::String(text.to_owned()));
        options.entry(option).or_insert(value);
    }
    if let Some(name) = options.keys().find(|k| !RUN_OPTIONS.contains(&k.as_str())) {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("`{name}` is not a redraft option a request may set; these are: {}", RUN_OPTIONS.join(", ")),
        ));
    }
    Ok(options)
}

/// A checked run's spec with the request's parameters for the backend and its own options.
fn checked_spec(
    spec: RunSpec,
    parameters: serde_json::Map<String, Value>,
    options: serde_json::Map<String, Value>,
) -> Result<RunSpec, ApiError> {
    if let Some((name, why)) = parameters.keys().find_map(|n| unavailable_when_checked(n).map(|w| (n, w))) {
        return Err(ApiError::bad_request("unsupported", format!("`{name}` is not available here: {why}")));
    }
    let mut spec = spec;
    if !parameters.is_empty() {
        spec.parameters = Some(parameters);
    }
    if options.is_empty() {
        return Ok(spec);
    }
    let mut value = serde_json::to_value(&spec).map_err(|e| ApiError::internal(e.to_string()))?;
    if let Some(fields) = value.as_object_mut() {
        fields.extend(options);
    }
    serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request("invalid_request", format!("a redraft option is invalid: {e}")))
}
