//! `/metrics`: runs by status and halt reason, attempts by status, tokens, cost and an
//! attempt-duration histogram, in the Prometheus text format (written by hand: a few counters
//! need no metrics crate). Counted for the runs this process ran.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

use redraft::core::{AttemptRecord, RunObserver, RunResult};

/// Upper bounds of the attempt-duration buckets, in seconds.
const BUCKETS: [f64; 12] = [0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0];

#[derive(Debug, Default)]
struct Counts {
    /// (status, halted_because) → runs.
    runs: BTreeMap<(&'static str, &'static str), u64>,
    attempts: BTreeMap<&'static str, u64>,
    tokens_in: u64,
    tokens_out: u64,
    cost_usd: f64,
    /// Cumulative counts per bucket of `BUCKETS`.
    duration_buckets: [u64; BUCKETS.len()],
    duration_sum: f64,
    duration_count: u64,
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
            *c.attempts.entry(a.status.as_str()).or_default() += 1;
            c.tokens_in += a.tokens_in;
            c.tokens_out += a.tokens_out;
            c.cost_usd += a.cost_usd.unwrap_or(0.0);
            let secs = a.wall_ms as f64 / 1000.0;
            for (bound, count) in BUCKETS.iter().zip(c.duration_buckets.iter_mut()) {
                if secs <= *bound {
                    *count += 1;
                }
            }
            c.duration_sum += secs;
            c.duration_count += 1;
        });
    }

    fn run(&self, r: &RunResult) {
        let status = if r.succeeded() { "succeeded" } else { "failed" };
        self.with(|c| *c.runs.entry((status, r.halted_because.as_str())).or_default() += 1);
    }

    /// The Prometheus text exposition; `in_flight` is the number of runs in flight now.
    pub fn render(&self, in_flight: usize) -> String {
        self.with(|c| {
            let mut out = String::new();
            family(
                &mut out,
                "redraft_runs_in_flight",
                "gauge",
                "Runs in flight in this process.",
                [format!("redraft_runs_in_flight {in_flight}")],
            );
            let runs = c.runs.iter().map(|((status, halted), n)| {
                format!("redraft_runs_total{{status=\"{status}\",halted_because=\"{halted}\"}} {n}")
            });
            family(&mut out, "redraft_runs_total", "counter", "Finished runs by status and halt reason.", runs);
            let attempts =
                c.attempts.iter().map(|(status, n)| format!("redraft_attempts_total{{status=\"{status}\"}} {n}"));
            family(&mut out, "redraft_attempts_total", "counter", "Attempts by status.", attempts);
            let tokens = [
                format!("redraft_tokens_total{{direction=\"in\"}} {}", c.tokens_in),
                format!("redraft_tokens_total{{direction=\"out\"}} {}", c.tokens_out),
            ];
            family(&mut out, "redraft_tokens_total", "counter", "Tokens sent to and received from proposers.", tokens);
            let cost = [format!("redraft_cost_usd_total {}", c.cost_usd)];
            family(&mut out, "redraft_cost_usd_total", "counter", "Proposer cost in USD (known prices only).", cost);
            let mut histogram: Vec<String> = BUCKETS
                .iter()
                .zip(c.duration_buckets.iter())
                .map(|(le, n)| format!("redraft_attempt_duration_seconds_bucket{{le=\"{le}\"}} {n}"))
                .collect();
            histogram.push(format!("redraft_attempt_duration_seconds_bucket{{le=\"+Inf\"}} {}", c.duration_count));
            histogram.push(format!("redraft_attempt_duration_seconds_sum {}", c.duration_sum));
            histogram.push(format!("redraft_attempt_duration_seconds_count {}", c.duration_count));
            family(&mut out, "redraft_attempt_duration_seconds", "histogram", "Attempt duration.", histogram);
            out
        })
    }
}

/// One metric family: its help and type lines, then its samples.
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: impl IntoIterator<Item = String>) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for sample in samples {
        let _ = writeln!(out, "{sample}");
    }
}

/// Counts every run it is told about.
#[derive(Debug, Clone)]
pub struct MetricsObserver(pub Arc<Metrics>);

#[async_trait::async_trait]
impl RunObserver for MetricsObserver {
    async fn attempt_finished(&self, _run_id: &str, attempt: &AttemptRecord) {
        self.0.attempt(attempt);
    }

    async fn run_finished(&self, result: &RunResult) {
        self.0.run(result);
    }
}
