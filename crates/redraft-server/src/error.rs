//! Every error an endpoint answers with, mapped to an HTTP status in one place.
//!
//! The body is `{"error": {"message", "code"}}`; the OpenAI-compatible endpoints add `type`
//! (and `run_id` when a run was made), as OpenAI's clients expect.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use redraft::core::{PlanError, ProviderError, StoreError};
use redraft::eval::kind::KindError;
use redraft::{ConfigError, RunError};
use serde_json::{Value, json};

/// Which error body the client expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flavor {
    /// `{"error": {"message", "code"}}`.
    #[default]
    Redraft,
    /// OpenAI's: `{"error": {"message", "type", "code", …}}`.
    OpenAi,
}

/// An endpoint's error: a status, a short machine `code` and a message for people.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub flavor: Flavor,
    more: Box<More>,
}

/// What few errors carry (boxed: errors travel in `Result`s).
#[derive(Debug, Clone, Default)]
struct More {
    /// Seconds, for 503.
    retry_after: Option<u64>,
    run_id: Option<String>,
    /// Extra members of the body (next to `error`).
    extra: Option<(&'static str, Value)>,
    /// Extra members of `error`.
    error_fields: Vec<(&'static str, Value)>,
    /// Extra response headers.
    headers: HeaderMap,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), flavor: Flavor::Redraft, more: Box::default() }
    }

    /// 400: the request cannot be run as written; nothing was run.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 404.
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    /// 401: a token is required and none (or a wrong one) was given.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a bearer token is required: send `Authorization: Bearer TOKEN` with one of the server's tokens",
        )
    }

    /// 413.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is larger than {limit} bytes (the server's `max_body_bytes`)"),
        )
    }

    /// 503 with `Retry-After`: every run slot is taken.
    pub fn busy(message: impl Into<String>, retry_after: u64) -> Self {
        let mut e = Self::new(StatusCode::SERVICE_UNAVAILABLE, "busy", format!("{}; retry later", message.into()));
        e.more.retry_after = Some(retry_after);
        e
    }

    /// 503: the store cannot take more work now (out of connections or file descriptors,
    /// unreachable, busy). Nothing was started.
    pub fn overloaded(e: &StoreError) -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            format!("the run was not accepted, the store cannot take it now: {e}; retry later"),
        );
        e.more.retry_after = Some(2);
        e
    }

    /// 503: the server is shutting down and starts no run.
    pub fn shutting_down() -> Self {
        let mut e = Self::new(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", "the server is shutting down");
        e.more.retry_after = Some(5);
        e
    }

    /// 500: something the client cannot fix.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", message)
    }

    /// Answer in OpenAI's error shape.
    pub fn openai(mut self) -> Self {
        self.flavor = Flavor::OpenAi;
        self
    }

    /// Name the run that was made (in the body and the `x-redraft-run-id` header).
    pub fn with_run_id(mut self, run_id: impl Into<String>) -> Self {
        self.more.run_id = Some(run_id.into());
        self
    }

    /// Add a member to the body, next to `error`.
    pub fn with_extra(mut self, key: &'static str, value: Value) -> Self {
        self.more.extra = Some((key, value));
        self
    }

    /// Add a member inside `error` (where OpenAI's clients expose it).
    pub fn with_error_field(mut self, key: &'static str, value: Value) -> Self {
        self.more.error_fields.push((key, value));
        self
    }

    /// Add response headers.
    pub fn with_headers(mut self, headers: HeaderMap) -> Self {
        self.more.headers.extend(headers);
        self
    }

    /// OpenAI's `type` for this status.
    fn openai_type(&self) -> &'static str {
        match self.status {
            StatusCode::UNAUTHORIZED => "authentication_error",
            StatusCode::FORBIDDEN => "permission_error",
            StatusCode::NOT_FOUND => "not_found_error",
            StatusCode::UNPROCESSABLE_ENTITY => "validation_error",
            StatusCode::BAD_GATEWAY => "upstream_error",
            s if s.is_server_error() => "server_error",
            _ => "invalid_request_error",
        }
    }

    /// The JSON body: `{"error": {...}}` (and an extra member, when there is one). A stream
    /// that fails after its start sends it as its last event.
    pub fn body(&self) -> Value {
        let mut error = json!({"message": self.message, "code": self.code});
        if self.flavor == Flavor::OpenAi {
            error["type"] = json!(self.openai_type());
        }
        if let Some(run_id) = &self.more.run_id {
            error["run_id"] = json!(run_id);
        }
        for (key, value) in &self.more.error_fields {
            error[*key] = value.clone();
        }
        let mut body = json!({ "error": error });
        if let Some((key, value)) = &self.more.extra {
            body[*key] = value.clone();
        }
        body
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() && self.status != StatusCode::SERVICE_UNAVAILABLE {
            tracing::error!(status = self.status.as_u16(), code = self.code, "{}", self.message);
        }
        let mut response = (self.status, self.more.headers.clone(), axum::Json(self.body())).into_response();
        let headers = response.headers_mut();
        if let Some(secs) = self.more.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(run_id) = self.more.run_id.as_deref().and_then(|r| HeaderValue::from_str(r).ok()) {
            headers.insert("x-redraft-run-id", run_id);
        }
        response
    }
}

