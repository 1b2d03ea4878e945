//! The one gate in front of every route, the fallback included. In order, a request must:
//!
//! 1. name this server: its `Host` (and a request target's authority, if it has one) is a
//!    loopback name or in `[server] allowed_hosts` — any host when tokens guard the server and
//!    `allowed_hosts` is empty — else 421. A web page that rebinds its own DNS name to
//!    127.0.0.1 sends its own name, so it is refused. A request without `Host` is served: no
//!    browser sends one (HTTP/1.0 clients and in-process callers do);
//! 2. if it is a CORS preflight, come from an origin in `[server] cors_origins` (204 with the
//!    allowed methods and headers), else 403;
//! 3. if a browser sent it from a page: the `Origin` is the server's own (same scheme, host and
//!    port as the `Host`) or listed, and a request the browser marks as from another site
//!    (`Sec-Fetch-Site`) comes from a listed origin or is a plain page navigation — else 403.
//!    This holds for reads too: a page elsewhere has no business with the stored runs;
//! 4. carry a bearer token when the server has tokens — else 401;
//! 5. if it may change something (any method but GET, HEAD and OPTIONS; a DELETE without a
//!    body excepted), say `content-type: application/json` — else 415. A browser sends that
//!    type to another origin only after a preflight, so no page gets a request through that
//!    CORS did not allow.
//!
//! Responses to a listed origin carry `Access-Control-Allow-Origin` (never `*`); with CORS on,
//! every response says `Vary: Origin`. Refusals use OpenAI's error shape on its endpoints.

use std::sync::Arc;

use axum::body::HttpBody as _;
use axum::extract::{Request, State};
use axum::http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS,
    ACCESS_CONTROL_REQUEST_METHOD, CONTENT_TYPE, HOST, ORIGIN, VARY,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth;
use crate::error::ApiError;
use crate::origin::{Allowed, Authority, parse_origin};
use crate::state::AppState;

/// Paths that answer in OpenAI's error shape (their clients read it).
const OPENAI_PATHS: &[&str] = &["/v1/chat/completions", "/v1/models", "/v1/responses"];

/// What the gate needs: the state (for tokens) and the admitted hosts and origins.
#[derive(Debug, Clone)]
pub struct Gate {
    state: AppState,
    allowed: Arc<Allowed>,
}

impl Gate {
    /// The gate for `state`'s config. A list entry that names nothing (`Server::bind` refuses
    /// to start with one) leaves loopback only and CORS off.
    pub fn new(state: &AppState) -> Self {
        let allowed = Allowed::from_config(&state.config().server, !state.tokens().is_empty()).unwrap_or_else(|e| {
            tracing::error!("{e}; serving loopback names only, CORS off");
            Allowed::loopback_only()
        });
        Self { state: state.clone(), allowed: Arc::new(allowed) }
    }
}

/// Where a request that passed goes.
enum Pass {
    /// An answered CORS preflight.
    Preflight,
    /// On to the endpoint.
    Endpoint,
}

/// The middleware.
pub async fn check(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let openai =
        OPENAI_PATHS.iter().any(|p| path.strip_prefix(p).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')));
    // Echoed in `Access-Control-Allow-Origin`, on refusals too: the page may read why.
    let listed = single(request.headers(), &ORIGIN)
        .ok()
        .flatten()
        .filter(|v| v.to_str().ok().and_then(parse_origin).is_some_and(|o| gate.allowed.lists(&o)))
        .cloned();
    let response = match admit(&gate, &request) {
        Ok(Pass::Preflight) => preflight(request.headers()),
        Ok(Pass::Endpoint) => next.run(request).await,
        Err(e) => if openai { e.openai() } else { e }.into_response(),
    };
    with_cors(response, &gate.allowed, listed)
}

/// The checks, in order (see the module's documentation).
fn admit(gate: &Gate, request: &Request) -> Result<Pass, ApiError> {
    let headers = request.headers();
    let target = target(request, &gate.allowed)?;
    let origin = match single(headers, &ORIGIN).map_err(|()| refused_origin("(several)"))? {
        None => None,
        Some(value) => {
            let raw = value.to_str().unwrap_or("(not text)");
            Some(parse_origin(raw).ok_or_else(|| refused_origin(raw))?)
        }
    };
    let listed = origin.as_ref().is_some_and(|o| gate.allowed.lists(o));
    if request.method() == Method::OPTIONS && origin.is_some() && headers.contains_key(ACCESS_CONTROL_REQUEST_METHOD) {
        return if listed { Ok(Pass::Preflight) } else { Err(refused_origin(&shown(origin.as_ref()))) };
    }
    if let Some(origin) = &origin
        && !listed
        && target.as_ref().map(Authority::origin).as_ref() != Some(origin)
    {
        return Err(refused_origin(&origin.ascii_serialization()));
    }
    if !listed && from_another_site(headers) && !is_navigation(request) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site_request",
            "the browser says this request comes from a page on another site (`Sec-Fetch-Site`), and it names no origin listed in `[server] cors_origins`\nhint: to let a page call this server, add its origin (e.g. `http://localhost:3000`) to `[server] cors_origins` in redraft.toml",
        ));
    }
    auth::authenticate(&gate.state, request)?;
    if changes_state(request) {
        json_body(request)?;
    }
    Ok(Pass::Endpoint)
}

/// The authority the request is for: the request target's, else the `Host` header's (both
/// must be admitted when both are there). `None` when neither is there, or any host is served
/// and it does not parse.
fn target(request: &Request, allowed: &Allowed) -> Result<Option<Authority>, ApiError> {
    let host = single(request.headers(), &HOST).map_err(|()| {
        ApiError::bad_request("malformed_request", "the request has more than one `Host` header; send one")
    })?;
    let named = [request.uri().authority().map(|a| a.as_str()), host.map(|h| h.to_str().unwrap_or("(not text)"))];
    let mut target = None;
    for raw in named.into_iter().flatten() {
        match Authority::parse(raw) {
            Some(authority) if allowed.admits(&authority) => {
                target.get_or_insert(authority);
            }
            None if allowed.any_host() => {}
            _ => return Err(misdirected(raw)),
        }
    }
    Ok(target)
}

