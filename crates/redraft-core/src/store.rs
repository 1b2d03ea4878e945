//! The store port: every run and every attempt is written as it happens, so nothing is lost
//! and an interrupted run can be resumed from its last finished attempt.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::HaltReason;
use crate::record::{AttemptRecord, RunResult};

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Accepted, not started (`POST /v1/runs`, the worker queue).
    Queued,
    /// Attempts are being made.
    Running,
    Succeeded,
    Failed,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
        }
    }

    /// Whether the run has halted.
    pub fn is_finished(self) -> bool {
        matches!(self, RunState::Succeeded | RunState::Failed)
    }
}

impl std::str::FromStr for RunState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "queued" => Ok(RunState::Queued),
            "running" => Ok(RunState::Running),
            "succeeded" => Ok(RunState::Succeeded),
            "failed" => Ok(RunState::Failed),
            other => Err(format!("`{other}` is not a run state; use queued, running, succeeded or failed")),
        }
    }
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRun {
    pub run_id: String,
    pub state: RunState,
    /// The request that started it (the face's run spec), enough to resume it.
    pub spec: Value,
    /// Milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// Every recorded attempt, in order.
    pub attempts: Vec<AttemptRecord>,
    /// The result, once the run halted.
    pub result: Option<RunResult>,
}

/// One line of `runs list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub run_id: String,
    pub state: RunState,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// Attempts recorded so far.
    pub iterations: u32,
    pub halted_because: Option<HaltReason>,
    pub best_score: Option<f64>,
    /// The proposer's `provider/model`, when the spec names one.
    pub model: Option<String>,
}

/// Which runs to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    pub state: Option<RunState>,
    /// At most this many, newest first. By default, 50.
    pub limit: Option<u32>,
}

/// Persists runs and attempts. Writes are made as the run happens; reads rebuild results.
#[async_trait::async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Record a new run with its spec, in `state` (queued or running).
    async fn insert_run(&self, run_id: &str, spec: &Value, state: RunState) -> Result<(), StoreError>;

    /// Change a run's state (queued → running on start or resume).
    async fn set_state(&self, run_id: &str, state: RunState) -> Result<(), StoreError>;

    /// Record an attempt; recording the same iteration again replaces it (a resumed run
    /// remakes an interrupted attempt).
    async fn save_attempt(&self, run_id: &str, attempt: &AttemptRecord) -> Result<(), StoreError>;

    /// Record the result of a halted run (its state follows the result's status).
    async fn finish_run(&self, result: &RunResult) -> Result<(), StoreError>;

    /// A run with its attempts and result.
    async fn run(&self, run_id: &str) -> Result<Option<StoredRun>, StoreError>;

    /// Runs, newest first.
    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError>;

    /// Runs left `running` (or `queued`) — after a crash, these are resumed.
    async fn unfinished(&self) -> Result<Vec<String>, StoreError>;
}

/// The store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("cannot open the store `{location}`: {message}")]
    Open { location: String, message: String },
    #[error("the store failed to {action}: {message}")]
    Query { action: String, message: String },
    #[error("run `{run_id}` is not in the store")]
    NotFound { run_id: String },
    #[error("the stored {what} is damaged: {message}")]
    Corrupt { what: String, message: String },
}
