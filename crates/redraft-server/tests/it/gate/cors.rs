//! CORS: off unless `[server] cors_origins` lists origins, and then for exactly those.

use redraft_testkit::reply;

use super::{HOST, iterate, req};
use crate::{harness, harness_with};

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
