//! `POST /v1/responses`: OpenAI's Responses API, on the same loop as the chat completions
//! proxy. A request is translated into a chat completion request — `instructions` and the
//! `input` items into messages, `text.format` into `response_format`, function tools into
//! tools — and answered like one: checked and retried when it asks for a schema or forces a
//! function, passed through otherwise. The completion is translated back into a `response`.
//! Streamed, the response is opened at once (`response.created`), kept alive while it is made,
//! then sent as the Responses API's events; a failure ends it with an `error` event.
//!
//! Not served, refused by name: `previous_response_id` and `conversation` (redraft keeps no
//! conversation: send the whole input), `background`, tools other than functions, input items
//! other than messages and function calls and their outputs.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use futures_util::{StreamExt, stream};
use serde_json::{Map, Value, json};

use crate::body::{parse, read_error};
use crate::error::{ApiError, Flavor};
use crate::openapi::ErrorBody;
use crate::proxy::{complete_bytes, kept_alive, pieces};
use crate::state::AppState;

/// The most a completion made for a response may weigh (it is read back from memory).
const COMPLETION_LIMIT: usize = 64 * 1024 * 1024;

/// An OpenAI Responses API request, answered by the same loop as chat completions.
#[utoipa::path(
    post,
    path = "/v1/responses",
    tag = "openai",
    request_body(content = Object, description = "An OpenAI Responses API request: `model`, `input` (text or message and function call items), `instructions`, `text.format` (`json_schema` or `json_object` makes the answer checked and retried), function `tools`, `tool_choice`, `stream`"),
    responses(
        (status = 200, description = "A `response` (or, with `stream: true`, the Responses API's events), with a `redraft` member when checked", body = Object),
        (status = 400, description = "Malformed request, or a feature the proxy does not serve (named)", body = ErrorBody),
        (status = 422, description = "No valid answer within the policy", body = ErrorBody),
        (status = 502, description = "The model's server failed", body = ErrorBody),
        (status = 503, description = "The queue is full, or the run waited `[queue] max_wait` for a slot (see `Retry-After`)", body = ErrorBody),
    )
)]
pub async fn responses(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match respond(&state, &headers, body).await {
        Ok(response) => response,
        Err(e) => e.openai().into_response(),
    }
}

async fn respond(
    state: &AppState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes = body.map_err(|r| read_error(&r, state, Flavor::OpenAi))?;
    let request: Map<String, Value> = match parse::<Value>(&bytes)? {
        Value::Object(request) => request,
        _ => return Err(ApiError::bad_request("invalid_request", "the body must be a JSON object")),
    };
    let stream = request.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let chat = Bytes::from(to_chat(&request)?.to_string());
    let id = format!("resp_{}", redraft::new_run_id().replace('-', ""));
    if !stream {
        let (headers, completion) = completion(state, headers, &chat).await?;
        return Ok((headers, Json(to_response(&id, &completion, &request))).into_response());
    }
    let (state, headers) = (state.clone(), headers.clone());
    let opening = base(&id, &request);
    let made = {
        let (id, request) = (id.clone(), request.clone());
        async move {
            let (_, completion) = completion(&state, &headers, &chat).await?;
            Ok::<_, ApiError>(to_response(&id, &completion, &request))
        }
    };
    let rest = stream::once(made).flat_map(|made| {
        stream::iter(match made {
            Ok(response) => events(&response),
            Err(e) => vec![error_event(&e)],
        })
    });
    let first = vec![
        ("response.created", json!({"response": opening.clone()})),
        ("response.in_progress", json!({"response": opening})),
    ];
    let events = stream::iter(first).chain(rest).enumerate().map(|(n, (kind, mut data))| {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(n);
        Event::default().event(kind).data(data.to_string())
    });
    Ok(kept_alive(events))
}

/// The chat completion for `chat`, and the headers it came with (`x-redraft-*`).
async fn completion(state: &AppState, headers: &HeaderMap, chat: &Bytes) -> Result<(HeaderMap, Value), ApiError> {
    let response = complete_bytes(state, headers, chat).await?;
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), COMPLETION_LIMIT)
        .await
        .map_err(|e| ApiError::internal(format!("cannot read the completion: {e}")))?;
    let completion = serde_json::from_slice(&body).map_err(|e| ApiError::internal(format!("the completion: {e}")))?;
    let headers = headers
        .into_iter()
        .filter_map(|(name, value)| name.map(|n| (n, value)))
        .filter(|(n, _)| n.as_str().starts_with("x-redraft-"))
        .collect();
    Ok((headers, completion))
}

