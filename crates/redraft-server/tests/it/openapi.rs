//! The OpenAPI document describes every endpoint.

use serde_json::Value;

use crate::harness;

#[tokio::test]
async fn the_document_lists_every_endpoint() {
    let h = harness(vec![]).await;
    let a = h.call("GET", "/openapi.json", None).await;
    assert_eq!(a.status, 200);
    let doc = a.json;
    assert_eq!(doc["openapi"].as_str().map(|v| v.starts_with("3.1")), Some(true));
    let mut endpoints = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let statuses: Vec<&String> = op["responses"].as_object().unwrap().keys().collect();
            let statuses: Vec<&str> = statuses.iter().map(|s| s.as_str()).collect();
            endpoints.push(format!("{:<6} {path} {}", method.to_uppercase(), statuses.join(",")));
            assert!(op["responses"].as_object().unwrap().values().all(|r| r["description"].is_string()), "{path}");
        }
    }
    endpoints.sort();
    insta::assert_snapshot!(endpoints.join("\n"), @"
    DELETE /v1/runs/{id} 200,202,403,404,409
    GET    / 200
    GET    /healthz 200
    GET    /metrics 200
    GET    /openapi.json 200
    GET    /runs/{id} 200
    GET    /v1/kinds 200
    GET    /v1/kinds/{name} 200,404
    GET    /v1/models 200
    GET    /v1/models/{id} 200,404
    GET    /v1/runs 200,400
    GET    /v1/runs/{id} 200,404
    GET    /v1/runs/{id}/events 200,404
    POST   /v1/chat 200,400,502
    POST   /v1/chat/completions 200,400,422,502,503
    POST   /v1/decide 200,400
    POST   /v1/iterate 200,202,400,403,404,422,503
    POST   /v1/responses 200,400,422,502,503
    POST   /v1/runs 202,400,403,503
    POST   /v1/runs/{id}/abort 200,403,404,409
    POST   /v1/runs/{id}/answer 202,400,403,404,409
    POST   /v1/validate 200,400,404,422,503
    ");
    // The run spec is the one the code derives.
    let spec = &doc["components"]["schemas"]["RunSpec"];
    assert!(spec["properties"]["prompt"].is_object(), "{spec}");
    assert_eq!(
        doc["paths"]["/v1/iterate"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/RunSpec"
    );
    let text = serde_json::to_string(&doc).unwrap();
    assert!(!text.contains("#/$defs/"), "every reference resolves within the document");
    for r in refs(&doc) {
        let name = r.strip_prefix("#/components/schemas/").unwrap();
        assert!(doc["components"]["schemas"][name].is_object(), "{r}");
    }
}

fn refs(v: &Value) -> Vec<String> {
    match v {
        Value::Object(m) => m
            .iter()
            .flat_map(|(k, v)| if k == "$ref" { v.as_str().map(str::to_owned).into_iter().collect() } else { refs(v) })
            .collect(),
        Value::Array(a) => a.iter().flat_map(refs).collect(),
        _ => Vec::new(),
    }
}
