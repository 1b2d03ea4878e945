//! `POST /v1/validate`: check an artifact against a kind or a schema, no model involved.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use std::sync::Arc;

use redraft::core::{Evaluator, Issue, codes};
use redraft::eval::kind::KindEvaluator;
use redraft::eval::{Formats, SchemaEvaluator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::openapi::ErrorBody;
use crate::state::AppState;

/// What to check, and against what.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateRequest {
    /// A registered kind: its schema, then its rules.
    pub kind: Option<String>,
    /// An inline JSON Schema.
    #[schema(value_type = Option<Object>)]
    pub schema: Option<Value>,
    /// The JSON value to check.
    #[schema(value_type = Object)]
    pub artifact: Value,
    /// A JSON object the kind's rules read as `context`.
    #[schema(value_type = Option<Object>)]
    pub context: Option<Value>,
    /// Whether JSON Schema `format`s are checked (`"date"` rejects `"July 4th"`); `false` makes
    /// them annotations only. By default, the server's `check_formats` (`true`).
    pub check_formats: Option<bool>,
}

/// The verdict: every issue, with its JSON Pointer path and code.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ValidateReport {
    pub passed: bool,
    /// `{path, message, code, severity?, expected?, found?}`.
    #[schema(value_type = Vec<Object>)]
    pub issues: Vec<Issue>,
}

/// Check an artifact.
#[utoipa::path(
    post,
    path = "/v1/validate",
    tag = "checks",
    request_body = ValidateRequest,
    responses(
        (status = 200, description = "The artifact is valid", body = ValidateReport),
        (status = 422, description = "The artifact has issues", body = ValidateReport),
        (status = 400, description = "Malformed request, or an invalid schema", body = ErrorBody),
        (status = 404, description = "An unknown kind", body = ErrorBody),
        (status = 503, description = "As many checks as the server runs at once are running (`Retry-After`)", body = ErrorBody),
    )
)]
pub async fn validate(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<ValidateRequest>,
) -> Result<(StatusCode, Json<ValidateReport>), ApiError> {
    let context = match req.context {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(c) if c.is_object() => c,
        Some(_) => return Err(ApiError::bad_request("invalid_field", "`context` must be a JSON object")),
    };
    let formats = Formats::checked(req.check_formats.unwrap_or(state.config().check_formats));
    let Some(_slot) = state.check_slot() else {
        return Err(ApiError::busy(
            format!("{} checks are running, as many as this server runs at once", crate::state::checks_at_once()),
            1,
        ));
    };
    let evaluator: Arc<dyn Evaluator> = match (req.kind, req.schema) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request("invalid_request", "give `kind` or `schema`, not both"));
        }
        (None, None) => {
            return Err(ApiError::bad_request(
                "invalid_request",
                "give `kind` (a registered kind) or `schema` (a JSON Schema)",
            ));
        }
        // Compiling a schema computes (its patterns among others): off the request threads.
        (None, Some(schema)) => tokio::task::spawn_blocking(move || SchemaEvaluator::of(&schema, formats))
            .await
            .map_err(|e| ApiError::internal(format!("compiling the schema failed: {e}")))?
            .map(|schema| Arc::new(schema) as Arc<dyn Evaluator>)
            .map_err(|e| ApiError::bad_request("invalid_schema", e.to_string()))?,
        (Some(name), None) => {
            let kinds = state.kinds().ok_or_else(|| {
                ApiError::not_found(
                    "unknown_kind",
                    format!(
                        "unknown kind `{name}`: no kinds are loaded (`{}` is not a directory)",
                        state.config().kinds_dir.display()
                    ),
                )
            })?;
            Arc::new(
                KindEvaluator::new(kinds.require(&name)?, formats)
                    .map_err(|e| ApiError::bad_request("invalid_kind", e.to_string()))?,
            )
        }
    };
    // Checked as an attempt is: off the threads that serve requests, within the configured
    // `attempt_timeout`, and told to stop when that runs out or the client goes away.
    let budget = state.config().policy.attempt_timeout;
    let checking = redraft::runner::verdict(std::slice::from_ref(&evaluator), &req.artifact, &context, 1);
    let issues = match tokio::time::timeout(budget, checking).await {
        // One evaluator: the report names none, as before.
        Ok(verdict) => verdict.issues.into_iter().map(|issue| Issue { evaluator: None, ..issue }).collect(),
        Err(_) => vec![Issue::new(
            "",
            codes::CHECK_TIMEOUT,
            format!(
                "the artifact could not be checked within `attempt_timeout` ({}): check a smaller artifact, or a simpler schema",
                redraft::core::duration::format(budget)
            ),
        )],
    };
    let passed = !issues.iter().any(Issue::is_error);
    let status = if passed { StatusCode::OK } else { StatusCode::UNPROCESSABLE_ENTITY };
    Ok((status, Json(ValidateReport { passed, issues })))
}
