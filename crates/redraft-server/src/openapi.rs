//! The OpenAPI document, generated from the handlers' `#[utoipa::path]` attributes; the run
//! spec's schema is the one `schemars` derives from [`RunSpec`] (the same the MCP face uses).

use redraft::RunSpec;
use serde_json::{Value, json};

/// The error body of every endpoint.
#[derive(Debug, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// For people: what is wrong and how to fix it.
    pub message: String,
    /// For programs: `malformed_request`, `invalid_request`, `invalid_field`, `exec_not_allowed`,
    /// `http_not_allowed`, `path_not_allowed`, `model_not_allowed`, `agent_not_allowed`,
    /// `sandbox_not_allowed`, `unknown_run`, `unknown_kind`, `body_too_large`, `busy`,
    /// `unauthorized`, …
    pub code: String,
    /// OpenAI-compatible endpoints only: OpenAI's error type.
    #[schema(rename = "type")]
    pub kind: Option<String>,
    /// When a run was made.
    pub run_id: Option<String>,
}

/// The document's frame: info and tags.
#[derive(Debug, utoipa::OpenApi)]
#[openapi(
    // Routed by hand (its id may contain `/`, which a path parameter cannot hold): listed here.
    paths(crate::models::model),
    info(
        title = "redraft",
        description = "Bounded generate → check → feed back → retry loops around language models. Every run is recorded; every endpoint returns results in one shape (run_id, status, artifact, validation, history, metrics, escalation). Send `Authorization: Bearer TOKEN` when the server has tokens."
    ),
    tags(
        (name = "runs", description = "Run the loop: wait for the result, or start it and follow its events"),
        (name = "checks", description = "Validate an artifact; decide an iteration's next step"),
        (name = "models", description = "Ask a model once"),
        (name = "kinds", description = "Registered artifact types"),
        (name = "openai", description = "OpenAI-compatible: answers checked against `response_format` and retried with feedback"),
        (name = "operations", description = "Health, metrics, the run viewer")
    )
)]
pub struct ApiDoc;

/// The final document: `RunSpec` (and its definitions) under `components/schemas`, the run
/// endpoints' bodies pointing at it, and `/openapi.json` itself.
pub fn document(api: utoipa::openapi::OpenApi) -> Value {
    let mut doc = serde_json::to_value(&api).unwrap_or_else(|_| json!({}));
    let mut spec = serde_json::to_value(schemars::schema_for!(RunSpec)).unwrap_or_else(|_| json!({}));
    let defs = spec.as_object_mut().and_then(|o| {
        o.remove("$schema");
        o.remove("$defs")
    });
    let schemas = &mut doc["components"]["schemas"];
    if let Some(Value::Object(defs)) = defs {
        for (name, schema) in defs {
            schemas[name.as_str()] = rewrite_refs(schema);
        }
    }
    schemas["RunSpec"] = rewrite_refs(spec);
    for path in ["/v1/iterate", "/v1/runs"] {
        doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"] =
            json!({"$ref": "#/components/schemas/RunSpec"});
    }
    doc["paths"]["/openapi.json"] = json!({"get": {
        "tags": ["operations"],
        "summary": "This document.",
        "operationId": "openapi",
        "responses": {"200": {"description": "The OpenAPI 3.1 document", "content": {"application/json": {}}}},
    }});
    doc
}

/// `#/$defs/X` → `#/components/schemas/X`.
fn rewrite_refs(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => {
                        let r = r.strip_prefix("#/$defs/").map(|n| format!("#/components/schemas/{n}")).unwrap_or(r);
                        (k, Value::String(r))
                    }
                    (_, v) => (k, rewrite_refs(v)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(rewrite_refs).collect()),
        other => other,
    }
}
