//! Runs, attempts, tokens and cost by model, counted through a [`RunObserver`].

use std::sync::Arc;

use redraft::core::{AttemptRecord, ProviderError, RunObserver, RunResult};

use super::Metrics;

impl Metrics {
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
