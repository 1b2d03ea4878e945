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

use std::convert::Infallible;
use std::future::{self, Future};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt, stream};
use redraft::core::price::estimate_tokens;
use redraft::core::{ChatRequest, Forwarded, HaltReason, Message, PromptStyle, Role, RunResult, ToolSpec};
use redraft::queue::CallSlot;
use redraft::{RunSpec, Runner};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::body::{parse, read_error};
use crate::error::{ApiError, Flavor};
use crate::openapi::ErrorBody;
use crate::runs::{failure_message, start};
use crate::state::AppState;

/// Characters per streamed content chunk.
const CHUNK_CHARS: usize = 48;

/// How long a stream whose answer is being made stays quiet, at most: a comment is sent then.
const KEEP_ALIVE: Duration = Duration::from_secs(2);

/// The comment a stream sends while its answer is being made.
const WORKING: &str = "redraft: working";

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
    tool_choice: Option<Value>,
    #[serde(default)]
    functions: Option<Vec<Value>>,
    #[serde(default)]
    function_call: Option<Value>,
    /// Per-request options (`extra_body={"redraft": {...}}` in OpenAI's clients).
    #[serde(default)]
    redraft: Option<Value>,
    /// Every other member: the backend's parameters (`top_p`, `stop`, `seed`, …).
    #[serde(flatten)]
    parameters: serde_json::Map<String, Value>,
}

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

#[derive(Debug, Default, Deserialize)]
struct InMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
    /// An assistant's calls of functions.
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
    /// An assistant's legacy single call.
    #[serde(default)]
    function_call: Option<Value>,
    /// A `tool` message: the call it answers.
    #[serde(default)]
    tool_call_id: Option<String>,
    /// A `function` message: the function it answers.
    #[serde(default)]
    name: Option<String>,
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
    /// The assistant's message in OpenAI's shape (`content`, `tool_calls`, …).
    message: Value,
    finish_reason: String,
    prompt_tokens: u64,
    completion_tokens: u64,
    /// The run, when the answer was checked.
    run: Option<Value>,
    /// The backend's whole answer, when it was passed through as it is.
    raw: Option<Value>,
    headers: HeaderMap,
}

/// A function call the request forces, checked against the function's parameters.
#[derive(Debug)]
struct Forced {
    tool: ToolSpec,
    /// Asked with the legacy `functions` / `function_call`: answered as a `function_call`.
    legacy: bool,
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

/// The function call the request forces, if any: `tool_choice` naming a function (or
/// `required` with one tool), or the legacy `function_call` naming one. Checked against the
/// function's `parameters`; any other choice is passed through to the backend.
fn forced(req: &CompletionRequest) -> Result<Option<Forced>, ApiError> {
    let tools = req.tools.as_deref().unwrap_or_default();
    let functions = req.functions.as_deref().unwrap_or_default();
    let (wanted, legacy) = match (&req.tool_choice, &req.function_call) {
        (Some(choice), _) => match choice {
            // One tool that must be called: when it is a function, that function is forced.
            Value::String(s) if s == "required" && tools.len() == 1 && is_function(&tools[0]) => {
                (tools[0].pointer("/function/name").and_then(Value::as_str).map(str::to_owned), false)
            }
            Value::String(s) if matches!(s.as_str(), "auto" | "none" | "required") => return Ok(None),
            Value::Object(_) => match choice.pointer("/function/name").and_then(Value::as_str) {
                Some(name) => (Some(name.to_owned()), false),
                None => return Ok(None),
            },
            other => {
                return Err(ApiError::bad_request(
                    "invalid_request",
                    format!(
                        "`tool_choice` = {other} is not valid; use \"auto\", \"none\", \"required\" or {{\"type\": \"function\", \"function\": {{\"name\": …}}}}"
                    ),
                ));
            }
        },
        (None, Some(Value::Object(call))) => match call.get("name").and_then(Value::as_str) {
            Some(name) => (Some(name.to_owned()), true),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    let Some(name) = wanted else {
        return Err(ApiError::bad_request("invalid_request", "`tools[0].function.name` is missing"));
    };
    let function = if legacy {
        functions.iter().find(|f| f.get("name").and_then(Value::as_str) == Some(name.as_str()))
    } else {
        tools
            .iter()
            .filter(|t| is_function(t))
            .filter_map(|t| t.get("function"))
            .find(|f| f.get("name").and_then(Value::as_str) == Some(name.as_str()))
    };
    let Some(function) = function else {
        let (choice, list) = if legacy { ("function_call", "functions") } else { ("tool_choice", "tools") };
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("`{choice}` names the function `{name}`, which `{list}` does not define"),
        ));
    };
    let parameters = match function.get("parameters") {
        None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_request",
                format!("the parameters of the function `{name}` are not a JSON Schema object: {other}"),
            ));
        }
    };
    let description = function.get("description").and_then(Value::as_str).map(str::to_owned);
    let strict = function.get("strict").and_then(Value::as_bool).unwrap_or(false);
    Ok(Some(Forced { tool: ToolSpec { name, description, parameters, strict }, legacy }))
}

