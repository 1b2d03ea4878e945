//! A request that may change something needs a JSON content type: what a page can send to
//! another origin without asking first is refused before anything starts.

use super::{HOST, SPEC, assert_nothing_started, message, req};
use crate::harness;

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
