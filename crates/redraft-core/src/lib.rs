//! The words of redraft and the loop that decides.
//!
//! Key design decision: this crate does no IO. The loop is a state machine
//! ([`engine::Engine`]) that *decides* — what to send next, whether an answer passes, when
//! to halt, what to tell the proposer, what to tell a person on failure — while the runner
//! in the `redraft` crate *acts*: it calls proposers and evaluators through the port traits
//! defined here ([`ChatProvider`], [`Evaluator`]), measures time and sleeps. Time and
//! randomness come in as values, so every decision is a pure function of the history and
//! can be tested without a clock or a network.

pub mod answer_checks;
pub mod body;
pub mod canonical;
pub mod chat;
pub mod decide;
pub mod diagnostics;
pub mod directive;
pub mod duration;
pub mod engine;
pub mod escalation;
pub mod evaluator;
pub mod events;
pub mod issue;
pub mod narrow;
pub mod plan;
pub mod policy;
pub mod price;
pub mod prompt;
pub mod record;
pub mod retry;
pub mod secrets;
pub mod skeleton;
pub mod store;
pub mod time;

/// JSON extraction from free-form model text (re-exported from `redraft-extract`).
pub mod extract {
    pub use redraft_extract::*;
}

pub use chat::{
    ChatProvider, ChatRequest, ChatResponse, FinishReason, Forwarded, Message, Parameters, ProviderError, Role,
    StreamedBody, ToolSpec, Usage, reserved_parameter,
};
pub use directive::{Directive, DirectiveError};
pub use engine::{AnswerError, ArtifactRead, ArtifactReader, AttemptEnd, AttemptOutcome, Engine, Interruption, Next};
pub use evaluator::{ArtifactSource, CancelFlag, EvalInput, Evaluator, EvaluatorError, Work};
pub use events::RunObserver;
pub use issue::{BoundedIssues, Hint, Issue, MAX_ISSUES_PER_ATTEMPT, Score, Severity, Verdict, codes};
pub use plan::{Fallback, Mode, Plan, Task};
pub use policy::{Ceilings, HaltReason, OnEscalation, PlanError, Policy};
pub use price::Price;
pub use prompt::{PromptStyle, Strategy, Templates};
pub use record::{
    AttemptRecord, AttemptStatus, Escalation, Metrics, PersonReply, RecordedRepair, RecurringIssue, RunErrorReport,
    RunResult, RunStatus, Validation,
};
pub use retry::{RetryPolicy, RetryStep, WaitBound};
pub use secrets::Redacted;
pub use store::{
    Claim, Claimed, Holder, Lease, NewRun, Origin, Renewal, RunFilter, RunState, RunSummary, Store, StoreError,
    StoredRun,
};
