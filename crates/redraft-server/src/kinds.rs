//! `GET /v1/kinds` and `GET /v1/kinds/{name}`: the registered artifact types.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::openapi::ErrorBody;
use crate::state::AppState;

/// The kinds, by name.
#[utoipa::path(
    get,
    path = "/v1/kinds",
    tag = "kinds",
    responses((status = 200, description = "`{kinds: [{name, description, rules, has_example}]}`", body = Object))
)]
pub async fn list_kinds(State(state): State<AppState>) -> Json<Value> {
    let kinds: Vec<Value> = state
        .kinds()
        .map(|k| {
            k.iter()
                .map(|k| {
                    json!({"name": k.name, "description": k.description, "rules": k.rule_codes(), "has_example": k.example.is_some()})
                })
                .collect()
        })
        .unwrap_or_default();
    Json(json!({ "kinds": kinds }))
}

/// One kind: its schema, example, rules and tables.
#[utoipa::path(
    get,
    path = "/v1/kinds/{name}",
    tag = "kinds",
    params(("name" = String, Path, description = "The kind's name")),
    responses(
        (status = 200, description = "`{name, description, prompt, schema, example, rules, tables, llm_check}`", body = Object),
        (status = 404, description = "No such kind", body = ErrorBody),
    )
)]
pub async fn show_kind(State(state): State<AppState>, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    let kinds = state
        .kinds()
        .ok_or_else(|| ApiError::not_found("unknown_kind", format!("unknown kind `{name}`: no kinds are loaded")))?;
    let kind = kinds.require(&name)?;
    Ok(Json(kind.describe()))
}
