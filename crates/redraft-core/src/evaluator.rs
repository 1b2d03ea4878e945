//! The evaluator port: something independent of the proposer that judges an artifact.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::issue::{Issue, Verdict, codes};

/// What an evaluator is given.
#[derive(Debug, Clone, Copy)]
pub struct EvalInput<'a> {
    /// The artifact: an extracted JSON value, or a JSON string holding the raw text.
    pub artifact: &'a Value,
    /// The task's context object (`Value::Null` when none was given).
    pub context: &'a Value,
    /// The attempt number, from 1.
    pub iteration: u32,
    /// Set when the verdict is no longer wanted (the run was cancelled, the attempt's time ran
    /// out, the process is stopping): an evaluator that computes for long looks at it and
    /// returns early. Its verdict is then not used.
    pub cancel: &'a CancelFlag,
}

/// Whether the work on an answer should stop. The runner sets it; the work looks at it between
/// steps (elements, rules, evaluators), so a cancelled check ends soon instead of running on
/// after nobody waits for it. Clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    /// A flag not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Set the flag: the work should stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether the work should stop.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// What an evaluator's work is, which decides where the runner runs it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Work {
    /// It computes (a schema, rules, a Rust closure): it runs on a thread of its own, off the
    /// threads that serve requests, so that however long it takes nothing else waits for it.
    /// The default.
    #[default]
    Compute,
    /// It waits on something outside (a command, a server, a model) and computes little: it is
    /// awaited where the run is.
    Wait,
}

/// Judges artifacts. A rejection is `Ok` with `passed == false`; `Err` means the evaluator
/// itself broke, which the loop records as an `evaluator_error` issue.
#[async_trait::async_trait]
pub trait Evaluator: Send + Sync + fmt::Debug {
    /// A short name used to tag issues and in logs (`schema`, `check`, …).
    fn name(&self) -> &str;

    /// Whether this evaluator grades on a scale (which lowers the default threshold to 0.9).
    /// By default, false.
    fn scoring(&self) -> bool {
        false
    }

    /// The JSON Schema this evaluator enforces, shown to the proposer. By default, none.
    /// (Shared, not copied: every run of a runner shows the same schema.)
    fn schema(&self) -> Option<Arc<Value>> {
        None
    }

    /// Whether it computes or waits ([`Work`]). By default, [`Work::Compute`].
    fn work(&self) -> Work {
        Work::Compute
    }

    /// Judge one artifact.
    async fn evaluate(&self, input: EvalInput<'_>) -> Result<Verdict, EvaluatorError>;
}

/// Where the artifact comes from when it is not read from the proposer's text — for example a
/// snapshot of the workspace an agent edited. Without one, the runner extracts the artifact
/// from the raw text (structured mode) or takes the text itself (text mode).
#[async_trait::async_trait]
pub trait ArtifactSource: Send + Sync + fmt::Debug {
    /// The artifact of attempt `iteration`, after the proposer answered with `raw`.
    async fn artifact(&self, raw: &str, iteration: u32) -> Result<Value, EvaluatorError>;
}

/// An evaluator could not judge.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvaluatorError {
    #[error("evaluator `{evaluator}` failed: {message}")]
    Failed { evaluator: String, message: String },
    #[error("evaluator `{evaluator}` timed out")]
    Timeout { evaluator: String },
}

impl EvaluatorError {
    /// The issue that stands for this failure in the attempt's verdict.
    pub fn to_issue(&self) -> Issue {
        Issue::new("", codes::EVALUATOR_ERROR, self.to_string())
    }
}

/// Combine several evaluators' outcomes into one verdict: a broken evaluator contributes a
/// failed verdict with an `evaluator_error` issue.
pub fn combine(outcomes: impl IntoIterator<Item = Result<Verdict, EvaluatorError>>) -> Verdict {
    Verdict::combine(outcomes.into_iter().map(|o| match o {
        Ok(v) => v,
        Err(e) => Verdict::from_issues(vec![e.to_issue()]),
    }))
}
