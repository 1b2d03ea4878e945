//! `/metrics`: HTTP requests by route and status with their latency, runs by status and halt
//! reason, attempts, tokens and cost by model, an attempt-duration histogram, transport retries,
//! and the run queue's gauges and counters, in the Prometheus text format (written by hand: a
//! few counters need no metrics crate). Counted for this process.
//!
//! Every label has a bounded set of values: a route is the matched route template (never the
//! raw path), a method one of the standard ones, and models past the first [`MAX_MODELS`] are
//! counted as `other`.
//!
//! The counting is here; `render` writes the text format, `observer` counts runs through a
//! `RunObserver`, and `histogram` holds the duration buckets.

mod histogram;
mod observer;
mod render;
#[cfg(test)]
mod tests;

pub use observer::MetricsObserver;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use crate::state::AppState;
use histogram::Histogram;

/// Upper bounds of the attempt-duration buckets, in seconds.
const ATTEMPT_BUCKETS: &[f64] = &[0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0];

/// Upper bounds of the HTTP request-duration buckets, in seconds (`/v1/iterate` waits for a
/// whole run).
const HTTP_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

/// Distinct `model` label values kept; later models are counted as `other` (a request may name
/// any model of a configured provider, and every label value is a series kept forever).
pub const MAX_MODELS: usize = 64;

/// The `route` label of a request no route matched.
const UNMATCHED: &str = "unmatched";

/// Why a run was refused instead of being queued or started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShedReason {
    /// The queue holds as many runs as it may.
    QueueFull,
    /// The server is too busy to take the run.
    Overloaded,
    /// The server is stopping.
    ShuttingDown,
}

impl ShedReason {
    const ALL: [ShedReason; 3] = [ShedReason::QueueFull, ShedReason::Overloaded, ShedReason::ShuttingDown];

    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            ShedReason::QueueFull => "queue_full",
            ShedReason::Overloaded => "overloaded",
            ShedReason::ShuttingDown => "shutting_down",
        }
    }
}

#[derive(Debug)]
struct Counts {
    /// (status, halted_because) → runs.
    runs: BTreeMap<(&'static str, &'static str), u64>,
    /// (model, status) → attempts.
    attempts: BTreeMap<(String, &'static str), u64>,
    /// model → (tokens in, tokens out).
    tokens: BTreeMap<String, (u64, u64)>,
    /// model → cost in USD (known prices only).
    cost_usd: BTreeMap<String, f64>,
    attempt_duration: Histogram,
    /// model → transport retries.
    transport_retries: BTreeMap<String, u64>,
    /// The model label values given out so far.
    models: BTreeSet<String>,
    /// (route, method, status) → requests.
    http_requests: BTreeMap<(String, &'static str, u16), u64>,
    /// (route, method) → request durations.
    http_duration: BTreeMap<(String, &'static str), Histogram>,
    queue_depth: u64,
    runs_waiting: u64,
    shed: [u64; ShedReason::ALL.len()],
    lease_takeovers: u64,
}

impl Default for Counts {
    fn default() -> Self {
        Self {
            runs: BTreeMap::new(),
            attempts: BTreeMap::new(),
            tokens: BTreeMap::new(),
            cost_usd: BTreeMap::new(),
            attempt_duration: Histogram::new(ATTEMPT_BUCKETS),
            transport_retries: BTreeMap::new(),
            models: BTreeSet::new(),
            http_requests: BTreeMap::new(),
            http_duration: BTreeMap::new(),
            queue_depth: 0,
            runs_waiting: 0,
            shed: [0; ShedReason::ALL.len()],
            lease_takeovers: 0,
        }
    }
}

impl Counts {
    /// The `model` label for `model`: itself while fewer than [`MAX_MODELS`] were seen,
    /// `unknown` when the attempt names none, else `other`.
    fn model_label(&mut self, model: Option<&str>) -> String {
        let Some(model) = model else { return "unknown".into() };
        if self.models.contains(model) {
            return model.to_owned();
        }
        if self.models.len() < MAX_MODELS {
            self.models.insert(model.to_owned());
            return model.to_owned();
        }
        "other".into()
    }
}

/// The server's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    counts: Mutex<Counts>,
}

impl Metrics {
    fn with<R>(&self, f: impl FnOnce(&mut Counts) -> R) -> R {
        let mut guard = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    /// Count one HTTP request: its matched route template (`None`: no route matched), method,
    /// status and how long it took until the response began.
    pub fn http_request(&self, route: Option<&str>, method: &Method, status: u16, took: Duration) {
        let route = route.unwrap_or(UNMATCHED).to_owned();
        let method = method_label(method);
        self.with(|c| {
            *c.http_requests.entry((route.clone(), method, status)).or_default() += 1;
            c.http_duration
                .entry((route, method))
                .or_insert_with(|| Histogram::new(HTTP_BUCKETS))
                .observe(took.as_secs_f64());
        });
    }

    /// Runs waiting in the queue now (`redraft_queue_depth`).
    pub fn set_queue_depth(&self, n: u64) {
        self.with(|c| c.queue_depth = n);
    }

    /// Runs that requests to this process are waiting on now (`redraft_runs_waiting`).
    pub fn set_runs_waiting(&self, n: u64) {
        self.with(|c| c.runs_waiting = n);
    }

    /// A run was refused (`redraft_runs_shed_total{reason}`).
    pub fn run_shed(&self, reason: ShedReason) {
        self.with(|c| {
            if let Some(i) = ShedReason::ALL.iter().position(|r| *r == reason)
                && let Some(n) = c.shed.get_mut(i)
            {
                *n += 1;
            }
        });
    }

    /// This process took over a run whose lease had expired (`redraft_lease_takeovers_total`).
    pub fn lease_takeover(&self) {
        self.with(|c| c.lease_takeovers += 1);
    }

    /// A call to proposer `model` (`provider/model`) is being retried
    /// (`redraft_transport_retries_total{model}`).
    pub fn transport_retry(&self, model: &str) {
        self.with(|c| {
            let model = c.model_label(Some(model));
            *c.transport_retries.entry(model).or_default() += 1;
        });
    }
}

/// The `method` label: a standard method, else `other` (any token is a valid method).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// The layer that counts every request: by the route template it matched (`unmatched` when
/// none did, the fallback's 404), its method and its status.
pub async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned());
    let method = request.method().clone();
    let start = Instant::now();
    let response = next.run(request).await;
    state.metrics().http_request(route.as_deref(), &method, response.status().as_u16(), start.elapsed());
    response
}
