//! A fast scripted OpenAI-compatible server for the loop benchmarks (its own process).
//!
//! ```text
//! fake-openai [--port P] [--delay-ms D] [--backlog B] [--valid-first]
//! ```
//!
//! Prints `LISTENING http://127.0.0.1:PORT/v1` once bound. `POST …/chat/completions` answers
//! by where the conversation is, counted as the assistant messages already in it (redraft's
//! conversations have 1, 3 and 5 messages then; clients that add a system message or tool
//! results still have 0, 1 and 2 assistant messages):
//!
//! * 0 → prose with no JSON in it (invalid);
//! * 1 → JSON of the wrong shape (a string total, a free-text date, no currency);
//! * 2 or more → the valid invoice.
//!
//! With `--valid-first` every request gets the valid invoice, whatever the conversation, so a
//! run takes exactly one attempt (the server benchmark).
//!
//! When the request offers `tools` (Instructor's and PydanticAI's tool modes), the JSON
//! answers come as a call of the first tool, the prose as plain content. Every answer waits
//! `--delay-ms` first. `GET /stats` returns the counters, `POST /reset` zeroes them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use serde_json::{Value, json};

const INVALID: &str = "Sure! This is invoice INV-2024-0117 for Northwind Traders, issued on 1 March 2024, \
with a total of USD 501.50 for welding rods and a safety visor.";
const WRONG: &str = r#"{"invoice_id": "INV-2024-0117", "issued": "1 March 2024", "customer": "Northwind Traders", "total": "$501.50", "lines": [{"description": "Welding rods (box)", "quantity": 3, "amount": 412.5}, {"description": "Safety visor", "quantity": 1, "amount": 89.0}]}"#;
const VALID: &str = r#"{"invoice_id": "INV-2024-0117", "issued": "2024-03-01", "customer": "Northwind Traders", "currency": "USD", "total": 501.5, "lines": [{"description": "Welding rods (box)", "quantity": 3, "amount": 412.5}, {"description": "Safety visor", "quantity": 1, "amount": 89.0}]}"#;

const HIST: usize = 12;

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    with_tools: AtomicU64,
    bad_requests: AtomicU64,
    /// Requests by step: 0, 1, 2+ assistant messages.
    steps: [AtomicU64; 3],
    /// Requests by number of messages (the last bucket is "HIST-1 or more").
    messages: [AtomicU64; HIST],
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
}

struct App {
    delay: Duration,
    /// Answer the valid invoice at every step.
    valid_first: bool,
    c: Counters,
}

fn completion(content: Option<&str>, tool: Option<(&str, &str)>) -> Value {
    let (message, finish) = match tool {
        Some((name, args)) => (
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_bench_1", "type": "function", "function": {"name": name, "arguments": args}}
            ]}),
            "tool_calls",
        ),
        None => (json!({"role": "assistant", "content": content}), "stop"),
    };
    json!({
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    })
}

async fn chat(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let c = &app.c;
    let now = c.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
    c.max_in_flight.fetch_max(now, Ordering::Relaxed);
    c.requests.fetch_add(1, Ordering::Relaxed);
    let response = match serde_json::from_slice::<Value>(&body) {
        Ok(req) => {
            let messages = req["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
            let step = messages.iter().filter(|m| m["role"] == "assistant").count();
            c.steps[step.min(2)].fetch_add(1, Ordering::Relaxed);
            c.messages[messages.len().min(HIST - 1)].fetch_add(1, Ordering::Relaxed);
            let tool = req["tools"].as_array().and_then(|t| t.first()).and_then(|t| t["function"]["name"].as_str());
            if tool.is_some() {
                c.with_tools.fetch_add(1, Ordering::Relaxed);
            }
            let answer_step = if app.valid_first { 2 } else { step };
            let reply = match (answer_step, tool) {
                (0, _) => completion(Some(INVALID), None),
                (1, Some(name)) => completion(None, Some((name, WRONG))),
                (1, None) => completion(Some(WRONG), None),
                (_, Some(name)) => completion(None, Some((name, VALID))),
                (_, None) => completion(Some(VALID), None),
            };
            if !app.delay.is_zero() {
                tokio::time::sleep(app.delay).await;
            }
            ([(header::CONTENT_TYPE, "application/json")], reply.to_string()).into_response()
        }
        Err(e) => {
            c.bad_requests.fetch_add(1, Ordering::Relaxed);
            (StatusCode::BAD_REQUEST, format!("{{\"error\":{{\"message\":\"bad json: {e}\"}}}}")).into_response()
        }
    };
    c.in_flight.fetch_sub(1, Ordering::Relaxed);
    response
}

async fn stats(State(app): State<Arc<App>>) -> Response {
    let c = &app.c;
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let body = json!({
        "requests": load(&c.requests),
        "with_tools": load(&c.with_tools),
        "bad_requests": load(&c.bad_requests),
        "steps": c.steps.iter().map(load).collect::<Vec<_>>(),
        "messages": c.messages.iter().map(load).collect::<Vec<_>>(),
        "in_flight": load(&c.in_flight),
        "max_in_flight": load(&c.max_in_flight),
    });
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

async fn reset(State(app): State<Arc<App>>) -> StatusCode {
    let c = &app.c;
    for a in
        [&c.requests, &c.with_tools, &c.bad_requests, &c.max_in_flight].into_iter().chain(&c.steps).chain(&c.messages)
    {
        a.store(0, Ordering::Relaxed);
    }
    StatusCode::NO_CONTENT
}

fn arg(args: &[String], name: &str, default: u64) -> Result<u64, String> {
    match args.iter().position(|a| a == name) {
        Some(i) => args.get(i + 1).and_then(|v| v.parse().ok()).ok_or_else(|| format!("{name} needs a number")),
        None => Ok(default),
    }
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let port = arg(&args, "--port", 0)?;
    let delay = Duration::from_millis(arg(&args, "--delay-ms", 0)?);
    let backlog = arg(&args, "--backlog", 65_535)?;
    let valid_first = args.iter().any(|a| a == "--valid-first");
    let app = Arc::new(App { delay, valid_first, c: Counters::default() });
    let router = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/chat/completions", post(chat))
        .route("/stats", get(stats))
        .route("/reset", post(reset))
        .with_state(app);
    let socket = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
    socket.set_reuseaddr(true).map_err(|e| e.to_string())?;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], u16::try_from(port).map_err(|e| e.to_string())?));
    socket.bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
    // the kernel caps the backlog at net.core.somaxconn
    let listener = socket.listen(u32::try_from(backlog).unwrap_or(u32::MAX)).map_err(|e| e.to_string())?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    println!("LISTENING http://{bound}/v1");
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router).await.map_err(|e| e.to_string())
}
