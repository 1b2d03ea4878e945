//! The load client of the server benchmark: N concurrent `POST`s of one JSON body (a run spec
//! for `POST /v1/iterate`), released together, each with its latency and outcome recorded.
//!
//! ```text
//! http-load --url URL --body FILE [--requests N] [--timeout-s 300] [--expect-attempts K]
//! ```
//!
//! Every request is a tokio task on one multi-threaded runtime with one reqwest client (its
//! pool has no per-host cap, so each request in flight has its own connection). The tasks are
//! all spawned first and wait on one signal; the clock starts when it is given. A request
//! counts as succeeded when the answer is 200 and its JSON says `"status": "succeeded"` (and,
//! with `--expect-attempts`, has that many attempts in its history); anything else — another
//! status, a body that is not such a result, a connection the OS timed out or reset, the
//! per-request timeout — is counted as lost, by kind. Prints one JSON line: wall time (release to the last answer),
//! latency percentiles (each request from its own send to its answer's end), outcome counts,
//! attempts, the first few error messages, and this process's CPU and peak RSS.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde_json::{Value, json};

/// Error messages kept for the report.
const SAMPLES: usize = 5;

/// (user+sys CPU seconds, peak RSS in KiB) of this process so far.
#[allow(unsafe_code)]
fn usage() -> (f64, i64) {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime) + secs(ru.ru_stime), ru.ru_maxrss)
}

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str)
}

fn num(args: &[String], name: &str, default: u64) -> Result<u64, String> {
    arg(args, name).map_or(Ok(default), |v| v.parse().map_err(|e| format!("{name}: {e}")))
}

/// What one request came to.
struct Outcome {
    /// From the request's send to the end of its answer.
    latency: Duration,
    /// `succeeded`, or the kind of loss (`http 503`, `200 not succeeded`, `timeout`, …).
    kind: String,
    attempts: u64,
    /// For losses: a message to show.
    error: Option<String>,
}

/// The kind of a transport failure. The OS's own errors are named with where they happened:
/// a connection the server's kernel never handed to the server (its accept queue full) ends in
/// a handshake that times out, or in a connection that times out or is reset once the request
/// is sent; `--timeout-s` is this client's own limit.
fn transport_kind(e: &reqwest::Error) -> String {
    let mut os = None;
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            os = io.raw_os_error().map(|code| (code, io.kind()));
        }
        source = s.source();
    }
    let during = if e.is_connect() { "handshake" } else { "request" };
    match os {
        Some((code, kind)) => format!("{during}: {kind} (os error {code})"),
        None if e.is_timeout() => "timeout (--timeout-s)".to_owned(),
        None if e.is_connect() => "connect error".to_owned(),
        None if e.is_body() || e.is_decode() => "body error".to_owned(),
        None => "transport error".to_owned(),
    }
}

/// The root cause of a reqwest error, which names what the OS said.
fn root(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg = format!("{msg}: {s}");
        source = s.source();
    }
    msg
}