fn unsupported(message: impl Into<String>) -> ApiError {
    ApiError::bad_request("unsupported", message)
}

/// The chat completion request for a Responses API request.
fn to_chat(request: &Map<String, Value>) -> Result<Value, ApiError> {
    let mut chat = Map::new();
    let mut system = Vec::new();
    let mut messages = Vec::new();
    for (key, value) in request.iter().filter(|(_, v)| !v.is_null()) {
        match key.as_str() {
            "model" => {
                chat.insert("model".into(), value.clone());
            }
            "instructions" => match value {
                Value::String(text) => system.push(json!({"role": "system", "content": text})),
                Value::Array(items) => system.extend(input_messages(items)?),
                _ => return Err(ApiError::bad_request("invalid_request", "`instructions` must be text")),
            },
            "input" => match value {
                Value::String(text) => messages.push(json!({"role": "user", "content": text})),
                Value::Array(items) => messages.extend(input_messages(items)?),
                _ => return Err(ApiError::bad_request("invalid_request", "`input` must be text or a list of items")),
            },
            "text" => {
                if let Some(format) = value.get("format").filter(|f| !f.is_null())
                    && let Some(format) = response_format(format)?
                {
                    chat.insert("response_format".into(), format);
                }
                if let Some(verbosity) = value.get("verbosity").filter(|v| !v.is_null()) {
                    chat.insert("verbosity".into(), verbosity.clone());
                }
            }
            "tools" => {
                let tools = value.as_array().map(Vec::as_slice).unwrap_or_default();
                chat.insert("tools".into(), Value::Array(tools.iter().map(tool).collect::<Result<_, _>>()?));
            }
            "tool_choice" => {
                let choice = match value {
                    Value::Object(o) if o.get("type") == Some(&json!("function")) => {
                        json!({"type": "function", "function": {"name": o.get("name")}})
                    }
                    Value::String(_) => value.clone(),
                    other => {
                        return Err(unsupported(format!(
                            "`tool_choice` {other} is not supported by the redraft proxy"
                        )));
                    }
                };
                chat.insert("tool_choice".into(), choice);
            }
            "max_output_tokens" => {
                chat.insert("max_tokens".into(), value.clone());
            }
            "reasoning" => {
                if let Some(effort) = value.get("effort").filter(|e| !e.is_null()) {
                    chat.insert("reasoning_effort".into(), effort.clone());
                }
            }
            "stream" | "stream_options" => {}
            // Reasoning items are not made here: asking for their encrypted content is moot.
            "include" => {
                let asked = value.as_array().map(Vec::as_slice).unwrap_or_default();
                if let Some(other) = asked.iter().find(|i| i.as_str() != Some("reasoning.encrypted_content")) {
                    return Err(unsupported(format!("`include` {other} is not served by the redraft proxy")));
                }
            }
            "truncation" if value == "disabled" => {}
            "background" if value == false => {}
            "previous_response_id" | "conversation" => {
                return Err(unsupported(format!(
                    "`{key}` is not served: the redraft proxy keeps no conversation; send the whole conversation as `input`"
                )));
            }
            "truncation" | "background" | "prompt" | "max_tool_calls" => {
                return Err(unsupported(format!("`{key}` is not served by the redraft proxy")));
            }
            // Everything else is a parameter, forwarded or refused by name like any.
            _ => {
                chat.insert(key.clone(), value.clone());
            }
        }
    }
    system.extend(messages);
    chat.insert("messages".into(), Value::Array(system));
    chat.insert("stream".into(), json!(false));
    Ok(Value::Object(chat))
}

/// `text.format` as `response_format` (`None` for text).
fn response_format(format: &Value) -> Result<Option<Value>, ApiError> {
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
        Some("json_schema") => {
            let mut schema =
                json!({"name": format.get("name").cloned().unwrap_or(json!("answer")), "schema": format.get("schema")});
            if let Some(strict) = format.get("strict").filter(|s| !s.is_null()) {
                schema["strict"] = strict.clone();
            }
            Ok(Some(json!({"type": "json_schema", "json_schema": schema})))
        }
        _ => Err(ApiError::bad_request("invalid_request", format!("`text.format` {format} is not a known format"))),
    }
}

