//! The gate in front of every route: which `Host`s are served, which web pages may call the server (`Origin`,
//! `Sec-Fetch-Site`, CORS), JSON bodies on requests that change something, the bearer scheme —
//! and that a refused request starts nothing: no run stored, no call to the model.

use axum::body::Body;
use axum::http::Request;
use redraft_server::Server;
use redraft_testkit::reply;
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

/// `Host` values a browser sends for loopback: served without tokens.
const LOOPBACK_HOSTS: &[&str] = &[
    "localhost",
    "localhost:8080",
    "localhost:80",
    "LOCALHOST:8080",
    "LocalHost",
    "127.0.0.1",
    "127.0.0.1:8080",
    "127.0.0.1:80",
    "127.0.0.2:8080",
    "127.255.255.254:1",
    "[::1]",
    "[::1]:8080",
];

/// `Host` values that are not loopback as a browser writes it: names an attacker can point at
/// 127.0.0.1 (DNS rebinding), look-alikes, smuggled user info and fragments, numeric spellings
/// no browser sends, other addresses, broken ports.
const HOSTILE_HOSTS: &[&str] = &[
    "attacker.example",
    "attacker.example:8080",
    "localhost.attacker.example",
    "localhost.attacker.example:8080",
    "127.0.0.1.nip.io",
    "127.0.0.1.nip.io:8080",
    "127.0.0.1.attacker.example:8080",
    "attacker.localhost:8080",
    "localhost.:8080",
    "localhost.",
    "localhostx:8080",
    "xlocalhost:8080",
    "127.0.0.1@evil",
    "127.0.0.1:8080@attacker.example",
    "localhost:8080@attacker.example:8080",
    "evil#127.0.0.1",
    "attacker.example#localhost:8080",
    "attacker.example/127.0.0.1",
    "attacker.example?127.0.0.1",
    "attacker.example\\127.0.0.1",
    "127.0.0.1,attacker.example",
    "127.0.0.1 attacker.example",
    "%6cocalhost:8080",
    "127.0.0.%31",
    "127.1",
    "127.1:8080",
    "2130706433",
    "2130706433:8080",
    "0x7f000001",
    "0x7f.0.0.1",
    "0177.0.0.1",
    "017700000001",
    "127.000.000.001",
    "0.0.0.0",
    "0.0.0.0:8080",
    "0",
    "[::]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]:8080",
    "[0:0:0:0:0:0:0:1]:8080",
    "[::1%25lo]:8080",
    "::1",
    "[::1",
    "[::1]x",
    "192.168.1.20:8080",
    "10.0.0.1",
    "169.254.169.254",
    "127.0.0.1:8080:8080",
    "127.0.0.1:99999",
    "localhost:080",
    "localhost:",
    ":8080",
    "",
];

