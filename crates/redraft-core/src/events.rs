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

    /// A call to the proposer `model` (`provider/model`) failed with a transient `error` and
    /// will be retried (transport retries are not attempts).
    async fn transport_retry(&self, _run_id: &str, _model: &str, _error: &ProviderError) {}

    /// The run halted; this is its result. Called exactly once per run.
    async fn run_finished(&self, _result: &RunResult) {}
}
