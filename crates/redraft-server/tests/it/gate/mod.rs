//! The gate in front of every route: which `Host`s are served ([`hosts`]), which web pages may
//! call the server (`Origin`, `Sec-Fetch-Site`: [`origins`]; CORS: [`cors`]), JSON bodies on
//! requests that change something ([`json`]), the bearer scheme — and that a refused request
//! starts nothing: no run stored, no call to the model. Here the bearer scheme, every endpoint
//! behind the gate, and lists in `[server]` that would open it too wide.

mod cors;
mod hosts;
mod json;
mod origins;

use axum::body::Body;
use axum::http::Request;
use redraft_server::Server;
use serde_json::Value;

use crate::{Answer, Harness, config, harness, harness_with};

/// The address a browser would name: the server on its usual port.
const HOST: &str = "127.0.0.1:8080";
const SPEC: &str = r#"{"prompt": "Which city?", "schema": {"type": "object"}}"#;

fn req(method: &str, uri: &str, headers: &[(&str, &str)], body: &str) -> Request<Body> {
    let mut b = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        b = b.header(*name, *value);
    }
    b.body(if body.is_empty() { Body::empty() } else { Body::from(body.to_owned()) }).unwrap()
}

/// `POST /v1/iterate` as a client on this machine sends it, plus `extra` headers.
fn iterate(extra: &[(&str, &str)]) -> Request<Body> {
    let mut headers = vec![("content-type", "application/json")];
    if !extra.iter().any(|(k, _)| *k == "host") {
        headers.push(("host", HOST));
    }
    headers.extend_from_slice(extra);
    req("POST", "/v1/iterate", &headers, SPEC)
}

/// The runs the store holds, asked as a local client.
async fn stored_runs(h: &Harness) -> Vec<Value> {
    let a = h.send(req("GET", "/v1/runs", &[("host", HOST)], "")).await;
    assert_eq!(a.status, 200, "{}", a.text);
    a.json["runs"].as_array().unwrap().clone()
}

/// No run was stored and the model was not called.
async fn assert_nothing_started(h: &Harness) {
    assert_eq!(h.model.calls().await, 0, "the model was called");
    assert_eq!(stored_runs(h).await, Vec::<Value>::new(), "a run was stored");
}

fn message(a: &Answer) -> &str {
    a.json["error"]["message"].as_str().unwrap_or_else(|| panic!("no error message: {}", a.text))
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive_and_spaces_are_tolerated() {
    let h = harness_with(vec![], vec!["s3cret".into()], |_| {}).await;
    for value in [
        "Bearer s3cret",
        "bearer s3cret",
        "BEARER s3cret",
        "BeArEr s3cret",
        "Bearer   s3cret",
        "Bearer \t s3cret ",
        "  bearer s3cret",
    ] {
        let a = h.send(req("GET", "/v1/runs", &[("host", HOST), ("authorization", value)], "")).await;
        assert_eq!(a.status, 200, "{value:?}: {}", a.text);
    }
    for value in [
        "Bearer wrong",
        "bearer S3CRET",
        "BEARER s3cre",
        "Bearers3cret",
        "Bearer",
        "Basic s3cret",
        "s3cret",
        "Bearer s3cret extra",
        "",
    ] {
        let a = h.send(req("GET", "/v1/runs", &[("host", HOST), ("authorization", value)], "")).await;
        assert_eq!((a.status, a.json["error"]["code"].as_str()), (401, Some("unauthorized")), "{value:?}: {}", a.text);
    }
    let a = h.send(req("GET", "/v1/models", &[("host", HOST), ("authorization", "BEARER s3cret")], "")).await;
    assert_eq!(a.status, 200, "{}", a.text);
}

#[tokio::test]
async fn every_endpoint_is_behind_the_guard() {
    let h = harness(vec![]).await;
    let doc = h.send(req("GET", "/openapi.json", &[("host", HOST)], "")).await.json;
    let mut endpoints: Vec<(String, String)> =
        vec![("get".into(), "/openapi.json".into()), ("post".into(), "/no/such/endpoint".into())];
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            endpoints.push((method.clone(), path.replace("{id}", "x").replace("{name}", "x")));
        }
    }
    assert!(endpoints.len() >= 18, "{endpoints:?}");
    for (method, path) in &endpoints {
        let method = method.to_uppercase();
        let a = h
            .send(req(&method, path, &[("host", "attacker.example"), ("content-type", "application/json")], "{}"))
            .await;
        assert_eq!(a.status, 421, "{method} {path}: {}", a.text);
        let a = h
            .send(req(
                &method,
                path,
                &[("host", HOST), ("origin", "http://attacker.example"), ("content-type", "application/json")],
                "{}",
            ))
            .await;
        assert_eq!(a.status, 403, "{method} {path}: {}", a.text);
        if method != "GET" {
            let a = h.send(req(&method, path, &[("host", HOST), ("content-type", "text/plain")], "{}")).await;
            assert_eq!(a.status, 415, "{method} {path}: {}", a.text);
        }
    }
    assert_nothing_started(&h).await;
}

