//! The HTTP face through `router(state).oneshot(request)`, against a fake OpenAI-compatible
//! server on 127.0.0.1 named in a config built in code (so tests run in parallel); and the
//! proxy through the official Python `openai` client against the real server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_debug_implementations)] // test code

mod answer;
mod api;
mod browser;
mod calls;
mod cdp;
mod checks;
mod compat;
mod gate;
mod hostile_exec;
mod limits;
mod metrics;
mod openapi;
mod proxy;
mod proxy_options;
mod python;
mod responses;
mod runs;
mod secrets;
mod streaming;

use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request};
use redraft::config::Config;
use redraft_server::{AppState, router};
use redraft_testkit::processes::eventually_async;
use redraft_testkit::{FakeOpenAi, Reply as Scripted};
use serde_json::Value;
use tower::ServiceExt;

/// A result's volatile fields, redacted.
#[macro_export]
macro_rules! assert_result_snapshot {
    ($value:expr, @$snap:literal) => {
        insta::assert_json_snapshot!($value, {
            ".run_id" => "[run_id]",
            ".best_ref" => "[best_ref]",
            ".metrics.wall_ms" => "[ms]",
            ".history[].wall_ms" => "[ms]",
            ".history[].prompt" => "[prompt]",
            ".history[].started_at" => insta::dynamic_redaction(|v, _| { assert!(redraft_testkit::is_utc_time(v.as_str().unwrap_or_default()), "{v:?}"); "[time]" }),
            ".history[].finished_at" => insta::dynamic_redaction(|v, _| { assert!(redraft_testkit::is_utc_time(v.as_str().unwrap_or_default()), "{v:?}"); "[time]" }),
            ".error.run_id" => "[run_id]",
            ".redraft.run_id" => "[run_id]",
            ".id" => "[id]",
            ".created" => "[time]",
        }, @$snap)
    };
}

/// How long a test waits for what it started to happen (a bound, not a guess: the wait ends as
/// soon as it has).
pub const WAIT: Duration = Duration::from_secs(10);

pub const CITY_SCHEMA: &str = r#"{"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}, "additionalProperties": false}"#;

/// A server over a fake model, a store and a kinds directory in a temp dir.
pub struct Harness {
    pub dir: tempfile::TempDir,
    pub model: FakeOpenAi,
    pub state: AppState,
    pub app: Router,
}

/// An answer, read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub text: String,
    pub json: Value,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The test config: `fake/m` is the default model, served by `base_url`.
pub fn config(base_url: &str, dir: &Path) -> Config {
    let text = format!(
        "default_model = \"fake/m\"\ndatabase_url = '{}'\nkinds_dir = '{}'\n\n[policy]\nattempt_timeout = \"30s\"\n\n[providers.fake]\ntype = \"openai\"\nbase_url = \"{base_url}\"\n",
        dir.join("redraft.db").display(),
        dir.join("kinds").display(),
    );
    Config::parse(&text, Path::new("test.toml")).unwrap()
}

/// A kind `city`: an object with a `city` that must match `context.city`.
pub fn write_kind(dir: &Path) {
    let kind = dir.join("kinds").join("city");
    std::fs::create_dir_all(&kind).unwrap();
    std::fs::write(
        kind.join("kind.toml"),
        r#"description = "The city a contract is in."

[[rules]]
code = "city_matches"
check = "self.city == context.city"
path = "/city"
message = "city '{{ self.city }}' doesn't match contract city '{{ context.city }}'"
"#,
    )
    .unwrap();
    std::fs::write(kind.join("schema.json"), CITY_SCHEMA).unwrap();
    std::fs::write(kind.join("example.json"), r#"{"city": "Springfield"}"#).unwrap();
}

pub async fn harness(replies: Vec<Scripted>) -> Harness {
    harness_with(replies, Vec::new(), |_| {}).await
}

pub async fn harness_with(replies: Vec<Scripted>, tokens: Vec<String>, tweak: impl FnOnce(&mut Config)) -> Harness {
    let model = FakeOpenAi::start(replies).await;
    let dir = tempfile::tempdir().unwrap();
    write_kind(dir.path());
    let mut config = config(&model.base_url(), dir.path());
    tweak(&mut config);
    let store = redraft::store::open(&config).await.unwrap();
    let state = AppState::new(config, store, tokens).unwrap();
    let app = router(state.clone());
    Harness { dir, model, state, app }
}

/// A request with a JSON body (when given).
pub fn request(method: &str, uri: &str, body: Option<&Value>) -> Request<Body> {
    let builder = Request::builder().method(method).uri(uri);
    match body {
        Some(b) => builder.header("content-type", "application/json").body(Body::from(b.to_string())).unwrap(),
        None => builder.body(Body::empty()).unwrap(),
    }
}

impl Harness {
    pub async fn call(&self, method: &str, uri: &str, body: Option<Value>) -> Answer {
        self.send(request(method, uri, body.as_ref())).await
    }

    pub async fn send(&self, req: Request<Body>) -> Answer {
        let res = self.app.clone().oneshot(req).await.unwrap();
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer { status, headers, text, json }
    }

    /// Wait until the stored run halted; its result.
    pub async fn finished(&self, run_id: &str) -> Value {
        let uri = format!("/v1/runs/{run_id}");
        let halted =
            eventually_async(WAIT, || async { self.call("GET", &uri, None).await.json.get("status").is_some() });
        assert!(halted.await, "run {run_id} did not finish");
        self.call("GET", &uri, None).await.json
    }
}

/// SSE frames as `(event, data)`.
pub fn sse_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|f| !f.trim().is_empty())
        .filter_map(|frame| {
            let mut event = String::from("message");
            let mut data = String::new();
            for line in frame.lines() {
                if let Some(e) = line.strip_prefix("event:") {
                    event = e.trim().to_owned();
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                }
            }
            (!data.is_empty()).then(|| (event, serde_json::from_str(&data).unwrap_or(Value::String(data))))
        })
        .collect()
}
