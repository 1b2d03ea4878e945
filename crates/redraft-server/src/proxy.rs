//! The OpenAI-compatible proxy: `POST /v1/chat/completions` and `GET /v1/models`.
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

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use redraft::RunSpec;
use redraft::core::price::estimate_tokens;
use redraft::core::{ChatRequest, HaltReason, Message, PromptStyle, Role, RunResult};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::body::{parse, read_error};
use crate::error::{ApiError, Flavor};
use crate::openapi::ErrorBody;
use crate::runs::{failure_message, run_and_wait};
use crate::state::AppState;

/// Characters per streamed content chunk.
const CHUNK_CHARS: usize = 48;

/// The parts of an OpenAI chat completion request the proxy reads; other members are ignored.
#[derive(Debug, Deserialize)]
struct CompletionRequest {
    model: String,
    messages: Vec<InMessage>,
    #[serde(default)]
    response_format: Option<ResponseFormat>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    n: Option<u32>,
    #[serde(default)]
    tools: Option<Vec<Value>>,
    #[serde(default)]
    functions: Option<Vec<Value>>,
}

#[derive(Debug, Deserialize)]
struct InMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: JsonSchemaFormat },
}

#[derive(Debug, Deserialize)]
struct JsonSchemaFormat {
    #[serde(default)]
    schema: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

/// What the proxy answers with, before it is shaped as a completion or a stream.
#[derive(Debug)]
struct Answer {
    id: String,
    model: String,
    content: String,
    finish_reason: String,
    prompt_tokens: u64,
    completion_tokens: u64,
    /// The run, when the answer was checked.
    run: Option<Value>,
    headers: HeaderMap,
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
pub async fn chat_completions(State(state): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    match complete(&state, body).await {
        Ok(response) => response,
        Err(e) => e.openai().into_response(),
    }
}

async fn complete(state: &AppState, body: Result<Bytes, BytesRejection>) -> Result<Response, ApiError> {
    let bytes = body.map_err(|r| read_error(&r, state, Flavor::OpenAi))?;
    let req: CompletionRequest = parse(&bytes)?;
    if req.n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_request("unsupported", "`n` other than 1 is not supported by the redraft proxy"));
    }
    if req.tools.as_ref().is_some_and(|t| !t.is_empty()) || req.functions.as_ref().is_some_and(|f| !f.is_empty()) {
        return Err(ApiError::bad_request("unsupported", "tools and functions are not supported by the redraft proxy"));
    }
    let messages = messages(&req.messages)?;
    let config = state.config();
    let model = config.model_name(Some(&req.model))?;
    let max_tokens = req.max_tokens.or(req.max_completion_tokens);
    let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
    let answer = match req.response_format {
        None | Some(ResponseFormat::Text) => pass_through(state, &model, messages, req.temperature, max_tokens).await?,
        Some(format) => {
            let (schema, style) = match format {
                ResponseFormat::JsonSchema { json_schema } => {
                    let schema = json_schema.schema.ok_or_else(|| {
                        ApiError::bad_request("invalid_request", "`response_format.json_schema.schema` is required")
                    })?;
                    (schema, None)
                }
                // "A JSON object": shown as the schema, since an example of one would be `{}`.
                _ => (json!({"type": "object"}), Some(PromptStyle::Schema)),
            };
            let spec = spec(messages, schema, style, model, req.temperature, max_tokens)?;
            checked(state, spec).await?
        }
    };
    Ok(if req.stream { stream(answer, include_usage) } else { completion(answer) })
}