#[tokio::test]
async fn allowed_hosts_never_opens_a_non_loopback_address_and_bad_entries_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config("http://127.0.0.1:9/v1", dir.path());
    c.server.allowed_hosts = vec!["0.0.0.0".into(), "redraft.lan".into()];
    let e = Server::bind(c.clone(), Some("0.0.0.0:0"), vec![]).await.unwrap_err().to_string();
    assert!(e.contains("refusing to listen on `0.0.0.0:0` without tokens"), "{e}");
    for (key, entry, hint) in [
        ("allowed_hosts", "*", "there are no wildcards"),
        ("allowed_hosts", ".redraft.lan", "there are no wildcards"),
        ("allowed_hosts", "redraft.lan:8080", "write it as `redraft.lan`; any port is allowed"),
        ("allowed_hosts", "http://redraft.lan", "bare host name"),
        ("allowed_hosts", "127.1", "write it as `127.0.0.1`"),
        ("cors_origins", "*", "list the origins of your own pages"),
        ("cors_origins", "null", "list the origins of your own pages"),
        ("cors_origins", "localhost:3000", "e.g. `http://localhost:3000`"),
        ("cors_origins", "http://localhost:3000/", "write it as `http://localhost:3000`"),
        ("cors_origins", "http://Localhost:3000/app", "write it as `http://localhost:3000`"),
    ] {
        let mut c = config("http://127.0.0.1:9/v1", dir.path());
        if key == "allowed_hosts" {
            c.server.allowed_hosts = vec![entry.into()];
        } else {
            c.server.cors_origins = vec![entry.into()];
        }
        let e = Server::bind(c, Some("127.0.0.1:0"), vec![]).await.unwrap_err().to_string();
        assert!(e.starts_with(&format!("`[server] {key}` lists `{entry}`, which")), "{e}");
        assert!(e.contains("\nhint: ") && e.contains(hint), "{entry}: {e}");
    }
}

#[tokio::test]
async fn a_router_over_a_broken_list_serves_loopback_only() {
    let h = harness_with(vec![], vec!["t1".into()], |c| {
        c.server.allowed_hosts = vec!["*".into()];
        c.server.cors_origins = vec!["http://localhost:3000".into()];
    })
    .await;
    let auth = ("authorization", "Bearer t1");
    assert_eq!(h.send(req("GET", "/v1/runs", &[("host", "attacker.example"), auth], "")).await.status, 421);
    assert_eq!(h.send(req("GET", "/v1/runs", &[("host", HOST), auth], "")).await.status, 200);
    let a = h.send(req("GET", "/v1/runs", &[("host", HOST), auth, ("origin", "http://localhost:3000")], "")).await;
    assert_eq!(a.status, 403, "CORS off: {}", a.text);
}