async fn one(client: &reqwest::Client, url: &str, body: &'static [u8], expect_attempts: Option<u64>) -> Outcome {
    let t = Instant::now();
    let sent = client.post(url).header(CONTENT_TYPE, HeaderValue::from_static("application/json")).body(body).send();
    let (kind, attempts, error) = match sent.await {
        Err(e) => (transport_kind(&e), 0, Some(root(&e))),
        Ok(resp) => {
            let status = resp.status();
            match resp.bytes().await {
                Err(e) => (transport_kind(&e), 0, Some(root(&e))),
                Ok(bytes) => {
                    let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
                    let attempts = parsed.as_ref().and_then(|v| v["history"].as_array()).map_or(0, |h| h.len() as u64);
                    let succeeded = parsed.as_ref().is_some_and(|v| v["status"] == "succeeded");
                    if status.as_u16() != 200 {
                        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
                        (format!("http {}", status.as_u16()), attempts, Some(text))
                    } else if !succeeded {
                        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
                        ("200 not succeeded".to_owned(), attempts, Some(text))
                    } else if expect_attempts.is_some_and(|k| k != attempts) {
                        (format!("200 with {attempts} attempts"), attempts, None)
                    } else {
                        ("succeeded".to_owned(), attempts, None)
                    }
                }
            }
        }
    };
    Outcome { latency: t.elapsed(), kind, attempts, error }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    // nearest rank
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn main_inner() -> Result<Value, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = arg(&args, "--url").ok_or("--url is required")?.to_owned();
    let body_path = arg(&args, "--body").ok_or("--body is required")?;
    let requests = num(&args, "--requests", 100)?;
    let timeout = Duration::from_secs(num(&args, "--timeout-s", 300)?);
    let expect_attempts =
        arg(&args, "--expect-attempts").map(str::parse::<u64>).transpose().map_err(|e| e.to_string())?;
    // Leaked: one copy for the whole process, borrowed by every request.
    let body: &'static [u8] = Vec::leak(std::fs::read(body_path).map_err(|e| format!("{body_path}: {e}"))?);
    serde_json::from_slice::<Value>(body).map_err(|e| format!("{body_path} is not JSON: {e}"))?;

    let client = reqwest::Client::builder().timeout(timeout).build().map_err(|e| e.to_string())?;
    let shared = Arc::new((client, url));
    let (go, ready) = tokio::sync::watch::channel(false);
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..requests {
        let (shared, mut ready) = (Arc::clone(&shared), ready.clone());
        set.spawn(async move {
            // The sender lives until every task is joined, so this only fails if main is gone.
            let _ = ready.wait_for(|go| *go).await;
            one(&shared.0, &shared.1, body, expect_attempts).await
        });
    }
    // Let the tasks park on the signal before the clock starts.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (cpu0, _) = usage();
    let t0 = Instant::now();
    go.send(true).map_err(|e| e.to_string())?;

    let mut latencies = Vec::with_capacity(usize::try_from(requests).unwrap_or(0));
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    // per kind: (first, last) latency
    let mut spans: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let mut errors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut ok, mut attempts) = (0u64, 0u64);
    while let Some(joined) = set.join_next().await {
        let outcome = joined.map_err(|e| format!("a request task failed: {e}"))?;
        let secs = outcome.latency.as_secs_f64();
        latencies.push(secs);
        let span = spans.entry(outcome.kind.clone()).or_insert((secs, secs));
        *span = (span.0.min(secs), span.1.max(secs));
        attempts += outcome.attempts;
        if outcome.kind == "succeeded" {
            ok += 1;
        }
        if let Some(e) = outcome.error {
            let kept = errors.entry(outcome.kind.clone()).or_default();
            if kept.len() < SAMPLES {
                kept.push(e);
            }
        }
        *kinds.entry(outcome.kind).or_default() += 1;
    }
    let wall = t0.elapsed().as_secs_f64();
    drop(go);
    let (cpu1, max_rss_kib) = usage();
    latencies.sort_by(f64::total_cmp);
    let mean = if latencies.is_empty() { f64::NAN } else { latencies.iter().sum::<f64>() / latencies.len() as f64 };
    Ok(json!({
        "client": "http-load",
        "requests": requests, "succeeded": ok, "lost": requests - ok, "attempts": attempts,
        "outcomes": kinds, "error_samples": errors,
        "latency_s_by_outcome": spans.into_iter().map(|(k, (lo, hi))| (k, json!({"min": lo, "max": hi}))).collect::<serde_json::Map<_, _>>(),
        "wall_s": wall,
        "latency_s": {
            "min": latencies.first().copied().unwrap_or(f64::NAN),
            "p50": percentile(&latencies, 50.0), "p90": percentile(&latencies, 90.0),
            "p99": percentile(&latencies, 99.0), "max": latencies.last().copied().unwrap_or(f64::NAN),
            "mean": mean,
        },
        "timeout_s": timeout.as_secs(),
        "load_cpu_s": cpu1 - cpu0, "process_cpu_s": cpu1, "max_rss_kib": max_rss_kib,
    }))
}

#[tokio::main]
async fn main() -> ExitCode {
    match main_inner().await {
        Ok(v) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("http-load: {e}");
            ExitCode::from(2)
        }
    }
}