/// The request's messages as chat messages (text parts joined).
fn messages(input: &[InMessage]) -> Result<Vec<Message>, ApiError> {
    let mut out = Vec::with_capacity(input.len());
    for (i, m) in input.iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => {
                return Err(ApiError::bad_request(
                    "unsupported",
                    format!(
                        "`messages[{i}].role` = `{other}` is not supported by the redraft proxy (system, developer, user, assistant)"
                    ),
                ));
            }
        };
        let content = match &m.content {
            None => String::new(),
            Some(Content::Text(t)) => t.clone(),
            Some(Content::Parts(parts)) => {
                let mut text = Vec::new();
                for p in parts {
                    match (p.kind.as_str(), &p.text) {
                        ("text", Some(t)) => text.push(t.as_str()),
                        (kind, _) => {
                            return Err(ApiError::bad_request(
                                "unsupported",
                                format!("`messages[{i}]` has a `{kind}` part; the redraft proxy takes text only"),
                            ));
                        }
                    }
                }
                text.join("\n")
            }
        };
        out.push(Message { role, content });
    }
    if out.is_empty() {
        return Err(ApiError::bad_request("invalid_request", "`messages` is empty"));
    }
    Ok(out)
}

/// The run a checked request becomes: system messages → the task's system, the last message
/// (a user's) → the prompt, the turns in between kept before it.
fn spec(
    messages: Vec<Message>,
    schema: Value,
    style: Option<PromptStyle>,
    model: String,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
) -> Result<RunSpec, ApiError> {
    let (system, mut turns): (Vec<Message>, Vec<Message>) = messages.into_iter().partition(|m| m.role == Role::System);
    let prompt = match turns.pop() {
        Some(m) if m.role == Role::User && !m.content.trim().is_empty() => m.content,
        _ => {
            return Err(ApiError::bad_request(
                "invalid_request",
                "the last message must be a user's, with text: it is the task the answer is checked against",
            ));
        }
    };
    let system: Vec<String> = system.into_iter().map(|m| m.content).filter(|c| !c.trim().is_empty()).collect();
    Ok(RunSpec {
        prompt,
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        turns,
        schema: Some(schema),
        model: Some(model),
        temperature,
        max_tokens,
        prompt_style: style,
        ..RunSpec::default()
    })
}

/// One call, no loop.
async fn pass_through(
    state: &AppState,
    model: &str,
    messages: Vec<Message>,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
) -> Result<Answer, ApiError> {
    redraft::core::policy::check_sampling(temperature, max_tokens).map_err(redraft::ConfigError::from)?;
    let provider = state.guard().model(state.config(), model)?.provider;
    let request = ChatRequest { temperature, max_tokens, ..ChatRequest::new(messages) };
    let response = provider.complete(&request).await?;
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
        model: model.to_owned(),
        content: response.text,
        finish_reason,
        prompt_tokens,
        completion_tokens,
        run: None,
        headers: HeaderMap::new(),
    })
}

/// A run of the loop; the accepted artifact as the answer.
async fn checked(state: &AppState, spec: RunSpec) -> Result<Answer, ApiError> {
    let model = spec.model.clone().unwrap_or_default();
    let result = run_and_wait(state, spec).await?;
    let run = json!({
        "run_id": result.run_id,
        "attempts": result.iterations,
        "halted_because": result.halted_because,
        "history": result.history.iter().map(|a| a.status.as_str()).collect::<Vec<_>>(),
    });
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&result.run_id) {
        headers.insert("x-redraft-run-id", v);
    }
    headers.insert("x-redraft-attempts", HeaderValue::from(result.iterations));
    match (&result.artifact, result.succeeded()) {
        (Some(artifact), true) => Ok(Answer {
            id: format!("chatcmpl-{}", result.run_id),
            model,
            content: artifact.to_string(),
            finish_reason: "stop".into(),
            prompt_tokens: result.metrics.tokens_in,
            completion_tokens: result.metrics.tokens_out,
            run: Some(run),
            headers,
        }),
        _ => Err(failed(&result, run, headers)),
    }
}

/// A failed run: 422 (502 when the model's server failed), with the run and its headers.
fn failed(result: &RunResult, run: Value, headers: HeaderMap) -> ApiError {
    let (status, code) = match result.halted_because {
        HaltReason::ProviderError => (StatusCode::BAD_GATEWAY, "provider_error"),
        other => (StatusCode::UNPROCESSABLE_ENTITY, other.as_str()),
    };
    let mut message = failure_message(result);
    if let Some(best) = result.history.iter().rev().find(|a| !a.issues.is_empty()) {
        let issues: Vec<String> = best
            .issues
            .iter()
            .take(5)
            .map(|i| format!("{} {}: {}", if i.path.is_empty() { "(root)" } else { &i.path }, i.code, i.message))
            .collect();
        message.push_str(&format!("; last issues: {}", issues.join("; ")));
    }
    ApiError::new(status, code, message)
        .with_run_id(result.run_id.clone())
        .with_extra("redraft", run)
        .with_headers(headers)
}

