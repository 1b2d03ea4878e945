//! `POST /v1/decide`: proceed, retry or escalate, from one iteration's results, as
//! `redraft decide` answers it.

use axum::Json;
use axum::extract::State;
use redraft::core::decide::{IterationCheck, decide};
use serde_json::{Value, json};

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::openapi::ErrorBody;
use crate::state::AppState;

/// Decide the next step.
#[utoipa::path(
    post,
    path = "/v1/decide",
    tag = "checks",
    request_body(content = Object, description = "`{task_id, current_iteration, max_iterations, test_result: {status: pass|fail, output}, review_result?: {status: approve|reject|pending, feedback}, history?}`, optionally wrapped in `iteration_check`"),
    responses(
        (status = 200, description = "`{decision: {action: proceed|retry|escalate, …}}`", body = Object),
        (status = 400, description = "Not an iteration check", body = ErrorBody),
    )
)]
pub async fn decide_next(
    State(state): State<AppState>,
    JsonBody(value): JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let inner = match value {
        Value::Object(mut map) if map.contains_key("iteration_check") => {
            map.remove("iteration_check").unwrap_or_default()
        }
        other => other,
    };
    let check: IterationCheck = serde_json::from_value(inner).map_err(|e| {
        ApiError::bad_request(
            "invalid_request",
            format!(
                "the iteration check is invalid: {e}\nhint: it needs task_id, current_iteration, max_iterations, test_result {{status: pass|fail, output}} and optionally review_result {{status: approve|reject|pending, feedback}}"
            ),
        )
    })?;
    Ok(Json(json!({ "decision": decide(&check, &state.config().decide) })))
}
