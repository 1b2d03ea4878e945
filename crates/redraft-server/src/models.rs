//! `GET /v1/models` and `GET /v1/models/{id}`: the models a client may name — those the
//! configuration names (default, fallback, judge, priced), and those each OpenAI-compatible
//! backend lists itself (`GET /models`), as `provider/model`.
//!
//! A backend's list is asked for at most once a minute ([`LIST_FOR`]), within [`ASK_WITHIN`];
//! a backend that does not answer is left out of the list (and logged), never an error.

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, State};
use redraft::RunSpec;
use redraft::config::{Config, ProviderType};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::error::ApiError;
use crate::state::AppState;

/// How long a backend's list is kept.
const LIST_FOR: Duration = Duration::from_secs(60);
/// How long a backend has to list its models.
const ASK_WITHIN: Duration = Duration::from_secs(5);

/// The backends' lists, as last asked.
#[derive(Debug, Default)]
pub(crate) struct BackendModels {
    listed: Mutex<Option<(Instant, Vec<String>)>>,
}

impl BackendModels {
    /// Every OpenAI-compatible backend's models, as `provider/model` (from the last minute's
    /// answers, else asked now).
    async fn get(&self, state: &AppState) -> Vec<String> {
        let config = state.config();
        let mut listed = self.listed.lock().await;
        if let Some((at, ids)) = listed.as_ref()
            && at.elapsed() < LIST_FOR
        {
            return ids.clone();
        }
        let asked = futures_util::future::join_all(compatible_providers(config).into_iter().map(|name| async move {
            // Prepared as every model a request names, through the guard.
            let spec = RunSpec { model: Some(format!("{name}/list")), ..RunSpec::default() };
            let Ok(runner) = spec.prepare_call(&state.setup()) else { return Vec::new() };
            match tokio::time::timeout(ASK_WITHIN, runner.list_models()).await {
                Ok(Some(Ok(ids))) => ids.into_iter().map(|id| format!("{name}/{id}")).collect(),
                Ok(Some(Err(e))) => {
                    tracing::warn!(provider = %name, "the backend's model list is left out: {e}");
                    Vec::new()
                }
                Ok(None) => Vec::new(),
                Err(_) => {
                    tracing::warn!(provider = %name, "the backend's model list is left out: no answer within {}s", ASK_WITHIN.as_secs());
                    Vec::new()
                }
            }
        }))
        .await;
        let ids: Vec<String> = asked.into_iter().flatten().collect();
        *listed = Some((Instant::now(), ids.clone()));
        ids
    }
}

/// The providers that speak OpenAI's API: those configured so, and the built-in `openai` when
/// `OPENAI_BASE_URL` names its server (a key alone means OpenAI's own list, not asked for).
fn compatible_providers(config: &Config) -> Vec<String> {
    let mut names: Vec<String> =
        config.providers.iter().filter(|(_, p)| p.kind == ProviderType::Openai).map(|(n, _)| n.clone()).collect();
    let from_env = std::env::var_os("OPENAI_BASE_URL").is_some_and(|v| !v.is_empty());
    if from_env && !config.providers.contains_key("openai") {
        names.push("openai".into());
    }
    names
}

/// The models a client may name.
#[utoipa::path(
    get,
    path = "/v1/models",
    tag = "openai",
    responses((status = 200, description = "OpenAI's model list: the configured default, fallback, judge and priced models, then those each OpenAI-compatible backend lists", body = Object))
)]
pub async fn models(State(state): State<AppState>) -> Json<Value> {
    let data: Vec<Value> = model_ids(&state).await.iter().map(|id| model_object(id)).collect();
    Json(json!({"object": "list", "data": data}))
}

/// One model of the list, by id (`provider/model`; a bare name is the default provider's).
#[utoipa::path(
    get,
    path = "/v1/models/{id}",
    tag = "openai",
    params(("id" = String, Path, description = "The model's id as `GET /v1/models` lists it, `/` included (`openai/gpt-4o-mini`)")),
    responses(
        (status = 200, description = "OpenAI's model object", body = Object),
        (status = 404, description = "The server does not list this model", body = Object)
    )
)]
pub async fn model(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let wanted = state.config().model_name(Some(&id)).unwrap_or_else(|_| id.clone());
    let ids = model_ids(&state).await;
    match ids.iter().find(|listed| **listed == id || **listed == wanted) {
        Some(listed) => Ok(Json(model_object(listed))),
        None => Err(ApiError::not_found(
            "model_not_found",
            format!("the model `{id}` is not one this server lists; `GET /v1/models` lists them"),
        )
        .openai()),
    }
}

/// The configured default, fallback, judge and priced models, then the backends' own, each
/// once, as `provider/model`.
async fn model_ids(state: &AppState) -> Vec<String> {
    let config = state.config();
    let mut names: Vec<String> = Vec::new();
    let configured = config
        .default_model
        .iter()
        .chain(config.fallback_models.iter())
        .chain(config.judge_model.iter())
        .chain(config.models.keys())
        .filter_map(|name| config.model_name(Some(name)).ok());
    for name in configured.chain(state.backend_models().get(state).await) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// OpenAI's model object for `id`.
fn model_object(id: &str) -> Value {
    let owner = id.split_once('/').map_or("redraft", |(p, _)| p);
    json!({"id": id, "object": "model", "created": 0, "owned_by": owner})
}
