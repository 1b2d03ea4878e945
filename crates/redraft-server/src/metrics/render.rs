//! The Prometheus text exposition of the counters: every family with its help and type lines.

use std::fmt::Write;

use super::{Metrics, ShedReason};

impl Metrics {
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
