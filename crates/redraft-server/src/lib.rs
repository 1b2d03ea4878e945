//! redraft's HTTP face: the JSON API over the one loop, SSE run events, the OpenAI-compatible
//! proxy, metrics, the OpenAPI document and a run viewer page.
//!
//! Key design decision: the server adds no loop of its own. Every run — `POST /v1/iterate`,
//! `POST /v1/runs`, a checked `POST /v1/chat/completions`, a run resumed on start — is a
//! [`redraft::RunSpec`] started with [`redraft::recorder`] as a background task, recorded in
//! the store as it happens; requests only wait for it, watch it (SSE) or cancel it. A call
//! outside a run (`/v1/chat`, the proxy's pass-through) is a spec too, prepared with
//! [`redraft::RunSpec::prepare_call`] and made by the runner, with its retries. Errors map
//! to HTTP statuses in one place ([`error::ApiError`]). Every request passes one gate first,
//! a layer over the whole router: the `Host` must name this server, a web page must be the
//! server's own or at a listed origin, the bearer token when there are tokens, a JSON content
//! type on anything that may change state — deny by default, so a route added later is covered.
//!
//! ```no_run
//! # async fn demo() -> Result<(), redraft_server::ServerError> {
//! let config = redraft::Config::load(None)?;
//! let tokens = redraft_server::tokens_from_env(&config.server.tokens_env);
//! let server = redraft_server::Server::bind(config, Some("127.0.0.1:8080"), tokens).await?;
//! server.run(redraft_server::shutdown_signal()).await
//! # }
//! ```

mod auth;
mod body;
mod chat;
mod decide;
pub mod error;
mod events;
mod gate;
mod kinds;
mod listener;
mod metrics;
mod models;
pub mod openapi;
mod ops;
mod origin;
mod proxy;
mod redact;
mod responses;
mod runs;
mod serve;
mod state;
mod validate;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::Request;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router, middleware};
use tower::ServiceBuilder;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::ApiError;
pub use metrics::{MAX_MODELS, Metrics, ShedReason};
pub use origin::AllowListError;
pub use serve::{Server, ServerError, shutdown_signal, tokens_from_env};
pub use state::AppState;

/// The whole HTTP API over `state`, with its layers: request ids, tracing, the gate
/// (the `Host` names this server, a browser's page may call it, the bearer token, JSON bodies;
/// CORS for `[server] cors_origins`), the body-size limit and the request metrics (outermost, so
/// that refusals count too).
pub fn router(state: AppState) -> Router {
    let (api, doc) = OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(runs::iterate))
        .routes(routes!(runs::create_run, runs::list_runs))
        .routes(routes!(runs::get_run, runs::cancel_run))
        .routes(routes!(runs::run_events))
        .routes(routes!(runs::answer_run))
        .routes(routes!(runs::abort_run))
        .routes(routes!(validate::validate))
        .routes(routes!(chat::chat))
        .routes(routes!(decide::decide_next))
        .routes(routes!(kinds::list_kinds))
        .routes(routes!(kinds::show_kind))
        .routes(routes!(proxy::chat_completions))
        .routes(routes!(responses::responses))
        .routes(routes!(models::models))
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::metrics))
        .routes(routes!(ops::viewer))
        .routes(routes!(ops::run_page))
        .split_for_parts();
    let doc = Arc::new(openapi::document(doc));
    let limit = state.config().server.max_body_bytes;
    api.route("/openapi.json", get(move || async move { Json(doc.as_ref().clone()) }))
        // A model's id may contain `/`: the rest of the path is the id.
        .route("/v1/models/{*id}", get(models::model))
        .fallback(|| async {
            ApiError::not_found("not_found", "no such endpoint; `GET /openapi.json` lists them").into_response()
        })
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state.clone())
        // Last, so that it covers every route above and the fallback.
        .layer(middleware::from_fn_with_state(gate::Gate::new(&state), gate::check))
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(|req: &Request<_>| {
                            let id = req.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("-");
                            tracing::info_span!("request", method = %req.method(), uri = %req.uri(), request_id = %id)
                        })
                        .on_response(DefaultOnResponse::new().level(tracing::Level::INFO)),
                )
                .layer(PropagateRequestIdLayer::x_request_id()),
        )
        // Per route, after routing: the route template is known (the fallback has none).
        .layer(middleware::from_fn_with_state(state.clone(), metrics::track))
        // Outermost: no body leaves with a known secret in it, whatever made it.
        .layer(middleware::map_response(redact::response))
}