/// Whether a `tools` entry is a function (`type` `function`, or none given).
fn is_function(tool: &Value) -> bool {
    tool.get("type").and_then(Value::as_str).is_none_or(|k| k == "function")
}

/// The request's messages as chat messages (text parts joined). Function calls and their
/// results become text: an assistant's turn says which function it called with what, and a
/// `tool` (or `function`) message is the user's turn giving the result.
fn messages(input: &[InMessage]) -> Result<Vec<Message>, ApiError> {
    let mut out = Vec::with_capacity(input.len());
    let mut names: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for (i, m) in input.iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => Role::System,
            "user" | "tool" | "function" => Role::User,
            "assistant" => Role::Assistant,
            other => {
                return Err(ApiError::bad_request(
                    "unsupported",
                    format!(
                        "`messages[{i}].role` = `{other}` is not supported by the redraft proxy (system, developer, user, assistant, tool)"
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
        let mut calls = Vec::new();
        for call in m.tool_calls.iter().flatten() {
            let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or("?");
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                names.insert(id, name);
            }
            calls.push(describe_call(name, call.pointer("/function/arguments")));
        }
        if let Some(call) = &m.function_call {
            calls.push(describe_call(call.get("name").and_then(Value::as_str).unwrap_or("?"), call.get("arguments")));
        }
        let content = match m.role.as_str() {
            "tool" => {
                let id = m.tool_call_id.as_deref().unwrap_or("?");
                let name = names.get(id).copied().or(m.name.as_deref()).unwrap_or("?");
                format!("Result of the call of `{name}` ({id}):\n{content}")
            }
            "function" => format!("Result of the call of `{}`:\n{content}", m.name.as_deref().unwrap_or("?")),
            _ if !calls.is_empty() => {
                let calls = calls.join("\n");
                if content.trim().is_empty() { calls } else { format!("{content}\n{calls}") }
            }
            _ => content,
        };
        out.push(Message { role, content });
    }
    if out.is_empty() {
        return Err(ApiError::bad_request("invalid_request", "`messages` is empty"));
    }
    Ok(out)
}

/// An assistant's function call, as text.
fn describe_call(name: &str, arguments: Option<&Value>) -> String {
    let arguments = match arguments {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "{}".into(),
    };
    format!("Called `{name}` with {arguments}")
}

/// The run a checked request becomes: system messages → the task's system, the last message
/// (a user's) → the prompt, the turns in between kept before it.
fn spec(
    messages: Vec<Message>,
    schema: Option<Value>,
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
        schema,
        model: Some(model),
        temperature,
        max_tokens,
        prompt_style: style,
        ..RunSpec::default()
    })
}

