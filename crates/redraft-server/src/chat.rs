//! `POST /v1/chat`: one call to a model, no loop, no check — with the loop's transport retries
//! and time limits, in one of the server's slots.

use axum::Json;
use axum::extract::State;
use redraft::RunSpec;
use redraft::core::{ChatRequest, FinishReason, Message, Role, Usage};
use serde::{Deserialize, Serialize};

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::openapi::ErrorBody;
use crate::state::AppState;

/// A chat request: a prompt or messages, for `provider/model` (or `model` of `provider`).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatBody {
    /// A named provider from the config.
    pub provider: Option<String>,
    /// `provider/model`, a bare model of `provider`, or (absent) the default model.
    pub model: Option<String>,
    /// One user message.
    pub prompt: Option<String>,
    /// The whole conversation instead of `prompt`.
    #[schema(value_type = Option<Vec<Object>>)]
    pub messages: Option<Vec<Message>>,
    /// A system message, sent first.
    pub system: Option<String>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
}

/// The model's answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChatAnswer {
    pub text: String,
    /// `{input_tokens, output_tokens}` as the provider reported them (null when it did not).
    #[schema(value_type = Option<Object>)]
    pub usage: Option<Usage>,
    /// The `provider/model` that answered.
    pub model: String,
    #[schema(value_type = Option<String>)]
    pub finish_reason: Option<FinishReason>,
}

/// Ask a model once.
#[utoipa::path(
    post,
    path = "/v1/chat",
    tag = "models",
    request_body = ChatBody,
    responses(
        (status = 200, description = "The model's answer", body = ChatAnswer),
        (status = 400, description = "Malformed request or an unknown model", body = ErrorBody),
        (status = 502, description = "The model's server failed", body = ErrorBody),
    )
)]
pub async fn chat(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<ChatBody>,
) -> Result<Json<ChatAnswer>, ApiError> {
    let mut messages = Vec::new();
    if let Some(system) = body.system {
        messages.push(Message::system(system));
    }
    match (body.prompt, body.messages) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request("invalid_request", "give `prompt` or `messages`, not both"));
        }
        (None, None) => return Err(ApiError::bad_request("invalid_request", "give `prompt` (text) or `messages`")),
        (Some(prompt), None) => messages.push(Message::user(prompt)),
        (None, Some(list)) => messages.extend(list),
    }
    if !messages.iter().any(|m| m.role == Role::User) {
        return Err(ApiError::bad_request("invalid_request", "the conversation has no user message"));
    }
    let spec = RunSpec {
        provider: body.provider,
        model: body.model,
        temperature: body.temperature,
        max_tokens: body.max_tokens,
        ..RunSpec::default()
    };
    let runner = spec.prepare_call(&state.setup())?;
    let request =
        ChatRequest { temperature: body.temperature, max_tokens: body.max_tokens, ..ChatRequest::new(messages) };
    let _slot = state.call_slot().await?;
    let response = runner.call(&request).await?;
    Ok(Json(ChatAnswer {
        text: response.text,
        usage: response.usage,
        model: runner.model_name().to_owned(),
        finish_reason: response.finish_reason,
    }))
}
