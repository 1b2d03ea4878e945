//! For operators: `/healthz`, `/metrics` and the run viewer page at `/`.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use serde_json::{Value, json};

use crate::state::AppState;

/// The run viewer: one HTML page with its script, no build step.
const VIEWER: &str = include_str!("viewer.html");

/// Liveness.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    responses((status = 200, description = "`{status: \"ok\", runs_in_flight}`", body = Object))
)]
pub async fn healthz(State(state): State<AppState>) -> Json<Value> {
    Json(json!({"status": "ok", "runs_in_flight": state.in_flight()}))
}

/// Counters in the Prometheus text format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    responses((status = 200, description = "HTTP requests by route and status with latency; runs by status and halt reason; attempts, tokens and cost by model; attempt durations; transport retries; the run queue", content_type = "text/plain"))
)]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    state.refresh_queue_metrics().await;
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], state.metrics().render(state.in_flight()))
}

/// The run viewer page.
#[utoipa::path(
    get,
    path = "/",
    tag = "operations",
    responses((status = 200, description = "An HTML page that lists runs and shows one run's history", content_type = "text/html"))
)]
pub async fn viewer() -> Html<&'static str> {
    Html(VIEWER)
}

/// A run's page in the viewer: its task, evaluators, attempts, diffs and chart, live.
#[utoipa::path(
    get,
    path = "/runs/{id}",
    tag = "operations",
    params(("id" = String, Path, description = "The run id")),
    responses((status = 200, description = "The run viewer, opened on this run (the page asks `GET /v1/runs/{id}` for it)", content_type = "text/html"))
)]
pub async fn run_page() -> Html<&'static str> {
    Html(VIEWER)
}
