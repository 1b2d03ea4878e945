//! Runs: `POST /v1/iterate` (run and wait), `POST /v1/runs` (run in the background),
//! `GET /v1/runs`, `GET /v1/runs/{id}`, its SSE events, and `DELETE` to cancel.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use redraft::RunSpec;
use redraft::core::{RunFilter, RunResult, RunState, RunStatus};
use redraft::queue::Accepted;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::events;
use crate::openapi::ErrorBody;
use crate::state::AppState;

/// How long `DELETE` waits for the cancelled run to halt before answering 202.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// `POST /v1/runs` answers with the new run's id.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RunAccepted {
    pub run_id: String,
}

/// The deepest page `GET /v1/runs` reads (a search narrows what is listed; paging past a
/// million runs is a job for the database, not this list).
const MAX_OFFSET: u32 = 1_000_000;

/// `GET /v1/runs` filters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only runs in this state: `queued`, `running`, `succeeded`, `failed`, `awaiting_input`.
    pub status: Option<String>,
    /// Only runs of this proposer (`provider/model`), exactly.
    pub model: Option<String>,
    /// Only runs checked against this kind.
    pub kind: Option<String>,
    /// Only runs whose id, model, kind or prompt contains this text (ignoring ASCII case).
    pub q: Option<String>,
    /// At most this many, newest first (1..=1000). By default, 50.
    pub limit: Option<String>,
    /// Skip this many matching runs first: the `next_offset` of the page before.
    pub offset: Option<String>,
}

/// The response for a finished run: 200 with the result when it succeeded, 422 with the
/// result and an `error` when it failed, 202 with the result when it awaits a person's answer
/// (`Location`: the run, which `POST …/answer` continues).
pub fn result_response(result: RunResult) -> Response {
    if result.succeeded() {
        return (StatusCode::OK, Json(result)).into_response();
    }
    if result.status == RunStatus::AwaitingInput {
        let location = format!("/v1/runs/{}", result.run_id);
        return (StatusCode::ACCEPTED, [(header::LOCATION, location)], Json(result)).into_response();
    }
    let mut body = serde_json::to_value(&result).unwrap_or_else(|_| json!({"run_id": result.run_id}));
    if body.get("error").is_none_or(Value::is_null) {
        body["error"] = json!({"code": result.halted_because.as_str(), "message": failure_message(&result)});
    }
    (StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response()
}

/// One line on why a run failed.
pub fn failure_message(result: &RunResult) -> String {
    match result.escalation.as_ref().map(|e| e.summary.as_str()).filter(|s| !s.is_empty()) {
        Some(summary) => format!("the run failed: {summary}"),
        None => {
            format!("the run failed after {} attempt(s): halted because {}", result.iterations, result.halted_because)
        }
    }
}

/// Store a run, then wait for its result: at once when a slot is free here, else as it waits
/// in the queue for one (here or on another worker). A run still queued after `[queue]
/// max_wait` is withdrawn — never run — and the answer is 503 with `Retry-After`.
pub async fn run_and_wait(state: &AppState, spec: RunSpec) -> Result<RunResult, ApiError> {
    start(state, &spec).await?.result().await
}

/// Store a run (started here or queued): once this returns, the run exists, and what is wrong
/// with the request or the server's load has been answered.
pub async fn start(state: &AppState, spec: &RunSpec) -> Result<Started, ApiError> {
    let run_id = redraft::new_run_id();
    let accepted = state.accept(&run_id, spec).await?;
    Ok(Started { run_id, accepted, state: state.clone() })
}

/// A run stored by [`start`], not finished yet.
#[derive(Debug)]
pub struct Started {
    pub run_id: String,
    accepted: Accepted,
    state: AppState,
}

impl Started {
    /// Wait for the run's result.
    pub async fn result(self) -> Result<RunResult, ApiError> {
        let Self { run_id, accepted, state } = self;
        match accepted {
            Accepted::Started(handle) => {
                let outcome = handle.await.map_err(|e| ApiError::internal(format!("the run's task failed: {e}")))?;
                Ok(outcome?)
            }
            Accepted::Queued => match state.executor().wait(&run_id).await? {
                Some(result) => Ok(result),
                None => {
                    state.metrics().run_shed(crate::metrics::ShedReason::Overloaded);
                    let waited = redraft::core::duration::format(state.config().queue.max_wait);
                    Err(ApiError::busy(
                        format!(
                            "every run slot stayed busy for {waited} (`[queue] max_wait`): the run was withdrawn, nothing was sent to a model"
                        ),
                        5,
                    ))
                }
            },
        }
    }
}

/// Run a loop and answer with its result.
#[utoipa::path(
    post,
    path = "/v1/iterate",
    tag = "runs",
    request_body(content = Object, description = "A run spec (schema `RunSpec`)", content_type = "application/json"),
    responses(
        (status = 200, description = "The run succeeded: the result (artifact, validation, history, metrics)", body = Object),
        (status = 422, description = "The run failed: the result, with the best-so-far artifact, the history, the escalation and an `error`", body = Object),
        (status = 202, description = "The run awaits a person's answer (`on_escalation: await`): the result so far with its escalation; `Location` is the run, which `POST /v1/runs/{id}/answer` continues", body = Object),
        (status = 400, description = "Malformed request or over a ceiling; nothing was run", body = ErrorBody),
        (status = 403, description = "An `exec:` command outside the allow-list, or a model that reads files", body = ErrorBody),
        (status = 404, description = "An unknown kind", body = ErrorBody),
        (status = 503, description = "The queue is full, or the run waited `[queue] max_wait` for a slot and was withdrawn (see `Retry-After`); nothing was sent to a model", body = ErrorBody),
    )
)]
pub async fn iterate(State(state): State<AppState>, JsonBody(spec): JsonBody<RunSpec>) -> Result<Response, ApiError> {
    Ok(result_response(run_and_wait(&state, spec).await?))
}

