//! Bearer tokens: when the server has tokens, every request but the health check, the viewer's
//! pages and the OpenAPI document must carry one of them (`Authorization: Bearer TOKEN`; the
//! scheme in any case, as RFC 7235 has it). Checked by the gate in front of every route ([`crate::gate`]).

use axum::extract::Request;
use axum::http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::state::AppState;

/// Paths anyone may read.
const OPEN: &[&str] = &["/", "/healthz", "/openapi.json"];

/// `Ok` when the server has no tokens, the path is open or the request carries a token; 401
/// otherwise.
pub fn authenticate(state: &AppState, request: &Request) -> Result<(), ApiError> {
    if state.tokens().is_empty() || is_open(request.uri().path()) {
        return Ok(());
    }
    let presented = request.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer);
    match presented {
        Some(token) if accepted(state.tokens(), token) => Ok(()),
        _ => Err(ApiError::unauthorized()),
    }
}

/// Whether anyone may read `path`: the open paths, and a run's page in the viewer
/// (`/runs/{id}`: the page only, which asks the API for the run with the reader's token).
fn is_open(path: &str) -> bool {
    OPEN.contains(&path) || path.strip_prefix("/runs/").is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

/// The token of an `Authorization: Bearer TOKEN` value: the scheme in any case, then spaces or
/// tabs, then the token.
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once([' ', '\t'])?;
    let token = token.trim_matches([' ', '\t']);
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whether `presented` is one of `tokens`, in time that depends on neither where they differ
/// nor their lengths nor which token matched: each is compared as its SHA-256 digest (32 bytes
/// whatever the token), with every byte and every token looked at.
fn accepted(tokens: &[String], presented: &str) -> bool {
    let digest = |text: &str| -> [u8; 32] { Sha256::digest(text.as_bytes()).into() };
    let presented = digest(presented);
    tokens.iter().fold(false, |found, token| found | same(&digest(token), &presented))
}

/// Two digests compared in time that does not depend on where they differ.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_run_page_is_open_and_nothing_under_it() {
        assert!(super::is_open("/runs/0193-abc"));
        assert!(super::is_open("/"));
        for closed in ["/runs/", "/runs", "/runs/x/answer", "/v1/runs/x", "/runs/x/", "/runsx"] {
            assert!(!super::is_open(closed), "{closed}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        let tokens = ["abc".to_owned(), "second-token".to_owned()];
        assert!(super::accepted(&tokens, "abc"));
        assert!(super::accepted(&tokens, "second-token"));
        for refused in ["abd", "abcd", "ab", "", "second-token ", "ABC"] {
            assert!(!super::accepted(&tokens, refused), "{refused:?}");
        }
        assert!(!super::accepted(&[], "abc"));
    }

    #[test]
    fn the_scheme_is_a_word_in_any_case() {
        for (value, token) in [
            ("Bearer t", Some("t")),
            ("bearer t", Some("t")),
            ("BEARER t", Some("t")),
            ("BeArEr \t t ", Some("t")),
            ("Bearer", None),
            ("Bearer  ", None),
            ("Bearert", None),
            ("Basic t", None),
            ("Bearer-x t", None),
        ] {
            assert_eq!(super::bearer(value), token, "{value:?}");
        }
    }
}
