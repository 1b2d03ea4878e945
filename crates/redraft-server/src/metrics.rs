//! `/metrics`: HTTP requests by route and status with their latency, runs by status and halt
//! reason, attempts, tokens and cost by model, an attempt-duration histogram, transport retries,
//! and the run queue's gauges and counters, in the Prometheus text format (written by hand: a
//! few counters need no metrics crate). Counted for this process.
//!
//! Every label has a bounded set of values: a route is the matched route template (never the
//! raw path), a method one of the standard ones, and models past the first [`MAX_MODELS`] are
//! counted as `other`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use redraft::core::{AttemptRecord, ProviderError, RunObserver, RunResult};

use crate::state::AppState;

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

/// Cumulative bucket counts, a sum and a count.
#[derive(Debug, Clone)]
struct Histogram {
    bounds: &'static [f64],
    /// Observations at or under each bound.
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self { bounds, buckets: vec![0; bounds.len()], sum: 0.0, count: 0 }
    }

    fn observe(&mut self, secs: f64) {
        for (bound, count) in self.bounds.iter().zip(self.buckets.iter_mut()) {
            if secs <= *bound {
                *count += 1;
            }
        }
        self.sum += secs;
        self.count += 1;
    }

    /// The samples of metric `name` with `labels` (already rendered, possibly empty).
    fn samples(&self, name: &str, labels: &str) -> Vec<String> {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut out: Vec<String> = self
            .bounds
            .iter()
            .zip(&self.buckets)
            .map(|(le, n)| format!("{name}_bucket{{{labels}{sep}le=\"{le}\"}} {n}"))
            .collect();
        out.push(format!("{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", self.count));
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        out.push(format!("{name}_sum{braces} {}", self.sum));
        out.push(format!("{name}_count{braces} {}", self.count));
        out
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

    fn attempt(&self, a: &AttemptRecord) {
        self.with(|c| {
            let model = c.model_label(a.model.as_deref());
            *c.attempts.entry((model.clone(), a.status.as_str())).or_default() += 1;
            let tokens = c.tokens.entry(model.clone()).or_default();
            tokens.0 += a.tokens_in;
            tokens.1 += a.tokens_out;
            *c.cost_usd.entry(model).or_default() += a.cost_usd.unwrap_or(0.0);
            c.attempt_duration.observe(a.wall_ms as f64 / 1000.0);
        });
    }

    fn run(&self, r: &RunResult) {
        let status = if r.succeeded() { "succeeded" } else { "failed" };
        self.with(|c| *c.runs.entry((status, r.halted_because.as_str())).or_default() += 1);
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

    /// The Prometheus text exposition; `in_flight` is the number of runs in flight now.
    pub fn render(&self, in_flight: usize) -> String {
        self.with(|c| {
            let mut out = String::new();
            let requests = c.http_requests.iter().map(|((route, method, status), n)| {
                format!(
                    "redraft_http_requests_total{{route=\"{}\",method=\"{method}\",status=\"{status}\"}} {n}",
                    escape(route)
                )
            });
            family(
                &mut out,
                "redraft_http_requests_total",
                "counter",
                "HTTP requests by route template, method and status.",
                requests,
            );
            let durations = c.http_duration.iter().flat_map(|((route, method), h)| {
                h.samples(
                    "redraft_http_request_duration_seconds",
                    &format!("route=\"{}\",method=\"{method}\"", escape(route)),
                )
            });
            family(
                &mut out,
                "redraft_http_request_duration_seconds",
                "histogram",
                "HTTP request duration until the response began, by route template and method.",
                durations,
            );
            family(
                &mut out,
                "redraft_runs_in_flight",
                "gauge",
                "Runs in flight in this process.",
                [format!("redraft_runs_in_flight {in_flight}")],
            );
            family(
                &mut out,
                "redraft_queue_depth",
                "gauge",
                "Runs waiting in the queue to be started.",
                [format!("redraft_queue_depth {}", c.queue_depth)],
            );
            family(
                &mut out,
                "redraft_runs_waiting",
                "gauge",
                "Runs that requests to this process are waiting on.",
                [format!("redraft_runs_waiting {}", c.runs_waiting)],
            );
            let shed = ShedReason::ALL
                .iter()
                .zip(&c.shed)
                .map(|(r, n)| format!("redraft_runs_shed_total{{reason=\"{}\"}} {n}", r.as_str()));
            family(
                &mut out,
                "redraft_runs_shed_total",
                "counter",
                "Runs refused instead of queued or started, by reason (queue_full, overloaded, shutting_down).",
                shed,
            );
            family(
                &mut out,
                "redraft_lease_takeovers_total",
                "counter",
                "Runs this process took over after their lease expired.",
                [format!("redraft_lease_takeovers_total {}", c.lease_takeovers)],
            );
            let runs = c.runs.iter().map(|((status, halted), n)| {
                format!("redraft_runs_total{{status=\"{status}\",halted_because=\"{halted}\"}} {n}")
            });
            family(&mut out, "redraft_runs_total", "counter", "Finished runs by status and halt reason.", runs);
            let attempts = c.attempts.iter().map(|((model, status), n)| {
                format!("redraft_attempts_total{{model=\"{}\",status=\"{status}\"}} {n}", escape(model))
            });
            family(&mut out, "redraft_attempts_total", "counter", "Attempts by proposer model and status.", attempts);
            let tokens = c.tokens.iter().flat_map(|(model, (tokens_in, tokens_out))| {
                let model = escape(model);
                [
                    format!("redraft_tokens_total{{model=\"{model}\",direction=\"in\"}} {tokens_in}"),
                    format!("redraft_tokens_total{{model=\"{model}\",direction=\"out\"}} {tokens_out}"),
                ]
            });
            family(
                &mut out,
                "redraft_tokens_total",
                "counter",
                "Tokens sent to and received from proposers, by model.",
                tokens,
            );
            let cost = c
                .cost_usd
                .iter()
                .map(|(model, usd)| format!("redraft_cost_usd_total{{model=\"{}\"}} {usd}", escape(model)));
            family(
                &mut out,
                "redraft_cost_usd_total",
                "counter",
                "Proposer cost in USD by model (known prices only).",
                cost,
            );
            let retries = c
                .transport_retries
                .iter()
                .map(|(model, n)| format!("redraft_transport_retries_total{{model=\"{}\"}} {n}", escape(model)));
            family(
                &mut out,
                "redraft_transport_retries_total",
                "counter",
                "Calls to a proposer retried after a transport failure (not attempts), by model.",
                retries,
            );
            family(
                &mut out,
                "redraft_attempt_duration_seconds",
                "histogram",
                "Attempt duration.",
                c.attempt_duration.samples("redraft_attempt_duration_seconds", ""),
            );
            out
        })
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

/// A label value escaped for the text format: backslash, double quote and newline.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// One metric family: its help and type lines, then its samples.
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: impl IntoIterator<Item = String>) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for sample in samples {
        let _ = writeln!(out, "{sample}");
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

/// Counts every run it is told about.
#[derive(Debug, Clone)]
pub struct MetricsObserver(pub Arc<Metrics>);

#[async_trait::async_trait]
impl RunObserver for MetricsObserver {
    async fn attempt_finished(&self, _run_id: &str, attempt: &AttemptRecord) {
        self.0.attempt(attempt);
    }

    async fn transport_retry(&self, _run_id: &str, model: &str, _error: &ProviderError) {
        self.0.transport_retry(model);
    }

    async fn run_finished(&self, result: &RunResult) {
        self.0.run(result);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn lines(m: &Metrics) -> Vec<String> {
        m.render(0).lines().map(str::to_owned).collect()
    }

    fn has(m: &Metrics, line: &str) -> bool {
        lines(m).iter().any(|l| l == line)
    }

    #[test]
    fn the_queue_gauges_and_counters_show_what_they_were_set_to() {
        let m = Metrics::default();
        for line in [
            "redraft_queue_depth 0",
            "redraft_runs_waiting 0",
            "redraft_lease_takeovers_total 0",
            "redraft_runs_shed_total{reason=\"queue_full\"} 0",
            "redraft_runs_shed_total{reason=\"overloaded\"} 0",
            "redraft_runs_shed_total{reason=\"shutting_down\"} 0",
        ] {
            assert!(has(&m, line), "missing `{line}` before anything happened");
        }
        m.set_queue_depth(7);
        m.set_queue_depth(5);
        m.set_runs_waiting(2);
        m.run_shed(ShedReason::QueueFull);
        m.run_shed(ShedReason::QueueFull);
        m.run_shed(ShedReason::ShuttingDown);
        m.lease_takeover();
        m.transport_retry("openai/gpt-4o-mini");
        m.transport_retry("openai/gpt-4o-mini");
        for line in [
            "redraft_queue_depth 5",
            "redraft_runs_waiting 2",
            "redraft_lease_takeovers_total 1",
            "redraft_runs_shed_total{reason=\"queue_full\"} 2",
            "redraft_runs_shed_total{reason=\"overloaded\"} 0",
            "redraft_runs_shed_total{reason=\"shutting_down\"} 1",
            "redraft_transport_retries_total{model=\"openai/gpt-4o-mini\"} 2",
            "# TYPE redraft_queue_depth gauge",
            "# TYPE redraft_runs_shed_total counter",
            "# HELP redraft_lease_takeovers_total Runs this process took over after their lease expired.",
        ] {
            assert!(has(&m, line), "missing `{line}` in\n{}", m.render(0));
        }
    }

    #[test]
    fn every_family_has_help_and_type_before_its_samples() {
        let m = Metrics::default();
        m.http_request(Some("/v1/runs/{id}"), &Method::GET, 200, Duration::from_millis(3));
        m.transport_retry("a/b");
        let text = m.render(1);
        let mut declared = BTreeSet::new();
        let mut help = BTreeSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                help.insert(rest.split(' ').next().unwrap().to_owned());
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap().to_owned();
                assert!(help.contains(&name), "`{name}` has a TYPE but no HELP");
                declared.insert(name);
            } else {
                let name = line.split(['{', ' ']).next().unwrap();
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s).filter(|f| declared.contains(*f)))
                    .unwrap_or(name);
                assert!(declared.contains(family), "`{line}` comes before its family's TYPE");
            }
        }
    }

    #[test]
    fn the_http_histogram_is_cumulative_and_counts_every_request() {
        let m = Metrics::default();
        m.http_request(Some("/healthz"), &Method::GET, 200, Duration::from_millis(3));
        m.http_request(Some("/healthz"), &Method::GET, 200, Duration::from_millis(70));
        m.http_request(None, &Method::from_bytes(b"BREW").unwrap(), 404, Duration::from_secs(1000));
        for line in [
            "redraft_http_requests_total{route=\"/healthz\",method=\"GET\",status=\"200\"} 2",
            "redraft_http_requests_total{route=\"unmatched\",method=\"other\",status=\"404\"} 1",
            "redraft_http_request_duration_seconds_bucket{route=\"/healthz\",method=\"GET\",le=\"0.005\"} 1",
            "redraft_http_request_duration_seconds_bucket{route=\"/healthz\",method=\"GET\",le=\"0.05\"} 1",
            "redraft_http_request_duration_seconds_bucket{route=\"/healthz\",method=\"GET\",le=\"0.1\"} 2",
            "redraft_http_request_duration_seconds_bucket{route=\"/healthz\",method=\"GET\",le=\"+Inf\"} 2",
            "redraft_http_request_duration_seconds_count{route=\"/healthz\",method=\"GET\"} 2",
            "redraft_http_request_duration_seconds_bucket{route=\"unmatched\",method=\"other\",le=\"300\"} 0",
            "redraft_http_request_duration_seconds_bucket{route=\"unmatched\",method=\"other\",le=\"+Inf\"} 1",
        ] {
            assert!(has(&m, line), "missing `{line}` in\n{}", m.render(0));
        }
    }

    #[test]
    fn model_labels_are_escaped_and_bounded() {
        let m = Metrics::default();
        m.transport_retry("odd/\"quoted\"\\name\n");
        assert!(has(&m, r#"redraft_transport_retries_total{model="odd/\"quoted\"\\name\n"} 1"#), "{}", m.render(0));
        for i in 0..MAX_MODELS + 5 {
            m.transport_retry(&format!("p/m{i}"));
        }
        let retries = lines(&m).into_iter().filter(|l| l.starts_with("redraft_transport_retries_total{")).count();
        assert_eq!(retries, MAX_MODELS + 1, "{MAX_MODELS} models and `other`");
        assert!(has(&m, "redraft_transport_retries_total{model=\"other\"} 6"), "{}", m.render(0));
    }
}