/// What a pass-through call is for.
struct PassThrough<'a> {
    /// The `provider/model` it goes to.
    model: &'a str,
    /// The model as the client named it.
    asked: &'a str,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
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
async fn pass_through(
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

impl Answer {
    /// Answer as a call of `name` whose arguments are the content (the accepted artifact).
    fn make_call(&mut self, name: &str, legacy: bool) {
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
fn run_headers(run_id: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(run_id) {
        headers.insert("x-redraft-run-id", v);
    }
    headers
}

/// A run of the loop, finished: the accepted artifact as the answer, named after the model the
/// backend says answered (else the one asked).
fn checked(result: RunResult, model: String) -> Result<Answer, ApiError> {
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

fn created() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn usage(a: &Answer) -> Value {
    json!({"prompt_tokens": a.prompt_tokens, "completion_tokens": a.completion_tokens, "total_tokens": a.prompt_tokens + a.completion_tokens})
}

/// A `chat.completion`.
fn completion(answer: Answer) -> Response {
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
fn stream(answer: Answer, include_usage: bool) -> Response {
    let headers = answer.headers.clone();
    (headers, Sse::new(stream::iter(frames(answer, include_usage).into_iter().map(Ok::<_, Infallible>))))
        .into_response()
}

/// A stream whose answer is still being made (the loop's attempts): a comment at once and
/// then every [`KEEP_ALIVE`] while it is made, so that neither the client nor a proxy in
/// between gives up on a quiet connection; then the answer's chunks. An answer that fails ends
/// the stream with an event holding the error in OpenAI's shape (the clients raise it).
fn stream_when_ready<F>(answer: F, include_usage: bool, headers: HeaderMap) -> Response
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

/// A pass-through stream: the backend's events passed on as they arrive, when it streams (an
/// OpenAI-compatible backend); `None` for a backend that does not. The backend refusing the
/// request is answered with its status, as without streaming; the connection failing midway
/// ends the stream with an error event.
async fn pass_through_streamed(
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

/// `text` in pieces of at most [`CHUNK_CHARS`] characters.
pub(crate) fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(CHUNK_CHARS).map(|c| c.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, text: &str) -> InMessage {
        InMessage { role: role.into(), content: Some(Content::Text(text.into())), ..InMessage::default() }
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
        let spec = spec(messages(&input).unwrap(), Some(json!({"type": "object"})), None, "fake/m".into(), None, None)
            .unwrap();
        assert_eq!(spec.prompt, "Which city?");
        assert_eq!(spec.system.as_deref(), Some("Be terse.\n\nJSON only."));
        assert_eq!(spec.turns, vec![Message::user("Hi"), Message::assistant("Hello")]);
        let bad = spec_err(&[msg("user", "Hi"), msg("assistant", "prefill")]);
        assert!(bad.contains("last message must be a user's"), "{bad}");
        assert!(messages(&[msg("critic", "x")]).unwrap_err().message.contains("`critic`"));
    }

    #[test]
    fn function_calls_and_results_become_text() {
        let call = json!({"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}});
        let input = [
            msg("user", "Weather in Paris?"),
            InMessage { role: "assistant".into(), tool_calls: Some(vec![call]), ..InMessage::default() },
            InMessage { tool_call_id: Some("call_1".into()), ..msg("tool", "18 C, clear") },
            msg("user", "Answer as JSON."),
        ];
        let m = messages(&input).unwrap();
        assert_eq!(m[1], Message::assistant(r#"Called `weather` with {"city":"Paris"}"#));
        assert_eq!(m[2], Message::user("Result of the call of `weather` (call_1):\n18 C, clear"));
        let spec = spec(m, None, None, "fake/m".into(), None, None).unwrap();
        assert_eq!(spec.prompt, "Answer as JSON.");
        assert_eq!(spec.turns.len(), 3);
    }

    fn req(body: Value) -> CompletionRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn a_forced_function_is_checked_and_any_other_choice_passes_through() {
        let tool = |name: &str| json!({"type": "function", "function": {"name": name, "parameters": {"type": "object", "required": ["a"]}, "strict": true}});
        let m = json!([{"role": "user", "content": "x"}]);
        let named = forced(&req(json!({"model": "m", "messages": m, "tools": [tool("f"), tool("g")], "tool_choice": {"type": "function", "function": {"name": "g"}}}))).unwrap().unwrap();
        assert_eq!((named.tool.name.as_str(), named.tool.strict, named.legacy), ("g", true, false));
        assert_eq!(named.tool.parameters["required"], json!(["a"]));
        let one = forced(&req(json!({"model": "m", "messages": m, "tools": [tool("f")], "tool_choice": "required"})))
            .unwrap()
            .unwrap();
        assert_eq!(one.tool.name, "f");
        for choice in [json!("required"), json!("auto"), json!("none"), Value::Null] {
            let r = req(json!({"model": "m", "messages": m, "tools": [tool("f"), tool("g")], "tool_choice": choice}));
            assert!(forced(&r).unwrap().is_none(), "{choice} passes through");
        }
        let legacy = forced(&req(
            json!({"model": "m", "messages": m, "functions": [{"name": "h"}], "function_call": {"name": "h"}}),
        ))
        .unwrap()
        .unwrap();
        assert!(legacy.legacy);
        assert_eq!(
            legacy.tool.parameters,
            json!({"type": "object", "properties": {}}),
            "no parameters: an empty object"
        );
        let unknown = forced(&req(json!({"model": "m", "messages": m, "tools": [tool("f")], "tool_choice": {"type": "function", "function": {"name": "nope"}}}))).unwrap_err();
        assert!(unknown.message.contains("`nope`"), "{}", unknown.message);
        let bad =
            forced(&req(json!({"model": "m", "messages": m, "tools": [tool("f")], "tool_choice": 3}))).unwrap_err();
        assert!(bad.message.contains("`tool_choice`"), "{}", bad.message);
    }

    fn spec_err(input: &[InMessage]) -> String {
        spec(messages(input).unwrap(), None, None, "m/x".into(), None, None).unwrap_err().message
    }
}
