//! Which web pages may call the server: a page at another origin is refused (its `Origin`, or
//! what `Sec-Fetch-Site` says of it) and starts nothing; the server's own pages may post.

use redraft_testkit::reply;

use super::{HOST, SPEC, assert_nothing_started, iterate, message, req};
use crate::harness;

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
