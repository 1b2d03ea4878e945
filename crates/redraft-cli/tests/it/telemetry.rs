//! Traces as a collector receives them: the real binary sends OTLP/HTTP (protobuf) to a
//! receiver on 127.0.0.1, and the spans are decoded and checked against the run's result.

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use prost::Message;
use redraft_testkit::{FakeOpenAi, reply};
use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::{output, redraft, write};

const SCHEMA: &str = r#"{"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}"#;

/// An attribute value, as the test compares it.
#[derive(Debug, Clone, PartialEq)]
enum Attr {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
}

/// A received span, flattened.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent: Vec<u8>,
    attrs: BTreeMap<String, Attr>,
    /// The attributes of the resource that sent it.
    resource: BTreeMap<String, Attr>,
}

impl Span {
    fn str(&self, key: &str) -> &str {
        match self.attrs.get(key) {
            Some(Attr::Str(s)) => s,
            other => panic!("{} has no string {key}: {other:?} in {:?}", self.name, self.attrs),
        }
    }

    fn int(&self, key: &str) -> i64 {
        match self.attrs.get(key) {
            Some(Attr::Int(n)) => *n,
            other => panic!("{} has no integer {key}: {other:?} in {:?}", self.name, self.attrs),
        }
    }

    fn double(&self, key: &str) -> f64 {
        match self.attrs.get(key) {
            Some(Attr::Double(n)) => *n,
            other => panic!("{} has no number {key}: {other:?} in {:?}", self.name, self.attrs),
        }
    }
}

fn attrs(kvs: &[KeyValue]) -> BTreeMap<String, Attr> {
    kvs.iter()
        .filter_map(|kv| {
            let value = match kv.value.as_ref().and_then(|v: &AnyValue| v.value.clone())? {
                Any::StringValue(s) => Attr::Str(s),
                Any::IntValue(n) => Attr::Int(n),
                Any::DoubleValue(n) => Attr::Double(n),
                Any::BoolValue(b) => Attr::Bool(b),
                _ => return None,
            };
            Some((kv.key.clone(), value))
        })
        .collect()
}

/// An OTLP/HTTP trace receiver on 127.0.0.1: it accepts `POST /v1/traces`.
async fn collector() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200).insert_header("content-type", "application/x-protobuf"))
        .mount(&server)
        .await;
    server
}

/// Every span the collector received, decoded from protobuf.
async fn spans(collector: &MockServer) -> Vec<Span> {
    let mut out = Vec::new();
    for request in collector.received_requests().await.unwrap() {
        assert_eq!(request.url.path(), "/v1/traces");
        assert_eq!(
            request.headers.get("content-type").and_then(|v| v.to_str().ok()),
            Some("application/x-protobuf"),
            "OTLP/HTTP with protobuf"
        );
        let export = ExportTraceServiceRequest::decode(request.body.as_slice()).unwrap();
        for resource_spans in export.resource_spans {
            let resource = attrs(&resource_spans.resource.map(|r| r.attributes).unwrap_or_default());
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    out.push(Span {
                        name: span.name,
                        trace_id: span.trace_id,
                        span_id: span.span_id,
                        parent: span.parent_span_id,
                        attrs: attrs(&span.attributes),
                        resource: resource.clone(),
                    });
                }
            }
        }
    }
    out
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    let mut found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
    found.sort_by_key(|s| s.attrs.get("redraft.iteration").map(|a| format!("{a:?}")));
    found
}