/// Start a run in the background.
#[utoipa::path(
    post,
    path = "/v1/runs",
    tag = "runs",
    request_body(content = Object, description = "A run spec (schema `RunSpec`)", content_type = "application/json"),
    responses(
        (status = 202, description = "The run is stored: started, or queued until a worker has a free slot; it is recorded as it happens", body = RunAccepted),
        (status = 400, description = "Malformed request or over a ceiling; nothing was run", body = ErrorBody),
        (status = 403, description = "An `exec:` command outside the allow-list", body = ErrorBody),
        (status = 503, description = "The queue is full or the store cannot take the run now (see `Retry-After`); nothing was stored", body = ErrorBody),
    )
)]
pub async fn create_run(
    State(state): State<AppState>,
    JsonBody(spec): JsonBody<RunSpec>,
) -> Result<Response, ApiError> {
    let run_id = redraft::new_run_id();
    // Stored (queued, or running here) before it is acknowledged.
    drop(state.accept(&run_id, &spec).await?);
    let location = format!("/v1/runs/{run_id}");
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, location)], Json(RunAccepted { run_id })).into_response())
}

/// List recorded runs, newest first.
#[utoipa::path(
    get,
    path = "/v1/runs",
    tag = "runs",
    params(ListQuery),
    responses(
        (status = 200, description = "`{runs: [{run_id, state, created_at_ms, updated_at_ms, iterations, halted_because, best_score, model, kind}], next_offset}`: `next_offset` is the `offset` of the next page, `null` on the last", body = Object),
        (status = 400, description = "An unknown state, or a bad limit or offset", body = ErrorBody),
    )
)]
pub async fn list_runs(State(state): State<AppState>, Query(q): Query<ListQuery>) -> Result<Json<Value>, ApiError> {
    let status = q
        .status
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(str::parse::<RunState>)
        .transpose()
        .map_err(|e| ApiError::bad_request("invalid_field", format!("`status`: {e}")))?;
    let limit = match q.limit.as_deref().filter(|s| !s.is_empty()) {
        None => 50,
        Some(text) => text.parse::<u32>().ok().filter(|n| (1..=1000).contains(n)).ok_or_else(|| {
            ApiError::bad_request("invalid_field", format!("`limit` = `{text}` must be a number in 1..=1000"))
        })?,
    };
    let offset = match q.offset.as_deref().filter(|s| !s.is_empty()) {
        None => 0,
        Some(text) => text.parse::<u32>().ok().filter(|n| *n <= MAX_OFFSET).ok_or_else(|| {
            ApiError::bad_request("invalid_field", format!("`offset` = `{text}` must be a number in 0..={MAX_OFFSET}"))
        })?,
    };
    let given = |v: Option<String>| v.filter(|s| !s.is_empty());
    let filter = RunFilter {
        state: status,
        model: given(q.model),
        kind: given(q.kind),
        text: given(q.q),
        // One more than asked tells whether there is a next page.
        limit: Some(limit + 1),
        offset: Some(offset),
    };
    let mut runs = state.store().list(&filter).await?;
    let next_offset = (runs.len() > limit as usize).then_some(offset + limit);
    runs.truncate(limit as usize);
    Ok(Json(json!({ "runs": runs, "next_offset": next_offset })))
}

