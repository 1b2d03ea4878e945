//! Errors of the library's edge: configuration (nothing was sent to a model), recorded runs,
//! and typed extraction.

use std::path::PathBuf;

use redraft_core::{AttemptRecord, Escalation, HaltReason, Metrics, PlanError, ProviderError, StoreError};

/// The run cannot start as configured. Nothing was sent to a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("cannot read the config file `{path}`: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the config file `{path}` is invalid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("`{key}` is invalid: {message}")]
    Invalid { key: String, message: String },
    #[error(
        "no model is named\nhint: pass `--model provider/model` (e.g. `openai/gpt-4o-mini`, `mock/replies.jsonl`) or set `default_model` in redraft.toml"
    )]
    NoModel,
    #[error(
        "`{name}` does not name a provider\nhint: write the model as `provider/model`, e.g. `openai/{name}`, or set `default_provider` in redraft.toml"
    )]
    BareModel { name: String },
    #[error("unknown provider `{provider}`\nhint: use one of {}, or add `[providers.{provider}]` to redraft.toml", known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "))]
    UnknownProvider { provider: String, known: Vec<String> },
    /// A request from the network asked for something its face does not allow.
    #[error("{what} is not allowed {}\nhint: {hint}", face.over())]
    NotAllowed { face: crate::guard::Face, refused: crate::guard::Refused, what: String, hint: String },
    #[error(
        "`{directive}:` needs a judge model\nhint: set `judge_model = \"provider/model\"` in redraft.toml (or REDRAFT_JUDGE_MODEL)"
    )]
    NoJudgeModel { directive: String },
    #[error("no proposer was given to the runner\nhint: call `.model(&model)` or `.provider(provider)` on the builder")]
    NoProvider,
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Schema(#[from] redraft_eval::SchemaError),
    #[error(transparent)]
    Kind(#[from] redraft_eval::kind::KindError),
    #[error(transparent)]
    Script(#[from] redraft_providers::ScriptError),
    /// A provider's client cannot be set up (its URL, its TLS).
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Sandbox(#[from] redraft_sandbox::SandboxError),
}

/// A recorded run could not begin or go on: it cannot run as asked (`Config`: nothing was
/// sent to a model), or the store failed or refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "run `{run_id}` is being run by worker `{worker_id}` (its lease runs {lease_left} more); resuming it too would pay for its attempts twice
hint: wait for it, or pass `--force` if that process is known to be dead"
    )]
    Held { run_id: String, worker_id: String, lease_left: String },
}

impl From<PlanError> for RunError {
    fn from(e: PlanError) -> Self {
        RunError::Config(e.into())
    }
}

/// Typed extraction did not produce a value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractionError {
    /// The loop ended without an accepted artifact (max iterations, patience, budget, wall
    /// time, stagnation or cancellation); the whole history is kept.
    #[error("no valid answer after {attempts} attempt(s) (halted because {halted_because})")]
    MaxRetriesExceeded {
        attempts: u32,
        halted_because: HaltReason,
        history: Vec<AttemptRecord>,
        /// The last attempt's raw text.
        raw_output: String,
        metrics: Metrics,
        escalation: Option<Escalation>,
    },
    /// The proposer kept failing (transport or refusal).
    #[error("the proposer failed: {source}")]
    Provider {
        #[source]
        source: ProviderError,
        history: Vec<AttemptRecord>,
        metrics: Metrics,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
}
