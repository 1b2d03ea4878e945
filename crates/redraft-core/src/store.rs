//! The store port: every run and every attempt is written as it happens, so nothing is lost
//! and an interrupted run can be resumed from its last finished attempt.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::HaltReason;
use crate::record::{AttemptRecord, PersonReply, RunResult};

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
    /// Stopped with an escalation a person is asked to answer (`on_escalation = "await"`).
    AwaitingInput,
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
            RunState::AwaitingInput => "awaiting_input",
        }
    }

    /// Whether the run has halted for good (a run awaiting a person's answer has not).
    pub fn is_finished(self) -> bool {
        matches!(self, RunState::Succeeded | RunState::Failed)
    }

    /// Whether the run has stopped with a result: halted, or awaiting a person's answer.
    pub fn has_result(self) -> bool {
        self.is_finished() || self == RunState::AwaitingInput
    }
}

/// Which face a run's request came through: a run is continued (resumed, answered) with the
/// trust of where it came from, whoever continues it, so a run a network client started never
/// runs with the CLI's trust.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// The user's own shell (`redraft run`, `redraft until`).
    Cli,
    /// The HTTP API or the OpenAI-compatible proxy.
    Http,
    /// An MCP session.
    Mcp,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Cli => "cli",
            Origin::Http => "http",
            Origin::Mcp => "mcp",
        }
    }

    /// Read from the store: a known word, or, for a run recorded before origins were, what its
    /// `local` flag says — a local run was the CLI's or an MCP session's, and which one is not
    /// known, so it is taken as the less trusted, an MCP session's (continued by the CLI under
    /// the network's guard).
    pub fn stored(word: Option<&str>, local: bool) -> Self {
        match word {
            Some("cli") => Origin::Cli,
            Some("mcp") => Origin::Mcp,
            Some(_) => Origin::Http,
            None if local => Origin::Mcp,
            None => Origin::Http,
        }
    }

    /// Started by the user's own process (the CLI, an MCP session): never claimed by workers.
    pub fn is_local(self) -> bool {
        self != Origin::Http
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
            "awaiting_input" => Ok(RunState::AwaitingInput),
            other => {
                Err(format!("`{other}` is not a run state; use queued, running, succeeded, failed or awaiting_input"))
            }
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
    /// The face the request came through, whose trust every continuation keeps.
    pub origin: Origin,
    /// Milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// Every recorded attempt, in order.
    pub attempts: Vec<AttemptRecord>,
    /// The result, once the run halted.
    pub result: Option<RunResult>,
    /// Who holds the run's lease while it is `running`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<Holder>,
    /// The answers people gave to its escalations, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<PersonReply>,
}

/// The worker holding a running run, and until when (it renews the lease while it works).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub worker_id: String,
    /// Milliseconds since the Unix epoch, by the store's clock.
    pub lease_until_ms: i64,
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
    /// The kind the run checks against, when its spec names one.
    #[serde(default)]
    pub kind: Option<String>,
}

/// Which runs to list: every condition given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    pub state: Option<RunState>,
    /// The proposer's `provider/model`, exactly.
    pub model: Option<String>,
    /// The kind, exactly.
    pub kind: Option<String>,
    /// Text found (ignoring ASCII case) in the run id, the model, the kind or the prompt.
    pub text: Option<String>,
    /// At most this many, newest first. By default, 50.
    pub limit: Option<u32>,
    /// Skip this many of the newest that match first (paging).
    pub offset: Option<u32>,
}

/// A worker's claim: its id (unique per process) and how long a lease lasts after each renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease<'a> {
    pub worker_id: &'a str,
    pub ttl: Duration,
}

/// A run to record.
#[derive(Debug, Clone, Copy)]
pub struct NewRun<'a> {
    pub run_id: &'a str,
    /// The request (the face's run spec), enough to run or resume it anywhere.
    pub spec: &'a Value,
    /// `Some`: recorded `running`, held by this worker, which runs it now. `None`: recorded
    /// `queued`, for any worker to claim.
    pub holder: Option<Lease<'a>>,
    /// Refuse a queued run ([`StoreError::QueueFull`]) when this many runs already wait.
    pub max_queued: Option<u64>,
    /// Where the request came from. A run of the user's own process (`redraft run`, an MCP
    /// session) is never claimed by workers from the queue, resumed only on request
    /// ([`Store::claim_run`]).
    pub origin: Origin,
}