/// A run: its result once it halted (or while it awaits an answer), else what it has so far;
/// with its `state` and its `spec` (the task and the evaluators, as requested) either way.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}",
    tag = "runs",
    params(("id" = String, Path, description = "The run id")),
    responses(
        (status = 200, description = "The result of a finished or awaiting run plus its `state` and `spec` (the request: prompt, system, context, evaluators, policy), or `{run_id, state, spec, iterations, history, holder}` of one queued or in flight (`holder`: the worker and its lease, while running)", body = Object),
        (status = 404, description = "No such run", body = ErrorBody),
    )
)]
pub async fn get_run(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    if let Some(stored) = state.store().run(&id).await? {
        if let Some(result) = stored.result.filter(|_| stored.state.has_result()) {
            let mut value = serde_json::to_value(result).unwrap_or_default();
            if let Some(fields) = value.as_object_mut() {
                fields.insert("state".into(), json!(stored.state));
                fields.insert("spec".into(), stored.spec);
            }
            return Ok(Json(value));
        }
        return Ok(Json(json!({
            "run_id": stored.run_id,
            "state": stored.state,
            "spec": stored.spec,
            "iterations": stored.attempts.len(),
            "history": stored.attempts,
            "holder": stored.holder,
        })));
    }
    Err(unknown_run(&id))
}

/// The run's events as they happen (SSE): `attempt_started`, `attempt_finished`,
/// `run_finished`. Earlier events are replayed first; the stream ends after `run_finished`.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/events",
    tag = "runs",
    params(("id" = String, Path, description = "The run id")),
    responses(
        (status = 200, description = "`text/event-stream`: `attempt_started` `{run_id, iteration}`, `attempt_finished` `{run_id, attempt}`, `run_finished` (the result)", content_type = "text/event-stream"),
        (status = 404, description = "No such run", body = ErrorBody),
    )
)]
pub async fn run_events(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let live = state.live(&id);
    let stored = state.store().run(&id).await?;
    let events = match (live, stored) {
        (Some(live), stored) => events::live_stream(&live, stored),
        (None, Some(stored)) => events::stored_stream(state.store(), stored, Duration::from_millis(500)),
        (None, None) => {
            // It may have halted between the two lookups.
            match state.store().run(&id).await? {
                Some(stored) => events::stored_stream(state.store(), stored, Duration::from_millis(500)),
                None => return Err(unknown_run(&id)),
            }
        }
    };
    let stream = events::sse(events, state.shutdown().clone());
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

/// Cancel a run in flight: it halts with `cancelled` (the attempt in flight is recorded).
#[utoipa::path(
    delete,
    path = "/v1/runs/{id}",
    tag = "runs",
    params(("id" = String, Path, description = "The run id")),
    responses(
        (status = 200, description = "The run halted: its result (`halted_because: cancelled`)", body = Object),
        (status = 202, description = "Cancelling: the run has not halted yet", body = Object),
        (status = 403, description = "The run was started by the CLI (`run_not_allowed`)", body = ErrorBody),
        (status = 404, description = "No such run", body = ErrorBody),
        (status = 409, description = "The run already halted", body = ErrorBody),
    )
)]
pub async fn cancel_run(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    if let Some(live) = state.live(&id) {
        // Halted, though not yet out of the live map (nor perhaps written to the store).
        if let Some(result) = live.result() {
            return Err(finished(&id, &result.halted_because.to_string()));
        }
        live.cancel.cancel();
        return Ok(match live.finished(CANCEL_WAIT).await {
            Some(result) => (StatusCode::OK, Json(result)).into_response(),
            None => (StatusCode::ACCEPTED, Json(json!({"run_id": id, "state": "cancelling"}))).into_response(),
        });
    }
    // Not this server's: a run the user's CLI started is not the network's to end.
    may_touch(&state, &id).await?;
    // Queued: claimed here and halted at once, without a model call.
    if let Some(result) = state.executor().cancel_queued(&id).await? {
        return Ok((StatusCode::OK, Json(result)).into_response());
    }
    // Running in another process: its worker sees the request when it next renews its lease.
    match state.store().request_cancel(&id).await? {
        // Waiting for a person: cancelling it aborts it.
        RunState::AwaitingInput => Ok((StatusCode::OK, Json(state.store().abort_run(&id).await?)).into_response()),
        RunState::Succeeded | RunState::Failed => {
            let stored = state.store().run(&id).await?.ok_or_else(|| unknown_run(&id))?;
            Err(finished(&id, stored.state.as_str()))
        }
        RunState::Queued | RunState::Running => {
            let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
            while tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if let Some(stored) = state.store().run(&id).await?
                    && let Some(result) = stored.result.filter(|_| stored.state.is_finished())
                {
                    return Ok((StatusCode::OK, Json(result)).into_response());
                }
            }
            Ok((StatusCode::ACCEPTED, Json(json!({"run_id": id, "state": "cancelling"}))).into_response())
        }
    }
}