/// The value of a header sent at most once; `Err` when it was sent several times.
fn single<'a>(headers: &'a HeaderMap, name: &axum::http::HeaderName) -> Result<Option<&'a HeaderValue>, ()> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (first, None) => Ok(first),
        _ => Err(()),
    }
}

/// `Sec-Fetch-Site` says another origin's page sent it (`cross-site`, `same-site` — another
/// port of the same host is that — or anything unknown). `same-origin` and `none` (the user
/// typed the address) are not.
fn from_another_site(headers: &HeaderMap) -> bool {
    headers.get_all("sec-fetch-site").iter().any(|v| !matches!(v.to_str(), Ok("same-origin" | "none")))
}

/// A page navigation (a link to the viewer): the page that links cannot read what it gets.
fn is_navigation(request: &Request) -> bool {
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
    matches!(*request.method(), Method::GET | Method::HEAD)
        && header("sec-fetch-mode") == Some("navigate")
        && header("sec-fetch-dest") == Some("document")
}

/// Every method but the safe ones may change something (deny by default: unknown ones too).
fn changes_state(request: &Request) -> bool {
    !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS)
}

/// A JSON body's content type (parameters such as `charset` allowed); a DELETE may carry no
/// body instead.
fn json_body(request: &Request) -> Result<(), ApiError> {
    let sent: Vec<&HeaderValue> = request.headers().get_all(CONTENT_TYPE).iter().collect();
    let essence = match sent.as_slice() {
        [one] => one.to_str().ok().map(|v| v.split(';').next().unwrap_or_default().trim()),
        _ => None,
    };
    if essence.is_some_and(|e| e.eq_ignore_ascii_case("application/json")) {
        return Ok(());
    }
    if request.method() == Method::DELETE && sent.is_empty() && request.body().size_hint().exact() == Some(0) {
        return Ok(());
    }
    let sent = match sent.as_slice() {
        [] => "none".to_owned(),
        [one] => format!("`{}`", clip(one.to_str().unwrap_or("(not text)"))),
        _ => "given several times".to_owned(),
    };
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!(
            "a `{}` request here takes a JSON body, and its content type was {sent}\nhint: send the header `content-type: application/json`",
            request.method()
        ),
    ))
}

/// 421: the request names a host this server does not answer to.
fn misdirected(raw: &str) -> ApiError {
    ApiError::new(
        StatusCode::MISDIRECTED_REQUEST,
        "host_not_allowed",
        format!(
            "this server does not answer to the host `{}`: it serves loopback names (`localhost`, `127.0.0.1`, `[::1]`) and the names in `[server] allowed_hosts`\nhint: if that is a name of this server, add it without the port to `[server] allowed_hosts` in redraft.toml",
            clip(raw)
        ),
    )
}

/// 403: a page at `origin` may not call this server.
fn refused_origin(origin: &str) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "origin_not_allowed",
        format!(
            "requests from web pages at `{}` are refused: this server takes requests from its own pages and from the origins in `[server] cors_origins`\nhint: to let pages at an origin call this server, add it exactly (e.g. `http://localhost:3000`) to `[server] cors_origins` in redraft.toml",
            clip(origin)
        ),
    )
}

fn shown(origin: Option<&url::Origin>) -> String {
    origin.map_or_else(String::new, url::Origin::ascii_serialization)
}

/// A value sent by the client, shortened for a message.
fn clip(raw: &str) -> String {
    let mut shown: String = raw.chars().take(100).flat_map(char::escape_debug).collect();
    if raw.chars().count() > 100 {
        shown.push('…');
    }
    shown
}

/// 204 to a preflight from a listed origin (`with_cors` adds the origin). The headers allowed
/// are `authorization` and `content-type`, and those the page asks for that are an `x-…` or
/// `openai-…` header (per-request options as `x-redraft-*`; OpenAI's own SDK sends
/// `x-stainless-*` from a browser).
fn preflight(request: &HeaderMap) -> Response {
    let mut allowed = vec!["authorization".to_owned(), "content-type".to_owned()];
    let asked = request.get_all(ACCESS_CONTROL_REQUEST_HEADERS).iter().filter_map(|v| v.to_str().ok());
    for name in asked.flat_map(|v| v.split(',')).map(|n| n.trim().to_ascii_lowercase()) {
        let custom = ["x-", "openai-"].iter().any(|prefix| {
            name.strip_prefix(prefix)
                .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        });
        if custom && !allowed.contains(&name) {
            allowed.push(name);
        }
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, HEAD, POST, DELETE"));
    if let Ok(value) = HeaderValue::from_str(&allowed.join(", ")) {
        headers.insert(ACCESS_CONTROL_ALLOW_HEADERS, value);
    }
    headers.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    headers.append(VARY, HeaderValue::from_static("access-control-request-method, access-control-request-headers"));
    response
}

/// With CORS on: `Vary: Origin` on every response, and the listed origin allowed.
fn with_cors(mut response: Response, allowed: &Allowed, listed: Option<HeaderValue>) -> Response {
    if !allowed.cors() {
        return response;
    }
    let headers = response.headers_mut();
    headers.append(VARY, HeaderValue::from_static("origin"));
    if let Some(origin) = listed {
        headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(
            ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("x-redraft-run-id, x-redraft-attempts, x-request-id, retry-after"),
        );
    }
    response
}