#[tokio::test]
async fn without_tokens_only_loopback_hosts_are_served_and_a_rebound_name_reads_nothing() {
    let h = harness(vec![reply(r#"{"city": "Toledo"}"#)]).await;
    let made = h.send(iterate(&[])).await;
    assert_eq!(made.status, 200, "{}", made.text);
    let run_id = made.json["run_id"].as_str().unwrap().to_owned();
    for host in LOOPBACK_HOSTS {
        let a = h.send(req("GET", &format!("/v1/runs/{run_id}"), &[("host", host)], "")).await;
        assert_eq!(a.status, 200, "{host}: {}", a.text);
    }
    assert!(HOSTILE_HOSTS.len() >= 50, "{}", HOSTILE_HOSTS.len());
    for host in HOSTILE_HOSTS {
        // A page at http://attacker.example:8080 whose name now resolves to 127.0.0.1 is, to the
        // browser, asking its own origin: it sends its own name.
        for uri in ["/v1/runs".to_owned(), format!("/v1/runs/{run_id}"), format!("/v1/runs/{run_id}/events")] {
            let a = h.send(req("GET", &uri, &[("host", host), ("sec-fetch-site", "same-origin")], "")).await;
            assert_eq!((a.status, a.json["error"]["code"].as_str()), (421, Some("host_not_allowed")), "{host} {uri}");
            assert!(!a.text.contains(&run_id), "{host}: {}", a.text);
            assert!(message(&a).contains("`[server] allowed_hosts`"), "{}", message(&a));
        }
        let a = h.send(iterate(&[("host", host)])).await;
        assert_eq!(a.status, 421, "{host}: {}", a.text);
    }
    assert_eq!(h.model.calls().await, 1, "only the local request called the model");
    assert_eq!(stored_runs(&h).await.len(), 1, "only the local request stored a run");
}

#[tokio::test]
async fn the_refusal_names_the_host_and_the_fix() {
    let h = harness(vec![]).await;
    let a = h.send(req("GET", "/v1/runs", &[("host", "attacker.example:8080")], "")).await;
    insta::assert_snapshot!(message(&a), @r"
    this server does not answer to the host `attacker.example:8080`: it serves loopback names (`localhost`, `127.0.0.1`, `[::1]`) and the names in `[server] allowed_hosts`
    hint: if that is a name of this server, add it without the port to `[server] allowed_hosts` in redraft.toml
    ");
    // The proxy's clients get OpenAI's shape.
    let a = h.send(req("GET", "/v1/models", &[("host", "attacker.example")], "")).await;
    assert_eq!((a.status, a.json["error"]["type"].as_str()), (421, Some("invalid_request_error")), "{}", a.text);
}

#[tokio::test]
async fn allowed_hosts_adds_exactly_the_names_it_lists() {
    let h =
        harness_with(vec![], vec![], |c| c.server.allowed_hosts = vec!["redraft.lan".into(), "192.168.1.20".into()])
            .await;
    for host in ["redraft.lan", "redraft.lan:8080", "REDRAFT.LAN:80", "192.168.1.20:8080", "localhost:8080"] {
        assert_eq!(h.send(req("GET", "/v1/runs", &[("host", host)], "")).await.status, 200, "{host}");
    }
    for host in [
        "x.redraft.lan",
        "redraft.lan.attacker.example",
        "redraft.lan.",
        "redraft.la",
        "redraft.lan@attacker.example",
        "192.168.1.2",
        "192.168.1.200",
        "attacker.example",
    ] {
        assert_eq!(h.send(req("GET", "/v1/runs", &[("host", host)], "")).await.status, 421, "{host}");
    }
}

#[tokio::test]
async fn with_tokens_any_host_is_served_unless_allowed_hosts_lists_some() {
    let token = [("authorization", "Bearer t1")];
    let h = harness_with(vec![], vec!["t1".into()], |_| {}).await;
    let a = h.send(req("GET", "/v1/runs", &[("host", "attacker.example"), token[0]], "")).await;
    assert_eq!(a.status, 200, "the token is the guard: {}", a.text);
    let a = h.send(req("GET", "/v1/runs", &[("host", "attacker.example")], "")).await;
    assert_eq!(a.status, 401, "{}", a.text);

    let h = harness_with(vec![], vec!["t1".into()], |c| c.server.allowed_hosts = vec!["redraft.lan".into()]).await;
    for (host, status) in [("attacker.example", 421), ("redraft.lan:8080", 200), ("127.0.0.1:8080", 200)] {
        let a = h.send(req("GET", "/v1/runs", &[("host", host), token[0]], "")).await;
        assert_eq!(a.status, status, "{host}: {}", a.text);
    }
}

#[tokio::test]
async fn the_request_target_and_every_host_header_must_name_this_server() {
    let h = harness(vec![]).await;
    // An absolute request target names the host the request is for (it overrides `Host`).
    let a = h.send(req("GET", "http://attacker.example/v1/runs", &[("host", HOST)], "")).await;
    assert_eq!(a.status, 421, "{}", a.text);
    let a = h.send(req("GET", "http://127.0.0.1:8080/v1/runs", &[("host", "attacker.example")], "")).await;
    assert_eq!(a.status, 421, "{}", a.text);
    let a = h.send(req("GET", "http://127.0.0.1:8080/v1/runs", &[("host", HOST)], "")).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let a = h.send(req("GET", "/v1/runs", &[("host", HOST), ("host", "attacker.example")], "")).await;
    assert_eq!((a.status, a.json["error"]["code"].as_str()), (400, Some("malformed_request")), "{}", a.text);
    // No `Host` at all (HTTP/1.0, or a caller in this process): no browser sends that.
    let a = h.send(req("GET", "/v1/runs", &[], "")).await;
    assert_eq!(a.status, 200, "{}", a.text);
}

/// Every request that may change something, with its body; `true` for OpenAI's error shape.
fn state_changing(run_id: &str) -> Vec<(&'static str, String, String, bool)> {
    let chat = r#"{"model": "fake/m", "messages": [{"role": "user", "content": "x"}]}"#;
    vec![
        ("POST", "/v1/iterate".into(), SPEC.into(), false),
        ("POST", "/v1/runs".into(), SPEC.into(), false),
        ("POST", "/v1/validate".into(), r#"{"schema": {"type": "object"}, "artifact": {}}"#.into(), false),
        ("POST", "/v1/chat".into(), r#"{"model": "fake/m", "prompt": "x"}"#.into(), false),
        (
            "POST",
            "/v1/decide".into(),
            r#"{"task_id": "t", "current_iteration": 1, "max_iterations": 3, "test_result": {"status": "pass"}}"#
                .into(),
            false,
        ),
        ("POST", "/v1/chat/completions".into(), chat.into(), true),
        ("POST", "/v1/models".into(), "{}".into(), true),
        ("DELETE", format!("/v1/runs/{run_id}"), "{}".into(), false),
        ("PUT", "/v1/runs".into(), SPEC.into(), false),
        ("PATCH", format!("/v1/runs/{run_id}"), "{}".into(), false),
    ]
}

#[tokio::test]
async fn a_request_that_changes_something_needs_a_json_content_type() {
    let h = harness(vec![]).await;
    // What a page can send to another origin without asking first (a CORS "simple request"),
    // and other types that are not JSON.
    let refused = [
        None,
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("text/json"),
        Some("application/jsonx"),
        Some("application/json-seq"),
        Some("application/vnd.api+json"),
        Some("application/json, text/plain"),
        Some("text/plain; application/json"),
        Some("json"),
        Some(""),
    ];
    for (method, uri, body, openai) in state_changing("0190a000-0000-7000-8000-000000000000") {
        for content_type in refused {
            let mut headers = vec![("host", HOST)];
            headers.extend(content_type.map(|t| ("content-type", t)));
            let a = h.send(req(method, &uri, &headers, &body)).await;
            assert_eq!(
                (a.status, a.json["error"]["code"].as_str()),
                (415, Some("unsupported_media_type")),
                "{method} {uri} {content_type:?}: {}",
                a.text
            );
            assert!(message(&a).contains("`content-type: application/json`"), "{}", message(&a));
            assert_eq!(a.json["error"]["type"].as_str().is_some(), openai, "{uri}: {}", a.text);
        }
        // Twice, even if one says JSON.
        let headers = [("host", HOST), ("content-type", "application/json"), ("content-type", "text/plain")];
        assert_eq!(h.send(req(method, &uri, &headers, &body)).await.status, 415, "{method} {uri}");
    }
    assert_nothing_started(&h).await;
    let a = h.send(req("POST", "/v1/validate", &[("host", HOST), ("content-type", "text/plain")], "{}")).await;
    insta::assert_snapshot!(message(&a), @r"
    a `POST` request here takes a JSON body, and its content type was `text/plain`
    hint: send the header `content-type: application/json`
    ");
}

#[tokio::test]
async fn json_with_parameters_is_json_and_a_delete_without_a_body_needs_no_type() {
    let h = harness(vec![]).await;
    let body = r#"{"schema": {"type": "object"}, "artifact": {}}"#;
    for content_type in ["application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"] {
        let a = h.send(req("POST", "/v1/validate", &[("host", HOST), ("content-type", content_type)], body)).await;
        assert_eq!(a.status, 200, "{content_type}: {}", a.text);
    }
    let a = h.send(req("DELETE", "/v1/runs/nope", &[("host", HOST)], "")).await;
    assert_eq!((a.status, a.json["error"]["code"].as_str()), (404, Some("unknown_run")), "{}", a.text);
}

/// `Origin` values of pages that are not this server's own (which is `http://127.0.0.1:8080`).
const FOREIGN_ORIGINS: &[&str] = &[
    "null",
    "http://attacker.example",
    "http://attacker.example:8080",
    "https://attacker.example",
    "http://127.0.0.1:8081",
    "http://127.0.0.1",
    "https://127.0.0.1:8080",
    "http://localhost:8080",
    "http://[::1]:8080",
    "http://127.0.0.2:8080",
    "http://127.0.0.1.nip.io:8080",
    "http://localhost.attacker.example:8080",
    "http://127.0.0.1:8080.attacker.example",
    "http://sub.localhost:8080",
    "http://127.0.0.1:8080@attacker.example",
    "http://attacker.example@127.0.0.1:8080",
    "http://127.0.0.1:8080/",
    "http://127.0.0.1:8080/path",
    "HTTP://127.0.0.1:8080",
    "http://2130706433:8080",
    "http://127.1:8080",
    "http://127.0.0.1:8080 http://attacker.example",
    "127.0.0.1:8080",
    "ws://127.0.0.1:8080",
    "file://",
    "chrome-extension://abcdefghijklmnop",
    "",
];

#[tokio::test]
async fn pages_at_other_origins_are_refused_and_start_nothing() {
    let h = harness(vec![]).await;
    assert!(FOREIGN_ORIGINS.len() >= 25);
    for origin in FOREIGN_ORIGINS {
        let a = h.send(iterate(&[("origin", origin)])).await;
        assert_eq!(
            (a.status, a.json["error"]["code"].as_str()),
            (403, Some("origin_not_allowed")),
            "{origin}: {}",
            a.text
        );
        assert!(message(&a).contains("`[server] cors_origins`"), "{}", message(&a));
        assert_eq!(a.header("access-control-allow-origin"), None);
        // Reads too: the page could not read the answer without CORS, so it gets none at all.
        let a = h.send(req("GET", "/v1/runs", &[("host", HOST), ("origin", origin)], "")).await;
        assert_eq!(a.status, 403, "GET from {origin}: {}", a.text);
        let chat = r#"{"model": "fake/m", "messages": [{"role": "user", "content": "x"}]}"#;
        let headers = [("host", HOST), ("origin", origin), ("content-type", "application/json")];
        let a = h.send(req("POST", "/v1/chat/completions", &headers, chat)).await;
        assert_eq!((a.status, a.json["error"]["type"].as_str()), (403, Some("permission_error")), "{origin}");
    }
    assert_nothing_started(&h).await;
    let a = h.send(iterate(&[("origin", "http://attacker.example")])).await;
    insta::assert_snapshot!(message(&a), @r"
    requests from web pages at `http://attacker.example` are refused: this server takes requests from its own pages and from the origins in `[server] cors_origins`
    hint: to let pages at an origin call this server, add it exactly (e.g. `http://localhost:3000`) to `[server] cors_origins` in redraft.toml
    ");
}

#[tokio::test]
async fn the_servers_own_pages_may_post() {
    let h =
        harness(vec![reply(r#"{"city": "Toledo"}"#), reply(r#"{"city": "Toledo"}"#), reply(r#"{"city": "Toledo"}"#)])
            .await;
    for (host, origin) in [
        ("127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("localhost", "http://localhost"),
        ("[::1]:8080", "http://[::1]:8080"),
    ] {
        let a = h.send(iterate(&[("host", host), ("origin", origin), ("sec-fetch-site", "same-origin")])).await;
        assert_eq!(a.status, 200, "{origin}: {}", a.text);
    }
    // Without `Host` there is no own origin to compare with: a page's `Origin` is refused.
    let a = h
        .send(req(
            "POST",
            "/v1/iterate",
            &[("content-type", "application/json"), ("origin", "http://127.0.0.1:8080")],
            SPEC,
        ))
        .await;
    assert_eq!(a.status, 403, "{}", a.text);
}

#[tokio::test]
async fn requests_a_browser_marks_as_from_another_site_are_refused_unless_a_navigation() {
    let h = harness(vec![]).await;
    let runs = |site: &'static str, mode: &'static str, dest: &'static str| {
        req(
            "GET",
            "/v1/runs",
            &[("host", HOST), ("sec-fetch-site", site), ("sec-fetch-mode", mode), ("sec-fetch-dest", dest)],
            "",
        )
    };
    for site in ["cross-site", "same-site", "bogus"] {
        // `<script src>`, `<img src>`, fetch(…, {mode: "no-cors"}): sent without an `Origin`.
        for (mode, dest) in [
            ("no-cors", "script"),
            ("no-cors", "image"),
            ("no-cors", "empty"),
            ("cors", "empty"),
            ("navigate", "iframe"),
        ] {
            let a = h.send(runs(site, mode, dest)).await;
            assert_eq!(
                (a.status, a.json["error"]["code"].as_str()),
                (403, Some("cross_site_request")),
                "{site} {mode} {dest}"
            );
        }
        let a = h.send(iterate(&[("sec-fetch-site", site), ("sec-fetch-mode", "no-cors")])).await;
        assert_eq!(a.status, 403, "{site}: {}", a.text);
        // A link followed to the viewer or a run: the linking page cannot read what it gets.
        let a = h
            .send(req(
                "GET",
                "/",
                &[
                    ("host", HOST),
                    ("sec-fetch-site", site),
                    ("sec-fetch-mode", "navigate"),
                    ("sec-fetch-dest", "document"),
                ],
                "",
            ))
            .await;
        assert_eq!(a.status, 200, "{site}: {}", a.text);
        // Not a form posted from there, though.
        let a = h
            .send(iterate(&[("sec-fetch-site", site), ("sec-fetch-mode", "navigate"), ("sec-fetch-dest", "document")]))
            .await;
        assert_eq!(a.status, 403, "{site}: {}", a.text);
    }
    for site in ["same-origin", "none"] {
        assert_eq!(h.send(runs(site, "cors", "empty")).await.status, 200, "{site}");
    }
    assert_nothing_started(&h).await;
}

#[tokio::test]
async fn the_viewer_works_from_its_own_origin() {
    let h = harness(vec![reply(r#"{"city": "Toledo"}"#)]).await;
    let run_id = h.send(iterate(&[])).await.json["run_id"].as_str().unwrap().to_owned();
    // The page, as a browser asks for it when the user opens the address …
    let navigate =
        [("host", HOST), ("sec-fetch-site", "none"), ("sec-fetch-mode", "navigate"), ("sec-fetch-dest", "document")];
    let page = h.send(req("GET", "/", &navigate, "")).await;
    assert_eq!(page.status, 200);
    assert!(page.text.contains("redraft runs"), "{}", page.text);
    // … then its script's requests (same origin: no `Origin` on GETs).
    let script =
        [("host", HOST), ("sec-fetch-site", "same-origin"), ("sec-fetch-mode", "cors"), ("sec-fetch-dest", "empty")];
    for uri in ["/v1/runs?limit=100".to_owned(), format!("/v1/runs/{run_id}")] {
        let a = h.send(req("GET", &uri, &script, "")).await;
        assert_eq!(a.status, 200, "{uri}: {}", a.text);
        assert!(a.text.contains(&run_id), "{}", a.text);
    }
}

#[tokio::test]
async fn cors_is_off_unless_origins_are_listed() {
    let h = harness(vec![]).await;
    let preflight = [
        ("host", HOST),
        ("origin", "http://localhost:3000"),
        ("access-control-request-method", "POST"),
        ("access-control-request-headers", "content-type"),
    ];
    let a = h.send(req("OPTIONS", "/v1/iterate", &preflight, "")).await;
    assert_eq!((a.status, a.json["error"]["code"].as_str()), (403, Some("origin_not_allowed")), "{}", a.text);
    assert_eq!(a.header("access-control-allow-origin"), None);
    assert_eq!(a.header("access-control-allow-methods"), None);
    let a = h.send(req("GET", "/v1/runs", &[("host", HOST)], "")).await;
    assert_eq!((a.header("access-control-allow-origin"), a.header("vary")), (None, None));
}

#[tokio::test]
async fn listed_origins_get_cors_and_no_one_else_does() {
    let h = harness_with(vec![reply(r#"{"city": "Toledo"}"#)], vec![], |c| {
        c.server.cors_origins = vec!["http://localhost:3000".into(), "https://app.example".into()];
    })
    .await;
    for origin in ["http://localhost:3000", "https://app.example"] {
        let preflight = [
            ("host", HOST),
            ("origin", origin),
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "authorization,content-type"),
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "cors"),
        ];
        for uri in ["/v1/iterate", "/v1/chat/completions", "/v1/runs/x"] {
            let a = h.send(req("OPTIONS", uri, &preflight, "")).await;
            assert_eq!(a.status, 204, "{origin} {uri}: {}", a.text);
            assert_eq!(a.header("access-control-allow-origin"), Some(origin));
            assert_eq!(a.header("access-control-allow-methods"), Some("GET, HEAD, POST, DELETE"));
            assert_eq!(a.header("access-control-allow-headers"), Some("authorization, content-type"));
            assert!(a.headers.get_all("vary").iter().any(|v| v == "origin"), "{:?}", a.headers);
            assert_eq!(a.header("access-control-allow-credentials"), None);
        }
    }
    // What OpenAI's SDK sends from a browser, and per-request options: `x-…` and `openai-…`
    // headers are allowed; other names (and malformed ones) are not.
    let asked = "Authorization, content-type, X-Stainless-OS, x-stainless-retry-count, x-redraft-max-iterations, openai-organization, cookie, x-, x-a b";
    let preflight = [
        ("host", HOST),
        ("origin", "http://localhost:3000"),
        ("access-control-request-method", "POST"),
        ("access-control-request-headers", asked),
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-mode", "cors"),
    ];
    let a = h.send(req("OPTIONS", "/v1/chat/completions", &preflight, "")).await;
    assert_eq!(a.status, 204, "{}", a.text);
    assert_eq!(
        a.header("access-control-allow-headers"),
        Some(
            "authorization, content-type, x-stainless-os, x-stainless-retry-count, x-redraft-max-iterations, openai-organization"
        )
    );
    let a = h.send(iterate(&[("origin", "http://localhost:3000"), ("sec-fetch-site", "same-site")])).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.header("access-control-allow-origin"), Some("http://localhost:3000"));
    assert!(a.header("access-control-expose-headers").unwrap().contains("x-redraft-run-id"));
    // Look-alikes of a listed origin: no preflight, no request, no CORS header.
    for origin in [
        "http://localhost:3001",
        "https://localhost:3000",
        "http://localhost",
        "http://127.0.0.1:3000",
        "http://localhost:3000.attacker.example",
        "http://sub.localhost:3000",
        "http://app.example",
        "https://app.example:8443",
        "https://sub.app.example",
        "https://app.example.attacker.example",
        "https://attacker-app.example",
        "null",
    ] {
        let preflight = [("host", HOST), ("origin", origin), ("access-control-request-method", "POST")];
        let a = h.send(req("OPTIONS", "/v1/iterate", &preflight, "")).await;
        assert_eq!(a.status, 403, "{origin}: {}", a.text);
        assert_eq!(a.header("access-control-allow-origin"), None, "{origin}");
        let a = h.send(iterate(&[("origin", origin)])).await;
        assert_eq!((a.status, a.header("access-control-allow-origin")), (403, None), "{origin}");
    }
    // With CORS on, every answer varies by origin; one with no `Origin` allows none.
    let a = h.send(req("GET", "/v1/runs", &[("host", HOST)], "")).await;
    assert_eq!((a.status, a.header("access-control-allow-origin"), a.header("vary")), (200, None, Some("origin")));
    assert_eq!(h.model.calls().await, 1, "only the listed origin's request called the model");
}

#[tokio::test]
async fn with_tokens_a_listed_origins_preflight_needs_none_and_its_refusals_are_readable() {
    let h =
        harness_with(vec![], vec!["t1".into()], |c| c.server.cors_origins = vec!["http://localhost:3000".into()]).await;
    let preflight = [("host", HOST), ("origin", "http://localhost:3000"), ("access-control-request-method", "GET")];
    assert_eq!(h.send(req("OPTIONS", "/v1/runs", &preflight, "")).await.status, 204);
    let a = h.send(req("GET", "/v1/runs", &[("host", HOST), ("origin", "http://localhost:3000")], "")).await;
    assert_eq!((a.status, a.header("access-control-allow-origin")), (401, Some("http://localhost:3000")));
    let headers = [("host", HOST), ("origin", "http://localhost:3000"), ("authorization", "Bearer t1")];
    assert_eq!(h.send(req("GET", "/v1/runs", &headers, "")).await.status, 200);
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
