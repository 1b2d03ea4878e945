//! Tokens, body size, run slots, the exec allow-list and the server's ceilings.

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use redraft_testkit::{reply, slow};
use serde_json::{Value, json};

use crate::{harness, harness_with};

fn with_token(method: &str, uri: &str, token: Option<&str>) -> Request<Body> {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    b.body(Body::empty()).unwrap()
}

#[tokio::test]
async fn with_tokens_every_request_needs_one() {
    let h = harness_with(vec![], vec!["s3cret".into(), "other".into()], |_| {}).await;
    let a = h.send(with_token("GET", "/v1/runs", None)).await;
    assert_eq!(a.status, 401, "{}", a.text);
    assert_eq!(a.json["error"]["code"], "unauthorized");
    assert_eq!(a.header("www-authenticate"), Some("Bearer"));
    assert_eq!(h.send(with_token("GET", "/v1/runs", Some("wrong"))).await.status, 401);
    assert_eq!(h.send(with_token("GET", "/v1/runs", Some("s3cre"))).await.status, 401);
    assert_eq!(h.send(with_token("GET", "/v1/runs", Some("s3cret"))).await.status, 200);
    assert_eq!(h.send(with_token("GET", "/v1/kinds", Some("other"))).await.status, 200);
    // The proxy answers in OpenAI's shape.
    let a = h.send(with_token("GET", "/v1/models", Some("wrong"))).await;
    assert_eq!((a.status, a.json["error"]["type"].as_str()), (401, Some("authentication_error")));
    // Open: health, the viewer page (it asks for a token) and the API description.
    for open in ["/healthz", "/", "/openapi.json"] {
        assert_eq!(h.send(with_token("GET", open, None)).await.status, 200, "{open}");
    }
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let h = harness_with(vec![], vec![], |c| c.server.max_body_bytes = 1024).await;
    let big = json!({"prompt": "x".repeat(2000)});
    let a = h.call("POST", "/v1/iterate", Some(big.clone())).await;
    assert_eq!(a.status, 413, "{}", a.text);
    assert_eq!(a.json["error"]["code"], "body_too_large");
    assert!(a.json["error"]["message"].as_str().unwrap().contains("1024 bytes"));
    let a = h.call("POST", "/v1/chat/completions", Some(big)).await;
    assert_eq!((a.status, a.json["error"]["type"].as_str()), (413, Some("invalid_request_error")), "{}", a.text);
    // Without a Content-Length too (a streamed body).
    let chunks = futures_util::stream::iter(vec![Ok::<_, std::io::Error>(vec![b'{'; 2000])]);
    let req = Request::builder()
        .method("POST")
        .uri("/v1/validate")
        .header("content-type", "application/json")
        .body(Body::from_stream(chunks))
        .unwrap();
    assert_eq!(h.send(req).await.status, 413);
}