/// A Responses API function tool as a chat completions tool.
fn tool(tool: &Value) -> Result<Value, ApiError> {
    if tool.get("type").and_then(Value::as_str) != Some("function") {
        let kind = tool.get("type").cloned().unwrap_or(Value::Null);
        return Err(unsupported(format!(
            "tools of type {kind} are not served by the redraft proxy; function tools are"
        )));
    }
    let mut function = Map::new();
    for key in ["name", "description", "parameters", "strict"] {
        if let Some(value) = tool.get(key).filter(|v| !v.is_null()) {
            function.insert(key.into(), value.clone());
        }
    }
    Ok(json!({"type": "function", "function": function}))
}

/// Input items as chat messages: messages, function calls (an assistant's `tool_calls`) and
/// their outputs (`tool` messages).
fn input_messages(items: &[Value]) -> Result<Vec<Value>, ApiError> {
    let mut messages: Vec<Value> = Vec::new();
    for item in items {
        match item.get("type").and_then(Value::as_str).unwrap_or("message") {
            "message" => {
                let role = match item.get("role").and_then(Value::as_str) {
                    Some("system" | "developer") => "system",
                    Some("user") => "user",
                    Some("assistant") => "assistant",
                    other => {
                        return Err(ApiError::bad_request(
                            "invalid_request",
                            format!("an input message's role {other:?} is not known"),
                        ));
                    }
                };
                messages.push(json!({"role": role, "content": content(item.get("content").unwrap_or(&Value::Null))?}));
            }
            "function_call" => {
                let call = json!({"id": item.get("call_id"), "type": "function",
                                  "function": {"name": item.get("name"), "arguments": item.get("arguments")}});
                match messages.last_mut() {
                    Some(last) if last["role"] == "assistant" && last.get("tool_calls").is_some() => {
                        if let Some(calls) = last["tool_calls"].as_array_mut() {
                            calls.push(call);
                        }
                    }
                    _ => messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
                }
            }
            "function_call_output" => {
                let output = match item.get("output") {
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => text_of(other),
                    None => String::new(),
                };
                messages.push(json!({"role": "tool", "tool_call_id": item.get("call_id"), "content": output}));
            }
            // A reasoning model's earlier thoughts: nothing the backend is sent back here.
            "reasoning" => {}
            other => {
                return Err(unsupported(format!("input items of type `{other}` are not served by the redraft proxy")));
            }
        }
    }
    Ok(messages)
}