impl From<ConfigError> for ApiError {
    fn from(e: ConfigError) -> Self {
        let message = e.to_string();
        match e {
            ConfigError::NotAllowed { refused, .. } => Self::new(StatusCode::FORBIDDEN, refused.code(), message),
            ConfigError::Plan(PlanError::Invalid { .. }) => Self::bad_request("invalid_field", message),
            ConfigError::Plan(_) => Self::bad_request("invalid_plan", message),
            ConfigError::NoModel | ConfigError::BareModel { .. } | ConfigError::UnknownProvider { .. } => {
                Self::bad_request("invalid_model", message)
            }
            ConfigError::Kind(e) => e.into(),
            ConfigError::Provider(e) => e.into(),
            _ => Self::bad_request("invalid_request", message),
        }
    }
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Config(e) => e.into(),
            RunError::Store(e) => e.into(),
            held @ RunError::Held { .. } => Self::new(StatusCode::CONFLICT, "run_held", held.to_string()),
            other => Self::new(StatusCode::INTERNAL_SERVER_ERROR, "run_error", other.to_string()),
        }
    }
}

impl From<KindError> for ApiError {
    fn from(e: KindError) -> Self {
        match e {
            KindError::Unknown { .. } | KindError::MissingDir { .. } => Self::not_found("unknown_kind", e.to_string()),
            other => Self::bad_request("invalid_kind", other.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { .. } => Self::not_found("unknown_run", e.to_string()),
            StoreError::QueueFull { .. } => Self::busy(e.to_string(), 2),
            StoreError::NotAwaiting { .. } => Self::new(StatusCode::CONFLICT, "not_awaiting_input", e.to_string()),
            ref other if other.is_transient() => Self::overloaded(other),
            other => Self::new(StatusCode::INTERNAL_SERVER_ERROR, "store_error", other.to_string()),
        }
    }
}

impl From<ProviderError> for ApiError {
    /// The model's server failed: 502.
    fn from(e: ProviderError) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, "provider_error", e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_map_to_statuses() {
        let status = |e: ConfigError| ApiError::from(e).status.as_u16();
        let refused = |refused| ConfigError::NotAllowed {
            face: redraft::Face::Http,
            refused,
            what: "x".into(),
            hint: "y".into(),
        };
        assert_eq!(status(refused(redraft::guard::Refused::Command)), 403);
        assert_eq!(
            ApiError::from(refused(redraft::guard::Refused::Model)).body()["error"]["code"],
            "model_not_allowed"
        );
        assert_eq!(status(ConfigError::NoModel), 400);
        let status = |e: StoreError| ApiError::from(RunError::Store(e)).status.as_u16();
        assert_eq!(status(StoreError::NotFound { run_id: "x".into() }), 404);
        // A store that cannot take the work now sheds it (retry later); a damaged one is a fault.
        assert_eq!(status(StoreError::Query { action: "a".into(), message: "m".into() }), 503);
        assert_eq!(status(StoreError::QueueFull { queued: 3 }), 503);
        assert_eq!(status(StoreError::Corrupt { what: "a".into(), message: "m".into() }), 500);
        let e = ApiError::busy("the queue is full", 3).openai().with_run_id("r");
        assert_eq!(e.body()["error"]["type"], "server_error");
        assert_eq!(e.body()["error"]["run_id"], "r");
    }
}