#[tokio::test]
async fn beyond_the_run_slots_runs_wait_in_the_queue_then_run() {
    let h = harness_with(
        vec![slow(r#"{"city": "Toledo"}"#, Duration::from_millis(600)), reply(r#"{"city": "Toledo"}"#)],
        vec![],
        |c| c.server.max_concurrent_runs = 1,
    )
    .await;
    let spec = json!({"prompt": "city?", "schema": {"type": "object"}});
    let first = h.call("POST", "/v1/runs", Some(spec.clone())).await;
    assert_eq!(first.status, 202, "{}", first.text);
    // The only slot is taken: this one waits in the queue instead of failing, and runs next.
    let second = h.call("POST", "/v1/iterate", Some(spec.clone())).await;
    assert_eq!(second.status, 200, "{}", second.text);
    let first = h.finished(first.json["run_id"].as_str().unwrap()).await;
    assert_eq!(first["status"], "succeeded");
    assert_eq!(h.model.calls().await, 2);
}

#[tokio::test]
async fn a_run_that_waited_too_long_for_a_slot_is_withdrawn_with_503() {
    let h = harness_with(vec![slow(r#"{"city": "Toledo"}"#, Duration::from_secs(3))], vec![], |c| {
        c.server.max_concurrent_runs = 1;
        c.queue.max_wait = Duration::from_millis(300);
    })
    .await;
    let spec = json!({"prompt": "city?", "schema": {"type": "object"}});
    let first = h.call("POST", "/v1/runs", Some(spec.clone())).await;
    assert_eq!(first.status, 202, "{}", first.text);
    let second = h.call("POST", "/v1/iterate", Some(spec.clone())).await;
    assert_eq!(second.status, 503, "{}", second.text);
    assert_eq!(second.header("retry-after"), Some("5"));
    assert_eq!(second.json["error"]["code"], "busy");
    assert!(second.json["error"]["message"].as_str().unwrap().contains("withdrawn"), "{}", second.text);
    let metrics = h.call("GET", "/metrics", None).await.text;
    assert!(metrics.contains("\nredraft_runs_shed_total{reason=\"overloaded\"} 1\n"), "{metrics}");
    // Withdrawn: not stored, never sent to the model.
    let runs = h.call("GET", "/v1/runs", None).await;
    assert_eq!(runs.json["runs"].as_array().unwrap().len(), 1, "{}", runs.text);
    h.finished(first.json["run_id"].as_str().unwrap()).await;
    assert_eq!(h.model.calls().await, 1);
}

#[tokio::test]
async fn a_full_queue_is_503_with_retry_after_and_stores_nothing() {
    let h = harness_with(vec![slow(r#"{"city": "Toledo"}"#, Duration::from_millis(800))], vec![], |c| {
        c.server.max_concurrent_runs = 1;
        c.queue.max_queued_runs = 1;
    })
    .await;
    let spec = json!({"prompt": "city?", "schema": {"type": "object"}});
    let running = h.call("POST", "/v1/runs", Some(spec.clone())).await;
    assert_eq!(running.status, 202, "{}", running.text);
    let queued = h.call("POST", "/v1/runs", Some(spec.clone())).await;
    assert_eq!(queued.status, 202, "{}", queued.text);
    let refused = h.call("POST", "/v1/runs", Some(spec.clone())).await;
    assert_eq!(refused.status, 503, "{}", refused.text);
    assert_eq!(refused.header("retry-after"), Some("2"));
    assert_eq!(refused.json["error"]["code"], "busy");
    assert!(refused.json["error"]["message"].as_str().unwrap().contains("queue is full"), "{}", refused.text);
    let proxied = h
        .call("POST", "/v1/chat/completions", Some(json!({"model": "fake/m", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})))
        .await;
    assert_eq!(
        (proxied.status, proxied.json["error"]["type"].as_str()),
        (503, Some("server_error")),
        "{}",
        proxied.text
    );
    let runs = h.call("GET", "/v1/runs", None).await;
    assert_eq!(runs.json["runs"].as_array().unwrap().len(), 2, "{}", runs.text);
    // An operator sees the queue and what was shed.
    let metrics = h.call("GET", "/metrics", None).await.text;
    assert!(metrics.contains("\nredraft_queue_depth 1\n"), "{metrics}");
    assert!(metrics.contains("\nredraft_runs_shed_total{reason=\"queue_full\"} 2\n"), "{metrics}");
}

#[tokio::test]
async fn exec_outside_the_allow_list_is_403() {
    let h = harness_with(vec![reply(r#"{"city": "Toledo"}"#), reply(r#"{"city": "Toledo"}"#)], vec![], |c| {
        c.server.exec_allow = vec!["true".into(), "test -s \"$ARTIFACT\"".into(), "test -s {artifact}".into()];
    })
    .await;
    for evaluator in ["exec:rm -rf /", "exec:true; rm -rf /", "exec:sh -c true"] {
        let a = h.call("POST", "/v1/runs", Some(json!({"prompt": "x", "evaluator": evaluator}))).await;
        assert_eq!(a.status, 403, "{evaluator}: {}", a.text);
        assert_eq!(a.json["error"]["code"], "exec_not_allowed");
        assert!(a.json["error"]["message"].as_str().unwrap().contains("exec_allow"), "{}", a.text);
    }
    let a =
        h.call("POST", "/v1/iterate", Some(json!({"prompt": "x", "evaluator": ["exec:test -s \"$ARTIFACT\""]}))).await;
    assert_eq!(a.status, 200, "an entry written with shell syntax runs when asked for exactly: {}", a.text);
    let a = h.call("POST", "/v1/iterate", Some(json!({"prompt": "x", "evaluator": ["exec:test -s {artifact}"]}))).await;
    assert_eq!(a.status, 200, "an entry naming the artifact admits it: {}", a.text);
}

#[tokio::test]
async fn server_files_and_unlisted_urls_are_out_of_reach_of_requests() {
    let h = harness_with(vec![], vec![], |c| {
        c.server.http_allow = vec!["http://127.0.0.1:9/allowed/*".into()];
    })
    .await;
    for (evaluator, code) in [
        ("schema:/etc/passwd", "path_not_allowed"),
        ("schema:../../secrets.json", "path_not_allowed"),
        ("http:http://169.254.169.254/latest/meta-data", "http_not_allowed"),
        ("http:http://127.0.0.1:9/allowed/../admin", "http_not_allowed"),
    ] {
        let a = h.call("POST", "/v1/iterate", Some(json!({"prompt": "x", "evaluator": evaluator}))).await;
        assert_eq!((a.status, a.json["error"]["code"].as_str()), (403, Some(code)), "{evaluator}: {}", a.text);
        assert!(a.json["error"]["message"].as_str().unwrap().contains("not allowed over HTTP"), "{}", a.text);
    }
    assert_eq!(h.model.calls().await, 0);
}

#[tokio::test]
async fn requests_over_the_ceilings_are_400_naming_the_field() {
    let h = harness_with(vec![], vec![], |c| {
        c.server.ceilings.max_budget_usd = Some(1.0);
        c.server.ceilings.max_wall_time = Some(Duration::from_secs(60));
        c.models.insert("fake/m".into(), redraft::Price { input_usd_per_mtok: 1.0, output_usd_per_mtok: 1.0 });
    })
    .await;
    for (body, field, rule) in [
        (json!({"prompt": "x", "max_iterations": 21}), "max_iterations", "must be at most 20"),
        (json!({"prompt": "x", "max_budget_usd": 5.0}), "max_budget_usd", "must be at most 1 here"),
        (json!({"prompt": "x", "max_wall_time": "10m"}), "max_wall_time", "must be at most 60s here"),
    ] {
        let a = h.call("POST", "/v1/iterate", Some(body.clone())).await;
        assert_eq!((a.status, a.json["error"]["code"].as_str()), (400, Some("invalid_field")), "{body}: {}", a.text);
        let message = a.json["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("`{field}`")) && message.contains(rule), "{message}");
    }
    assert_eq!(h.model.calls().await, 0);
}

#[tokio::test]
async fn a_run_within_the_ceilings_gets_the_wall_time_ceiling() {
    let h = harness_with(vec![slow(r#"{"city": "Toledo"}"#, Duration::from_secs(5))], vec![], |c| {
        c.server.ceilings.max_wall_time = Some(Duration::from_millis(300));
    })
    .await;
    let a = h.call("POST", "/v1/iterate", Some(json!({"prompt": "x"}))).await;
    assert_eq!(a.status, 422, "{}", a.text);
    assert_eq!(a.json["halted_because"], "wall_time");
}

#[tokio::test]
async fn sampling_settings_out_of_range_are_400_on_every_endpoint() {
    let h = harness(vec![]).await;
    let chat = |extra: Value| {
        let mut body = json!({"model": "fake/m", "messages": [{"role": "user", "content": "x"}]});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let cases = [
        ("/v1/iterate", json!({"prompt": "x", "temperature": 99}), "temperature"),
        ("/v1/runs", json!({"prompt": "x", "temperature": -1}), "temperature"),
        ("/v1/iterate", json!({"prompt": "x", "max_tokens": 0}), "max_tokens"),
        ("/v1/chat", json!({"prompt": "x", "temperature": 99}), "temperature"),
        ("/v1/chat", json!({"prompt": "x", "max_tokens": 0}), "max_tokens"),
        ("/v1/chat/completions", chat(json!({"temperature": 99})), "temperature"),
        (
            "/v1/chat/completions",
            chat(json!({"temperature": -1, "response_format": {"type": "json_object"}})),
            "temperature",
        ),
        ("/v1/chat/completions", chat(json!({"max_tokens": 0})), "max_tokens"),
    ];
    for (path, body, field) in cases {
        let a = h.call("POST", path, Some(body.clone())).await;
        assert_eq!(a.status, 400, "{path} {body}: {}", a.text);
        let message = a.json["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("`{field}`")) && message.contains("invalid"), "{path} {body}: {message}");
    }
    assert_eq!(h.model.calls().await, 0, "nothing was sent to the model");
}

#[tokio::test]
async fn a_budget_no_attempt_can_fit_is_400_showing_the_estimate() {
    let h = harness_with(vec![], vec![], |c| {
        c.models.insert("fake/m".into(), redraft::Price { input_usd_per_mtok: 1000.0, output_usd_per_mtok: 1000.0 });
    })
    .await;
    let a = h.call("POST", "/v1/iterate", Some(json!({"prompt": "x", "max_budget_usd": 0.0001}))).await;
    assert_eq!((a.status, a.json["error"]["code"].as_str()), (400, Some("invalid_plan")), "{}", a.text);
    let message = a.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("cannot pay for one attempt") && message.contains("characters per token"), "{message}");
    assert_eq!(h.model.calls().await, 0);
    assert_eq!(h.call("GET", "/v1/runs", None).await.json["runs"], json!([]), "nothing was recorded");
}

#[tokio::test]
async fn an_allowed_validator_cannot_send_a_run_elsewhere_with_a_redirect() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let elsewhere = MockServer::start().await;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(200)).expect(0).mount(&elsewhere).await;
    let validator = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/ok/check"))
        .respond_with(ResponseTemplate::new(307).insert_header("location", format!("{}/steal", elsewhere.uri())))
        .mount(&validator)
        .await;
    let allowed = format!("{}/ok/*", validator.uri());
    let h = harness_with(vec![reply(r#"{"city": "Toledo"}"#)], vec![], |c| c.server.http_allow = vec![allowed]).await;
    let evaluator = format!("http:{}/ok/check", validator.uri());
    let a =
        h.call("POST", "/v1/iterate", Some(json!({"prompt": "x", "evaluator": evaluator, "max_iterations": 1}))).await;
    assert_eq!(a.status, 422, "{}", a.text);
    let issue = &a.json["history"][0]["issues"][0];
    assert_eq!(issue["code"], "evaluator_error", "{}", a.text);
    let message = issue["message"].as_str().unwrap();
    assert!(
        message.contains("HTTP 307") && message.contains("/steal") && message.contains("not followed"),
        "{message}"
    );
    elsewhere.verify().await;
}

#[tokio::test]
async fn a_ref_in_an_allowed_schema_file_cannot_reach_outside_the_working_directory() {
    // The server works in `root/served`; `root/secret.json` is beside it, out of reach.
    let model = redraft_testkit::FakeOpenAi::start(vec![reply(r#"{"city": "Toledo"}"#)]).await;
    let root = tempfile::tempdir().unwrap();
    let served = root.path().join("served");
    std::fs::create_dir_all(served.join("schemas")).unwrap();
    std::fs::write(root.path().join("secret.json"), r#"{"type": "object"}"#).unwrap();
    std::fs::write(served.join("escape.json"), r#"{"$ref": "../secret.json"}"#).unwrap();
    std::os::unix::fs::symlink(root.path().join("secret.json"), served.join("schemas/link.json")).unwrap();
    std::fs::write(served.join("schemas/linked.json"), r#"{"$ref": "link.json"}"#).unwrap();
    std::fs::write(served.join("schemas/city.json"), crate::CITY_SCHEMA).unwrap();
    std::fs::write(served.join("schemas/order.json"), r#"{"$ref": "city.json"}"#).unwrap();
    let mut config = crate::config(&model.base_url(), root.path());
    // Schema files are read for a request only under `schema_dir`: here, the whole directory.
    config.server.schema_dir = Some(".".into());
    let store = redraft::store::open(&config).await.unwrap();
    let state = redraft_server::AppState::in_dir(config, store, vec![], served).unwrap();
    let h = crate::Harness { app: redraft_server::router(state.clone()), dir: root, model, state };
    for (evaluator, reference) in
        [("schema:escape.json", "`../secret.json`"), ("schema:schemas/linked.json", "`link.json`")]
    {
        for path in ["/v1/iterate", "/v1/runs"] {
            let a = h.call("POST", path, Some(json!({"prompt": "x", "evaluator": evaluator}))).await;
            assert_eq!(a.status, 400, "{evaluator}: {}", a.text);
            let message = a.json["error"]["message"].as_str().unwrap();
            assert!(message.contains(&format!("{reference} is outside the schema file's directory")), "{message}");
            assert!(message.contains("hint:") && !message.contains("\"type\""), "{message}");
        }
    }
    assert_eq!(h.model.calls().await, 0, "nothing was sent to the model");
    // A reference that stays inside is followed.
    let a = h.call("POST", "/v1/iterate", Some(json!({"prompt": "x", "evaluator": "schema:schemas/order.json"}))).await;
    assert_eq!(a.status, 200, "{}", a.text);
}