/// A message's content: text as it is, parts as chat parts.
fn content(content: &Value) -> Result<Value, ApiError> {
    let Value::Array(parts) = content else { return Ok(content.clone()) };
    let parts = parts
        .iter()
        .map(|part| match part.get("type").and_then(Value::as_str) {
            Some("input_text" | "output_text" | "text") => Ok(json!({"type": "text", "text": part.get("text")})),
            Some("refusal") => Ok(json!({"type": "text", "text": part.get("refusal")})),
            Some("input_image") => Ok(json!({"type": "image_url", "image_url": {"url": part.get("image_url")}})),
            other => Err(unsupported(format!("content parts of type {other:?} are not served by the redraft proxy"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Value::Array(parts))
}

/// The text in a list of parts.
fn text_of(parts: &Value) -> String {
    parts.as_array().into_iter().flatten().filter_map(|p| p.get("text").and_then(Value::as_str)).collect()
}

/// The `response` for a chat `completion`, echoing what the request set.
fn to_response(id: &str, completion: &Value, request: &Map<String, Value>) -> Value {
    let choice = &completion["choices"][0];
    let message = &choice["message"];
    let mut output = Vec::new();
    if let Some(text) = message.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        output.push(json!({
            "type": "message", "id": format!("msg_{}", &id[5..]), "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
        }));
    }
    let calls = message.get("tool_calls").and_then(Value::as_array).cloned().unwrap_or_default();
    let legacy = message.get("function_call").map(|f| json!({"id": "call_0", "function": f}));
    for (n, call) in calls.iter().chain(legacy.iter()).enumerate() {
        output.push(json!({
            "type": "function_call", "id": format!("fc_{}_{n}", &id[5..]), "call_id": call.get("id"),
            "name": call.pointer("/function/name"), "arguments": call.pointer("/function/arguments"),
            "status": "completed",
        }));
    }
    let cut = choice.get("finish_reason").and_then(Value::as_str) == Some("length");
    let used = |key: &str| completion.pointer(&format!("/usage/{key}")).and_then(Value::as_u64).unwrap_or(0);
    let mut response = base(id, request);
    response["status"] = json!(if cut { "incomplete" } else { "completed" });
    response["incomplete_details"] = if cut { json!({"reason": "max_output_tokens"}) } else { Value::Null };
    response["created_at"] = completion.get("created").cloned().unwrap_or(response["created_at"].clone());
    response["model"] = completion.get("model").cloned().unwrap_or(response["model"].clone());
    response["output"] = Value::Array(output);
    response["usage"] = json!({
        "input_tokens": used("prompt_tokens"), "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": used("completion_tokens"), "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": used("prompt_tokens") + used("completion_tokens"),
    });
    if let Some(run) = completion.get("redraft") {
        response["redraft"] = run.clone();
    }
    response
}

/// What every `response` says, from the request.
fn base(id: &str, request: &Map<String, Value>) -> Value {
    let given = |key: &str, default: Value| request.get(key).filter(|v| !v.is_null()).cloned().unwrap_or(default);
    let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    json!({
        "id": id, "object": "response", "created_at": created, "status": "in_progress",
        "model": given("model", Value::Null), "output": [], "error": null, "incomplete_details": null,
        "instructions": given("instructions", Value::Null), "metadata": given("metadata", json!({})),
        "parallel_tool_calls": given("parallel_tool_calls", json!(true)),
        "temperature": given("temperature", Value::Null), "top_p": given("top_p", Value::Null),
        "max_output_tokens": given("max_output_tokens", Value::Null),
        "tool_choice": given("tool_choice", json!("auto")), "tools": given("tools", json!([])),
        "text": given("text", json!({"format": {"type": "text"}})), "usage": null,
    })
}

/// The events of a made `response`: each output item added, its text or arguments in deltas,
/// done; then `response.completed`.
fn events(response: &Value) -> Vec<(&'static str, Value)> {
    let mut events = Vec::new();
    for (index, item) in response["output"].as_array().into_iter().flatten().enumerate() {
        let item_id = item["id"].clone();
        let mut opened = item.clone();
        opened["status"] = json!("in_progress");
        if item["type"] == "message" {
            opened["content"] = json!([]);
            events.push(("response.output_item.added", json!({"output_index": index, "item": opened})));
            let text = item.pointer("/content/0/text").and_then(Value::as_str).unwrap_or_default();
            let part = |text: &str| json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
            let at = json!({"item_id": item_id, "output_index": index, "content_index": 0});
            let with = |mut v: Value, extra: Value| {
                if let (Some(v), Value::Object(extra)) = (v.as_object_mut(), extra) {
                    v.extend(extra);
                }
                v
            };
            events.push(("response.content_part.added", with(at.clone(), json!({"part": part("")}))));
            for delta in pieces(text) {
                events.push(("response.output_text.delta", with(at.clone(), json!({"delta": delta, "logprobs": []}))));
            }
            events.push(("response.output_text.done", with(at.clone(), json!({"text": text, "logprobs": []}))));
            events.push(("response.content_part.done", with(at, json!({"part": part(text)}))));
        } else {
            opened["arguments"] = json!("");
            events.push(("response.output_item.added", json!({"output_index": index, "item": opened})));
            let arguments = item["arguments"].as_str().unwrap_or_default();
            for delta in pieces(arguments) {
                events.push((
                    "response.function_call_arguments.delta",
                    json!({"item_id": item_id, "output_index": index, "delta": delta}),
                ));
            }
            events.push((
                "response.function_call_arguments.done",
                json!({"item_id": item_id, "output_index": index, "arguments": arguments, "name": item["name"]}),
            ));
        }
        events.push(("response.output_item.done", json!({"output_index": index, "item": item})));
    }
    let kind = if response["status"] == "incomplete" { "response.incomplete" } else { "response.completed" };
    events.push((kind, json!({"response": response})));
    events
}

/// A failure after the stream began: the Responses API's `error` event, with the error in
/// OpenAI's shape beside it (the official clients raise it).
fn error_event(e: &ApiError) -> (&'static str, Value) {
    let body = e.clone().openai().body();
    let mut event = json!({"code": e.code, "message": e.message, "param": null});
    if let (Value::Object(body), Some(fields)) = (body, event.as_object_mut()) {
        fields.extend(body);
    }
    ("error", event)
}
