//! The observer port: whoever needs to know as a run happens (a progress line, a store that
//! persists every attempt, an SSE stream) implements [`RunObserver`].

use crate::chat::ProviderError;
use crate::record::{AttemptRecord, RunResult};

/// Told about a run as it happens. Every method defaults to doing nothing.
#[async_trait::async_trait]
pub trait RunObserver: Send + Sync + std::fmt::Debug {
    /// An attempt is about to be sent to the proposer.
    async fn attempt_started(&self, _run_id: &str, _iteration: u32) {}

    /// An attempt was evaluated (or failed) and recorded.
    async fn attempt_finished(&self, _run_id: &str, _attempt: &AttemptRecord) {}

    /// The run's last attempt was evaluated (or failed): the run halts after it, and
    /// [`RunObserver::run_finished`] follows with this attempt in the result's history. By
    /// default the same as [`RunObserver::attempt_finished`]; a store writes it with the
    /// result, in one write.
    async fn last_attempt_finished(&self, run_id: &str, attempt: &AttemptRecord) {
        self.attempt_finished(run_id, attempt).await;
    }

    /// A call to the proposer `model` (`provider/model`) failed with a transient `error` and
    /// will be retried (transport retries are not attempts).
    async fn transport_retry(&self, _run_id: &str, _model: &str, _error: &ProviderError) {}

    /// The run halted; this is its result. Called exactly once per run.
    async fn run_finished(&self, _result: &RunResult) {}
}
