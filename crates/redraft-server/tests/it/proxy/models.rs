//! `GET /v1/models`: the configured models, a backend's own, and one model by its id.

use serde_json::json;

#[tokio::test]
async fn models_lists_the_configured_models() {
    let h = crate::harness_with(vec![], vec![], |c| {
        c.fallback_models = vec!["fake/bigger".into()];
        c.models
            .insert("openai/gpt-4o-mini".into(), redraft::Price { input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.6 });
    })
    .await;
    let a = h.call("GET", "/v1/models", None).await;
    assert_eq!(a.status, 200);
    let ids: Vec<&str> = a.json["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["fake/m", "fake/bigger", "openai/gpt-4o-mini"]);
    assert_eq!(a.json["object"], "list");
}

/// `GET /v1/models/{id}` answers the model object for every listed id, `/` included (the
/// official clients send the id as it is), and for a bare name of the default provider; an
/// unknown one is 404 in OpenAI's error shape.
#[tokio::test]
async fn one_model_is_found_by_its_id_slash_and_all() {
    let h = crate::harness_with(vec![], vec![], |c| {
        c.models
            .insert("openai/gpt-4o-mini".into(), redraft::Price { input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.6 });
    })
    .await;
    for (asked, id) in
        [("fake/m", "fake/m"), ("openai/gpt-4o-mini", "openai/gpt-4o-mini"), ("m", "fake/m"), ("fake%2Fm", "fake/m")]
    {
        let a = h.call("GET", &format!("/v1/models/{asked}"), None).await;
        assert_eq!(a.status, 200, "{asked}: {}", a.text);
        assert_eq!((a.json["id"].as_str(), a.json["object"].as_str()), (Some(id), Some("model")), "{asked}");
        assert_eq!(a.json["owned_by"], id.split_once('/').unwrap().0);
    }
    for unknown in ["fake/other", "nobody/m", "fake/m/extra", "fake/m%00", "..%2Ffake%2Fm"] {
        let a = h.call("GET", &format!("/v1/models/{unknown}"), None).await;
        assert_eq!(a.status, 404, "{unknown}: {}", a.text);
        assert_eq!(a.json["error"]["code"], "model_not_found", "{unknown}");
        assert_eq!(a.json["error"]["type"], "not_found_error", "{unknown}: OpenAI's shape");
        assert!(a.json["error"]["message"].as_str().unwrap().contains("GET /v1/models"), "{}", a.text);
    }
}

/// An OpenAI-compatible backend's own models are listed too (`provider/model`), and found by id;
/// a backend that cannot list them leaves only the configured ones.
#[tokio::test]
async fn models_lists_what_the_backend_lists_too() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let backend = MockServer::start().await;
    let list = json!({"object": "list", "data": [{"id": "m", "object": "model"}, {"id": "m-mini-2026", "object": "model"}, {"id": "org/embed", "object": "model"}]});
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(list))
        .expect(1)
        .mount(&backend)
        .await;
    let url = format!("{}/v1", backend.uri());
    let h =
        crate::harness_with(vec![], vec![], move |c| c.providers.get_mut("fake").unwrap().base_url = Some(url)).await;
    let a = h.call("GET", "/v1/models", None).await;
    let ids: Vec<&str> = a.json["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["fake/m", "fake/m-mini-2026", "fake/org/embed"], "the configured one once, then the backend's");
    // Found by id, and asked for once a minute at most (`expect(1)`).
    let a = h.call("GET", "/v1/models/fake/org/embed", None).await;
    assert_eq!((a.status, a.json["owned_by"].as_str()), (200, Some("fake")), "{}", a.text);
    let a = h.call("GET", "/v1/models/m-mini-2026", None).await;
    assert_eq!(a.json["id"], "fake/m-mini-2026", "a bare name is the default provider's: {}", a.text);

    // The default fake answers only chat completions: its list is left out, not an error.
    let h = crate::harness(vec![]).await;
    let a = h.call("GET", "/v1/models", None).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json["data"].as_array().unwrap().len(), 1, "{}", a.text);
}