/// What [`Store::claim_run`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The caller holds the run now. `takeover`: it was `running` under a lease that had
    /// expired (its worker died or lost touch), or that `force` broke.
    Claimed { takeover: bool },
    /// Another worker holds a live lease on it.
    Held(Holder),
    /// The run has halted.
    Finished(RunState),
}

/// A run [`Store::claim_many`] handed to a worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    pub run_id: String,
    /// It was `running` under an expired lease: a crashed worker's run, resumed.
    pub takeover: bool,
    /// The run as claimed (spec and attempts), when the store read it in the claim's
    /// statement; `None`: read it with [`Store::run`].
    pub run: Option<Box<StoredRun>>,
}

/// What renewing a worker's leases found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Renewal {
    /// The runs the worker still holds (their leases now run `ttl` from now).
    pub held: Vec<String>,
    /// Of those, the runs someone asked to cancel.
    pub cancel: Vec<String>,
}

/// Persists runs and attempts, and is the queue workers claim runs from. Writes are made as
/// the run happens; reads rebuild results.
///
/// Every write to a running run names the worker holding it, and is refused
/// ([`StoreError::LeaseLost`]) once another worker has taken the run over: a worker that lost
/// touch can never record over the one that resumed its run.
#[async_trait::async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Record a new run: queued, or running and held by the worker that runs it now.
    async fn insert_run(&self, new: &NewRun<'_>) -> Result<(), StoreError>;

    /// Claim the oldest run waiting for a worker: a queued one, or a running one (not
    /// [`NewRun::local`]) whose lease has expired (taken over). `None` when there is none. Two claimers never get the same
    /// run.
    async fn claim_next(&self, lease: &Lease<'_>) -> Result<Option<Claimed>, StoreError> {
        Ok(self.claim_many(lease, 1).await?.into_iter().next())
    }

    /// Like [`Store::claim_next`], up to `limit` runs at once (a worker with that many free
    /// slots), oldest first.
    async fn claim_many(&self, lease: &Lease<'_>, limit: usize) -> Result<Vec<Claimed>, StoreError>;

    /// Claim one run: queued, or running under an expired lease — or under any lease when
    /// `force` is set (its holder is known to be dead). A live lease held by another worker is
    /// never taken otherwise.
    async fn claim_run(&self, run_id: &str, lease: &Lease<'_>, force: bool) -> Result<Claim, StoreError>;

    /// Extend the leases the worker holds on `run_ids` to `ttl` from now (one write per
    /// worker, however many runs it holds). A run it no longer holds is left out of the
    /// renewal; a run it holds but does not name is left to expire.
    async fn renew(&self, lease: &Lease<'_>, run_ids: &[String]) -> Result<Renewal, StoreError>;

    /// Put a run the worker holds back in the queue (a worker shutting down); `false` when it
    /// did not hold it.
    async fn release(&self, run_id: &str, worker_id: &str) -> Result<bool, StoreError>;

    /// Give a person's answer to a run `awaiting_input`: it is kept with the run, which goes back
    /// to the queue (`holder` `None`) or is held by the worker that continues it now. Refused
    /// ([`StoreError::NotAwaiting`]) in any other state: an answer is taken once.
    async fn answer_run(&self, run_id: &str, reply: &PersonReply, holder: Option<&Lease<'_>>)
    -> Result<(), StoreError>;

    /// End a run `awaiting_input` as failed, with the result it stopped with (its escalation
    /// kept); that result. Refused ([`StoreError::NotAwaiting`]) in any other state.
    async fn abort_run(&self, run_id: &str) -> Result<RunResult, StoreError>;

    /// Ask for a run to be cancelled: its holder sees it on its next renewal. The run's state.
    async fn request_cancel(&self, run_id: &str) -> Result<RunState, StoreError>;

    /// Remove a run that is still queued, never claimed (a request that stopped waiting for
    /// it); `false` when a worker has claimed it meanwhile.
    async fn withdraw(&self, run_id: &str) -> Result<bool, StoreError>;

    /// Record an attempt of a run `worker_id` holds; recording the same iteration again
    /// replaces it (a resumed run remakes an interrupted attempt).
    async fn save_attempt(&self, run_id: &str, worker_id: &str, attempt: &AttemptRecord) -> Result<(), StoreError>;

    /// Record the result of a halted run `worker_id` holds (its state follows the result's
    /// status).
    async fn finish_run(&self, result: &RunResult, worker_id: &str) -> Result<(), StoreError>;

    /// A run with its attempts and result.
    async fn run(&self, run_id: &str) -> Result<Option<StoredRun>, StoreError>;

    /// Runs, newest first.
    async fn list(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError>;

    /// Runs not halted (queued or running), oldest first.
    async fn unfinished(&self) -> Result<Vec<String>, StoreError>;

    /// Runs waiting in the queue.
    async fn queue_depth(&self) -> Result<u64, StoreError>;

    /// Completes when another process may have queued runs since the last call, for a store
    /// that can tell (PostgreSQL); never for one that cannot, whose workers find queued runs
    /// by polling (they poll in any case).
    async fn queued_elsewhere(&self) {
        std::future::pending::<()>().await;
    }

    /// Completes with the runs other processes finished since the last call (`None`: some may
    /// have finished unannounced, read every run awaited), for a store that can tell
    /// (PostgreSQL); never for one that cannot, whose waiters find finished runs by polling
    /// (they poll in any case). Cancel-safe: nothing is lost by dropping it before it completes.
    async fn finished_elsewhere(&self) -> Option<Vec<String>> {
        std::future::pending::<Option<Vec<String>>>().await
    }

    /// The state of each of `run_ids` that is stored, in one read (for a process waiting on
    /// many runs at once).
    async fn states(&self, run_ids: &[String]) -> Result<Vec<(String, RunState)>, StoreError>;

    /// The result of each of `run_ids` that has halted or awaits an answer, with its history. A store that can
    /// reads them all at once; this default reads them one by one.
    async fn results(&self, run_ids: &[String]) -> Result<Vec<(String, RunResult)>, StoreError> {
        let mut results = Vec::with_capacity(run_ids.len());
        for run_id in run_ids {
            if let Some(stored) = self.run(run_id).await?
                && stored.state.has_result()
                && let Some(result) = stored.result
            {
                results.push((stored.run_id, result));
            }
        }
        Ok(results)
    }
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
    #[error("worker `{worker_id}` no longer holds run `{run_id}`: another worker took it over")]
    LeaseLost { run_id: String, worker_id: String },
    #[error("the queue is full: {queued} runs are waiting (`max_queued_runs`)")]
    QueueFull { queued: u64 },
    #[error("run `{run_id}` is not awaiting an answer: it is {state}")]
    NotAwaiting { run_id: String, state: RunState },
}

impl StoreError {
    /// Whether retrying later may succeed: the database was unreachable, busy, out of
    /// connections or of file descriptors, or the queue was full — not a damaged or missing run.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Open { .. } | StoreError::Query { .. } | StoreError::QueueFull { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_stored_before_origins_is_never_taken_for_the_clis() {
        assert_eq!(Origin::stored(Some("cli"), true), Origin::Cli);
        assert_eq!(Origin::stored(Some("http"), true), Origin::Http);
        assert_eq!(Origin::stored(Some("mcp"), false), Origin::Mcp);
        // An older local run was the CLI's or an MCP session's: the less trusted is assumed.
        assert_eq!(Origin::stored(None, true), Origin::Mcp);
        assert_eq!(Origin::stored(None, false), Origin::Http);
        assert_eq!(Origin::stored(Some("anything else"), true), Origin::Http);
    }
}