/// The one span among `candidates` that is `child`'s parent.
fn parent_of<'a>(child: &Span, candidates: &[&'a Span]) -> &'a Span {
    let parents: Vec<&&Span> = candidates.iter().filter(|p| p.span_id == child.parent).collect();
    assert_eq!(parents.len(), 1, "{} has no parent among {candidates:?}", child.name);
    parents[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_sends_its_spans_with_the_genai_attributes_to_the_otlp_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "schema.json", SCHEMA);
    let model = FakeOpenAi::start(vec![reply(r#"{"town": "Toledo"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    let collector = collector().await;
    let mut cmd = redraft(dir.path());
    cmd.env("OPENAI_BASE_URL", model.base_url())
        .env("OPENAI_API_KEY", "sk-test")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.uri())
        .args(["run", "--model", "openai/fake", "--schema", "schema.json", "--prompt", "Which city?", "--json"])
        .args(["--temperature", "0.25", "--max-tokens", "300"]);
    let out = output(cmd).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    let history = result["history"].as_array().unwrap();
    assert_eq!(history.len(), 2);

    // Sent before the process exited: nothing to wait for.
    let spans = spans(&collector).await;
    let runs = named(&spans, "run");
    let attempts = named(&spans, "attempt");
    let calls = named(&spans, "provider call");
    let evaluators = named(&spans, "evaluator");
    assert_eq!((runs.len(), attempts.len(), calls.len(), evaluators.len()), (1, 2, 2, 2), "{spans:#?}");
    let run = runs[0];
    assert!(spans.iter().all(|s| s.trace_id == run.trace_id), "one trace");
    assert!(run.parent.is_empty(), "the run is the root");
    assert_eq!(run.resource.get("service.name"), Some(&Attr::Str("redraft".into())));
    assert_eq!(run.str("redraft.run_id"), result["run_id"].as_str().unwrap());
    assert_eq!(run.str("redraft.model"), "openai/fake");
    assert_eq!(run.str("redraft.status"), "succeeded");
    assert_eq!(run.str("redraft.halted_because"), "success");
    assert_eq!(run.int("redraft.iterations"), 2);
    assert_eq!(run.int("redraft.usage.input_tokens"), result["metrics"]["tokens_in"].as_i64().unwrap());
    assert_eq!(run.int("redraft.usage.output_tokens"), result["metrics"]["tokens_out"].as_i64().unwrap());

    for (i, attempt) in attempts.iter().enumerate() {
        let recorded = &history[i];
        assert_eq!(parent_of(attempt, &runs).span_id, run.span_id);
        assert_eq!(attempt.int("redraft.iteration"), recorded["iteration"].as_i64().unwrap());
        assert_eq!(attempt.str("redraft.attempt.status"), recorded["status"].as_str().unwrap());
        assert_eq!(attempt.double("redraft.score"), recorded["score"].as_f64().unwrap());
        assert_eq!(attempt.str("redraft.model"), recorded["model"].as_str().unwrap());
        assert_eq!(attempt.int("redraft.usage.input_tokens"), recorded["tokens_in"].as_i64().unwrap());
        assert_eq!(attempt.int("redraft.usage.output_tokens"), recorded["tokens_out"].as_i64().unwrap());
    }
    assert_eq!(attempts[0].str("redraft.attempt.status"), "rejected");
    assert_eq!(attempts[1].str("redraft.attempt.status"), "accepted");

    for call in &calls {
        let attempt = parent_of(call, &attempts);
        let recorded = &history[usize::try_from(attempt.int("redraft.iteration")).unwrap() - 1];
        assert_eq!(call.int("redraft.iteration"), attempt.int("redraft.iteration"));
        assert_eq!(call.str("gen_ai.operation.name"), "chat");
        assert_eq!(call.str("gen_ai.provider.name"), "openai");
        assert_eq!(call.str("gen_ai.system"), "openai");
        assert_eq!(call.str("gen_ai.request.model"), "fake");
        assert!((call.double("gen_ai.request.temperature") - 0.25).abs() < 1e-6, "{:?}", call.attrs);
        assert_eq!(call.int("gen_ai.request.max_tokens"), 300);
        assert_eq!(call.int("gen_ai.usage.input_tokens"), recorded["tokens_in"].as_i64().unwrap());
        assert_eq!(call.int("gen_ai.usage.output_tokens"), recorded["tokens_out"].as_i64().unwrap());
        assert!(!call.attrs.contains_key("error.type"), "{:?}", call.attrs);
    }

    for evaluator in &evaluators {
        let attempt = parent_of(evaluator, &attempts);
        assert_eq!(evaluator.str("redraft.evaluator"), "schema");
        assert_eq!(evaluator.int("redraft.iteration"), attempt.int("redraft.iteration"));
        assert_eq!(evaluator.double("redraft.score"), attempt.double("redraft.score"));
        let passed = attempt.str("redraft.attempt.status") == "accepted";
        assert_eq!(evaluator.attrs.get("redraft.passed"), Some(&Attr::Bool(passed)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_can_name_the_collector_and_otel_service_name_the_service() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "schema.json", SCHEMA);
    let model = FakeOpenAi::start(vec![reply(r#"{"city": "Toledo"}"#)]).await;
    let collector = collector().await;
    write(dir.path(), "redraft.toml", &format!("[telemetry]\notlp_endpoint = \"{}/\"\n", collector.uri()));
    let mut cmd = redraft(dir.path());
    cmd.env("OPENAI_BASE_URL", model.base_url())
        .env("OPENAI_API_KEY", "sk-test")
        .env("OTEL_SERVICE_NAME", "checker")
        .args(["run", "--model", "openai/fake", "--schema", "schema.json", "--prompt", "Which city?"]);
    let out = output(cmd).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let spans = spans(&collector).await;
    let runs = named(&spans, "run");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    assert_eq!(runs[0].resource.get("service.name"), Some(&Attr::Str("checker".into())));
    assert_eq!(named(&spans, "provider call").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_otlp_endpoint_that_is_not_a_url_is_refused_before_any_model_call() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "schema.json", SCHEMA);
    let model = FakeOpenAi::start(vec![reply(r#"{"city": "Toledo"}"#)]).await;
    write(dir.path(), "redraft.toml", "[telemetry]\notlp_endpoint = \"localhost:4318\"\n");
    let mut cmd = redraft(dir.path());
    cmd.env("OPENAI_BASE_URL", model.base_url()).env("OPENAI_API_KEY", "sk-test").args([
        "run",
        "--model",
        "openai/fake",
        "--schema",
        "schema.json",
        "--prompt",
        "Which city?",
    ]);
    let out = output(cmd).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("`telemetry.otlp_endpoint`") && out.stderr.contains("hint:"), "{}", out.stderr);
    assert_eq!(model.calls().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exported_spans_and_logs_carry_no_secret() {
    const KEY: &str = "sk-otel-test-1b2c3d4e5f6a";
    const HEADER: &str = "otel-header-secret-7788";
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "schema.json", SCHEMA);
    let model = redraft_testkit::EchoingOpenAi::start().await;
    let collector = collector().await;
    for prompt in ["Which city? status 400", "Which city?"] {
        let mut cmd = redraft(dir.path());
        cmd.env("OPENAI_BASE_URL", model.base_url())
            .env("OPENAI_API_KEY", KEY)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.uri())
            .env("OTEL_EXPORTER_OTLP_HEADERS", format!("x-collector-token={HEADER}"))
            .env("RUST_LOG", "trace")
            .args(["run", "--model", "openai/echo", "--schema", "schema.json", "--prompt", prompt, "--json"])
            .args(["--max-iterations", "1"]);
        let out = output(cmd).await;
        assert!(out.stdout.contains("[redacted]"), "{prompt}: {}", out.stdout);
        for (what, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            for secret in [KEY, HEADER] {
                assert!(!text.contains(secret), "{prompt}: {what} holds `{secret}`: {text:.3000}");
            }
        }
    }
    // (What the exporter does to a span that holds a secret is checked in `telemetry.rs`.)
    let requests = collector.received_requests().await.unwrap();
    assert!(!requests.is_empty(), "spans were sent");
    for request in requests {
        // The collector is sent its header: the only place it goes.
        assert_eq!(request.headers.get("x-collector-token").and_then(|v| v.to_str().ok()), Some(HEADER));
        let body = String::from_utf8_lossy(&request.body);
        assert!(!body.contains(KEY) && !body.contains(HEADER), "a span holds a secret: {body}");
    }
}