/// A person's answer to a run's escalation.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerBody {
    /// What the person answers to the escalation's question; given to the model as their reply.
    pub answer: String,
    /// Attempts the run may make after the answer. By default, as many as it had.
    pub max_iterations: Option<u32>,
}

/// Answer the escalation of a run awaiting input: the run goes back to the queue and continues
/// from where it stopped, the answer given to the model as a person's reply to the question.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/answer",
    tag = "runs",
    params(("id" = String, Path, description = "The run id")),
    request_body = AnswerBody,
    responses(
        (status = 202, description = "The answer is stored and the run queued: `{run_id, state}`; follow it with `GET /v1/runs/{id}` or its events", body = Object),
        (status = 400, description = "An empty answer, or `max_iterations` out of range; nothing was stored", body = ErrorBody),
        (status = 403, description = "The run was started by the CLI (`run_not_allowed`)", body = ErrorBody),
        (status = 404, description = "No such run", body = ErrorBody),
        (status = 409, description = "The run is not awaiting an answer (`not_awaiting_input`)", body = ErrorBody),
    )
)]
pub async fn answer_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<AnswerBody>,
) -> Result<Response, ApiError> {
    let stored = state.store().run(&id).await?.ok_or_else(|| unknown_run(&id))?;
    let reply = redraft::recorder::person_reply(&stored, &body.answer, body.max_iterations, &state.setup())?;
    state.store().answer_run(&id, &reply, None).await?;
    state.executor().wake();
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, format!("/v1/runs/{id}"))],
        Json(json!({"run_id": id, "state": "queued"})),
    )
        .into_response())
}

/// End a run awaiting input as failed, with its escalation.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/abort",
    tag = "runs",
    params(("id" = String, Path, description = "The run id")),
    responses(
        (status = 200, description = "The run failed: its result, escalation kept", body = Object),
        (status = 403, description = "The run was started by the CLI (`run_not_allowed`)", body = ErrorBody),
        (status = 404, description = "No such run", body = ErrorBody),
        (status = 409, description = "The run is not awaiting an answer (`not_awaiting_input`)", body = ErrorBody),
    )
)]
pub async fn abort_run(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    may_touch(&state, &id).await?;
    Ok((StatusCode::OK, Json(state.store().abort_run(&id).await?)).into_response())
}

/// Refuses a request to end or continue a run the user's own CLI started (403).
async fn may_touch(state: &AppState, id: &str) -> Result<(), ApiError> {
    let stored = state.store().run(id).await?.ok_or_else(|| unknown_run(id))?;
    state.guard().may_touch(id, stored.origin)?;
    Ok(())
}

fn finished(id: &str, how: &str) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, "run_finished", format!("run `{id}` already halted ({how})"))
}

fn unknown_run(id: &str) -> ApiError {
    ApiError::not_found(
        "unknown_run",
        format!("run `{id}` is not in the store\nhint: `GET /v1/runs` lists the recorded runs"),
    )
}