fn created() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn usage(a: &Answer) -> Value {
    json!({"prompt_tokens": a.prompt_tokens, "completion_tokens": a.completion_tokens, "total_tokens": a.prompt_tokens + a.completion_tokens})
}

/// A `chat.completion`.
fn completion(answer: Answer) -> Response {
    let mut body = json!({
        "id": answer.id,
        "object": "chat.completion",
        "created": created(),
        "model": answer.model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": answer.content},
            "finish_reason": answer.finish_reason,
        }],
        "usage": usage(&answer),
    });
    if let Some(run) = &answer.run {
        body["redraft"] = run.clone();
    }
    (answer.headers, Json(body)).into_response()
}

/// `chat.completion.chunk` events, then `data: [DONE]`.
fn stream(answer: Answer, include_usage: bool) -> Response {
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
    let chars: Vec<char> = answer.content.chars().collect();
    for piece in chars.chunks(CHUNK_CHARS) {
        events.push(chunk(json!({"content": piece.iter().collect::<String>()}), Value::Null));
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
    let mut frames: Vec<Result<Event, Infallible>> =
        events.into_iter().map(|e| Ok(Event::default().data(e.to_string()))).collect();
    frames.push(Ok(Event::default().data("[DONE]")));
    (answer.headers, Sse::new(stream::iter(frames))).into_response()
}

/// The models a client may name.
#[utoipa::path(
    get,
    path = "/v1/models",
    tag = "openai",
    responses((status = 200, description = "OpenAI's model list: the configured default, fallback, judge and priced models", body = Object))
)]
pub async fn models(State(state): State<AppState>) -> Json<Value> {
    let config = state.config();
    let mut names: Vec<String> = Vec::new();
    let candidates = config
        .default_model
        .iter()
        .chain(config.fallback_models.iter())
        .chain(config.judge_model.iter())
        .chain(config.models.keys());
    for name in candidates {
        if let Ok(full) = config.model_name(Some(name))
            && !names.contains(&full)
        {
            names.push(full);
        }
    }
    let data: Vec<Value> = names
        .iter()
        .map(|n| {
            let owner = n.split_once('/').map_or("redraft", |(p, _)| p);
            json!({"id": n, "object": "model", "created": 0, "owned_by": owner})
        })
        .collect();
    Json(json!({"object": "list", "data": data}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, text: &str) -> InMessage {
        InMessage { role: role.into(), content: Some(Content::Text(text.into())) }
    }

    #[test]
    fn messages_map_onto_a_task() {
        let input = [
            msg("system", "Be terse."),
            msg("user", "Hi"),
            msg("assistant", "Hello"),
            msg("developer", "JSON only."),
            msg("user", "Which city?"),
        ];
        let spec =
            spec(messages(&input).unwrap(), json!({"type": "object"}), None, "fake/m".into(), None, None).unwrap();
        assert_eq!(spec.prompt, "Which city?");
        assert_eq!(spec.system.as_deref(), Some("Be terse.\n\nJSON only."));
        assert_eq!(spec.turns, vec![Message::user("Hi"), Message::assistant("Hello")]);
        let bad = spec_err(&[msg("user", "Hi"), msg("assistant", "prefill")]);
        assert!(bad.contains("last message must be a user's"), "{bad}");
        assert!(messages(&[msg("tool", "x")]).unwrap_err().message.contains("`tool`"));
    }

    fn spec_err(input: &[InMessage]) -> String {
        spec(messages(input).unwrap(), json!({}), None, "m/x".into(), None, None).unwrap_err().message
    }
}
