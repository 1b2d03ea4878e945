//! Bearer tokens: when the server has tokens, every request but the health check, the viewer
//! page and the OpenAPI document must carry one of them (`Authorization: Bearer TOKEN`).

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

/// Paths anyone may read.
const OPEN: &[&str] = &["/", "/healthz", "/openapi.json"];

/// The middleware.
pub async fn require_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if state.tokens().is_empty() || OPEN.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    match presented {
        Some(token) if state.tokens().iter().any(|t| same(t.as_bytes(), token.as_bytes())) => next.run(request).await,
        _ => {
            let e = ApiError::unauthorized();
            let openai =
                request.uri().path().starts_with("/v1/chat/completions") || request.uri().path() == "/v1/models";
            if openai { e.openai() } else { e }.into_response()
        }
    }
}

/// Compare in time that does not depend on where the strings differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_compare_whole() {
        assert!(super::same(b"abc", b"abc"));
        assert!(!super::same(b"abc", b"abd"));
        assert!(!super::same(b"abc", b"abcd"));
    }
}
