//! The loop as a state machine that decides and does no IO.
//!
//! The runner asks [`Engine::next`] what to do, carries it out (calls the proposer, runs the
//! evaluators, measures time) and reports back with [`Engine::settle`]. Time comes in as
//! values; nothing here sleeps, reads a clock or draws random numbers.
//!
//! This module holds the machine's state and its transitions. The halting rules it obeys are
//! pure functions of [`crate::policy`]; its parts are submodules: `read` (the artifact
//! in a proposer's text), `record` (an attempt's record from how it ended), `request` (what
//! the next attempt sends), `feedback` (what it is told after a rejection) and `result` (the
//! run's result, [`Engine::finish`]). The plan types are [`crate::plan`]'s and the built-in
//! answer checks [`crate::answer_checks`]'s, both re-exported here under their old paths.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::chat::{ChatRequest, ChatResponse, Message, Role};
use crate::issue::{Issue, Verdict, codes};
use crate::policy::{AfterAttempt, BeforeAttempt, HaltReason, PlanError};
use crate::price::CostEstimate;
use crate::prompt::{
    Feedback, FirstPrompt, FreshPrompt, PriorAttempt, PromptStyle, Prompts, Strategy, pretty, render_context,
};
use crate::record::{AttemptRecord, AttemptStatus, PersonReply, RunErrorReport};
use crate::skeleton::{bare_skeleton, placeholders_in, skeleton_value_text};

mod feedback;
mod read;
mod record;
mod request;
mod result;

pub use crate::answer_checks::{is_a_json_schema, looks_like_a_schema};
pub use crate::plan::{BASE_TEMPERATURE, Fallback, Mode, Plan, Task};
pub use read::{ArtifactRead, ArtifactReader};

use feedback::reply_text;
use record::Seen;

/// What the engine wants next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Make attempt `iteration` with this request, sent to proposer `proposer` (0 is the
    /// primary model, then the fallbacks in order).
    Attempt { iteration: u32, request: ChatRequest, proposer: usize },
    /// Stop.
    Halt(HaltReason),
}

/// Why an attempt in flight was stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interruption {
    WallTime,
    Cancelled,
}

/// How an attempt ended, as the runner observed it.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // one per attempt, moved once
pub enum AttemptEnd {
    /// The proposer answered and the artifact (if any) was evaluated. `verdict` is `None`
    /// when the answer has no artifact.
    Answered { response: ChatResponse, read: ArtifactRead, verdict: Option<Verdict> },
    /// `attempt_timeout` elapsed.
    TimedOut,
    /// Wall time or cancellation stopped the attempt; the run halts.
    Interrupted(Interruption),
    /// Transport failures persisted (or were permanent); the run halts.
    ProviderFailed { message: String },
    /// The answer was larger than the proposer's `max_response_bytes` (`limit`) and was not
    /// read. An attempt like any failed one: the next one is told to answer more briefly.
    ResponseTooLarge { limit: usize },
}

/// An attempt's outcome, reported to [`Engine::settle`].
#[derive(Debug, Clone)]
pub struct AttemptOutcome {
    pub iteration: u32,
    /// Characters of the request (for token estimates).
    pub request_chars: usize,
    pub wall_ms: u64,
    /// When the attempt began and ended (RFC 3339), copied into the record: the engine keeps
    /// no clock of its own.
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub end: AttemptEnd,
}

/// The loop's state: history, best-so-far, the conversation, and the halt decision.
#[derive(Debug)]
pub struct Engine {
    plan: Plan,
    prompts: Prompts,
    threshold: f64,
    first_prompt: String,
    /// The example, to show again in the first feedback when the prompt showed it alone.
    example_again: Option<String>,
    /// The schema, to show in the first feedback when the proposer did not read the prompt.
    schema_again: Option<String>,
    /// The placeholders of the generated skeleton shown to the proposer: an answer holding one
    /// copied the example and is rejected.
    placeholders: Vec<&'static str>,
    /// That skeleton, to show again filled with what the answers gave when an answer lost the
    /// shape (prose, a copied example, a schema).
    skeleton: Option<Value>,
    conversation: Vec<Message>,
    prior: Vec<PriorAttempt>,
    history: Vec<AttemptRecord>,
    seen: Vec<Seen>,
    best: Option<usize>,
    stale: u32,
    halt: Option<HaltReason>,
    error: Option<RunErrorReport>,
    proposer: usize,
    temperature: Option<f32>,
    /// The estimate of the attempt the budget could not pay for, when it halted the run.
    budget_stop: Option<CostEstimate>,
    /// Attempts the run may make: `max_iterations`, raised by each person's answer.
    limit: u32,
    /// A person's answer the next attempt is the first to receive.
    reply: Option<PersonReply>,
    /// What the checks said the values at some paths must also match (their hints' schemas),
    /// the latest for each path, and the run's schema narrowed by them: what the next request
    /// asks a constraining decoder for.
    narrowing: Vec<(String, Value)>,
    /// Where each path is in `narrowing`.
    narrowing_at: HashMap<String, usize>,
    narrowed: Option<Arc<Value>>,
}

/// Why a person's answer cannot be given to a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// The run has not halted, succeeded, or halted for a reason an answer does not lift.
    #[error("the run is not waiting for an answer ({0})")]
    NotAwaiting(String),
    #[error("an answer must give the run at least one more attempt (`max_iterations` is 0)")]
    NoAttempts,
}

impl Engine {
    /// Check a plan as [`Engine::new`] would, without preparing its prompts when nothing
    /// depends on them: what a runner checks once when it is built, before any run. The
    /// prompts are prepared when the templates are overridden (one naming an unknown variable
    /// fails only when rendered) or a budget is set (it must pay for the first attempt, whose
    /// cost is estimated from its prompt); the built-in templates cannot fail to render.
    pub fn validate(plan: &Plan) -> Result<(), PlanError> {
        plan.validate()?;
        if !Prompts::new(&plan.templates)?.builtin() || plan.policy.max_budget_usd.is_some() {
            Self::new(plan.clone())?;
        }
        Ok(())
    }

    /// Check the plan and prepare the first prompt.
    pub fn new(plan: Plan) -> Result<Self, PlanError> {
        plan.validate()?;
        let prompts = Prompts::new(&plan.templates)?;
        let structured = plan.mode == Mode::Structured;
        let schema_text = plan.schema.as_deref().filter(|_| structured).map(pretty);
        let show_schema = matches!(plan.prompt_style, PromptStyle::Schema | PromptStyle::Both);
        let show_example = matches!(plan.prompt_style, PromptStyle::Example | PromptStyle::Both);
        // The example shown: the plan's own, or a skeleton generated from the schema (made
        // once, for its text and for filling in later).
        let generated = plan.schema.as_deref().filter(|_| show_example && structured && plan.example.is_none());
        let generated = generated.map(bare_skeleton);
        let (example, placeholders) = match (&plan.example, &generated) {
            (_, _) if !(show_example && structured) => (None, Vec::new()),
            (Some(e), _) => (Some(pretty(e)), Vec::new()),
            (None, Some(value)) => (Some(skeleton_value_text(value)), placeholders_in(value)),
            (None, None) => (None, Vec::new()),
        };
        let skeleton = generated.filter(|_| plan.tool.is_none());
        let first_schema = schema_text.clone().filter(|_| show_schema);
        // After a rejection the shape is shown again the way the first prompt showed it: a
        // prompt that left the schema out (the example style, for models that echo a schema
        // back instead of filling it) never gets it in the feedback either.
        let example_again = example.clone().filter(|_| first_schema.is_none() || !plan.prompt_seen);
        let schema_again = first_schema.clone().filter(|_| !plan.prompt_seen);
        let context = plan.task.context.as_ref().filter(|c| !c.is_null());
        let first_prompt = prompts.first(&FirstPrompt {
            prompt: &plan.task.prompt,
            context: context.map(pretty),
            context_text: context.map(render_context),
            structured,
            schema: first_schema,
            example,
        })?;
        // Render the feedback and fresh templates once now so that an override naming an
        // unknown variable fails before anything is sent (the built-in ones are tested).
        if !prompts.builtin() {
            let probe = PriorAttempt::new(1, "{}", 10, vec![Issue::new("/x", "type", "probe")], Some(1));
            prompts.feedback(&Feedback {
                attempt: 2,
                max_attempts: 3,
                previous: 1,
                structured,
                prior: &probe,
                schema: schema_again.clone(),
                example: example_again.clone(),
            })?;
            prompts.fresh(&FreshPrompt {
                first: &first_prompt,
                attempt: 2,
                max_attempts: 3,
                structured,
                prior: std::slice::from_ref(&probe),
            })?;
        }
        let threshold = plan.policy.threshold(plan.scoring);
        let plan_temperature = plan.temperature;
        let limit = plan.policy.max_iterations;
        let engine = Self {
            conversation: vec![Message::user(first_prompt.clone())],
            plan,
            prompts,
            threshold,
            first_prompt,
            example_again,
            schema_again,
            placeholders,
            skeleton,
            prior: Vec::new(),
            history: Vec::new(),
            seen: Vec::new(),
            best: None,
            stale: 0,
            halt: None,
            error: None,
            proposer: 0,
            temperature: plan_temperature,
            budget_stop: None,
            limit,
            reply: None,
            narrowing: Vec::new(),
            narrowing_at: HashMap::new(),
            narrowed: None,
        };
        // A budget that cannot pay for even the first attempt is a mistake in the request, not
        // a run that ran out: refuse it before anything is sent.
        if let Some(budget) = engine.plan.policy.max_budget_usd
            && let Some(first) = engine.estimate_next(&engine.request())
            && first.usd > budget
        {
            return Err(PlanError::BudgetTooSmall { budget, estimate: first.describe(), needed: first.usd });
        }
        Ok(engine)
    }

    /// The plan this engine runs.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Attempts so far.
    pub fn history(&self) -> &[AttemptRecord] {
        &self.history
    }

    /// The success threshold in force.
    pub fn threshold(&self) -> f64 {
        self.threshold
    }

    /// The halt decision, once made.
    pub fn halted(&self) -> Option<HaltReason> {
        self.halt
    }

    /// Stop the run from outside (a user's cancel) between attempts.
    pub fn cancel(&mut self) {
        self.halt.get_or_insert(HaltReason::Cancelled);
    }

    /// USD spent so far (attempts with a known cost).
    pub fn spent_usd(&self) -> f64 {
        self.history.iter().filter_map(|a| a.cost_usd).sum()
    }

    /// Decide what happens next, `elapsed` since the run started: whether the halting rules
    /// stop the run before its next attempt ([`crate::policy::Policy::halt_before`]), else
    /// that attempt.
    pub fn next(&mut self, elapsed: Duration) -> Next {
        if let Some(h) = self.halt {
            return Next::Halt(h);
        }
        let request = self.request();
        // The next attempt's cost is estimated only when a budget asks for it.
        let next_cost = self.plan.policy.max_budget_usd.and_then(|_| self.estimate_next(&request));
        let now = BeforeAttempt {
            made: self.history.len() as u32,
            limit: self.limit,
            elapsed,
            spent_usd: self.spent_usd(),
            next_usd: next_cost.as_ref().map(|e| e.usd),
        };
        if let Some(reason) = self.plan.policy.halt_before(now) {
            if reason == HaltReason::Budget {
                self.budget_stop = next_cost;
            }
            return self.stop(reason);
        }
        Next::Attempt { iteration: self.next_iteration(), request, proposer: self.proposer }
    }

    fn stop(&mut self, reason: HaltReason) -> Next {
        self.halt = Some(reason);
        Next::Halt(reason)
    }

    /// Record an attempt and decide whether the run halts; when it goes on, the feedback for
    /// the next attempt is prepared. Returns the attempt's record when one was made.
    pub fn settle(&mut self, outcome: AttemptOutcome) -> Option<&AttemptRecord> {
        if self.halt.is_some() {
            return None;
        }
        let iteration = self.next_iteration();
        let mut record = match outcome.end {
            AttemptEnd::ProviderFailed { message } => {
                self.error = Some(RunErrorReport { code: codes::PROVIDER_ERROR.to_owned(), message });
                self.halt = Some(HaltReason::ProviderError);
                return None;
            }
            AttemptEnd::Interrupted(why) => {
                let (reason, code, message) = match why {
                    Interruption::WallTime => {
                        (HaltReason::WallTime, codes::WALL_TIME, "the run's wall time ran out during this attempt")
                    }
                    Interruption::Cancelled => {
                        (HaltReason::Cancelled, codes::CANCELLED, "the run was cancelled during this attempt")
                    }
                };
                self.halt = Some(reason);
                self.failed_record(iteration, outcome.wall_ms, Issue::new("", code, message))
            }
            AttemptEnd::TimedOut => {
                let limit = crate::duration::format(self.plan.policy.attempt_timeout);
                let issue =
                    Issue::new("", codes::TIMEOUT, format!("the attempt took longer than {limit} and was stopped"));
                self.failed_record(iteration, outcome.wall_ms, issue)
            }
            AttemptEnd::ResponseTooLarge { limit } => {
                let issue = Issue::new(
                    "",
                    codes::RESPONSE_TOO_LARGE,
                    format!(
                        "the answer was larger than the limit of {limit} bytes (`max_response_bytes`) and was not read: answer much more briefly"
                    ),
                );
                self.failed_record(iteration, outcome.wall_ms, issue)
            }
            AttemptEnd::Answered { response, read, verdict } => {
                self.answered_record(iteration, outcome.request_chars, outcome.wall_ms, response, read, verdict)
            }
        };
        record.started_at = outcome.started_at;
        record.finished_at = outcome.finished_at;
        record.prompt = Some(self.sent_prompt());
        record.reply = self.reply.take();
        self.push(record);
        self.history.last()
    }

    /// Go on after a person answered the escalation of a run halted for a reason an answer can
    /// change ([`HaltReason::awaits_a_person`]): the next attempt gets the feedback on the last
    /// one and the answer, as a person's reply to the question; the run may make
    /// `reply.max_iterations` more attempts, and its patience and repeat counts start again.
    pub fn answer(&mut self, mut reply: PersonReply) -> Result<(), AnswerError> {
        match self.halt {
            Some(h) if h.awaits_a_person() => {}
            Some(h) => return Err(AnswerError::NotAwaiting(format!("it halted because {h}"))),
            None => return Err(AnswerError::NotAwaiting("it has not halted".into())),
        }
        if reply.max_iterations == 0 {
            return Err(AnswerError::NoAttempts);
        }
        reply.after_iteration = self.history.len() as u32;
        self.halt = None;
        self.stale = 0;
        self.seen.clear();
        self.limit = reply.after_iteration.saturating_add(reply.max_iterations);
        // The halt kept the last attempt's feedback from being prepared: it goes first.
        if let Some(last) = self.history.last().cloned() {
            self.prepare_feedback(&last);
        }
        if self.plan.strategy == Strategy::Conversation {
            let text = reply_text(&reply);
            match self.conversation.last_mut().filter(|m| m.role == Role::User) {
                Some(last) => {
                    last.content.push_str("\n\n");
                    last.content.push_str(&text);
                }
                None => self.conversation.push(Message::user(text)),
            }
        }
        self.reply = Some(reply);
        Ok(())
    }

    /// Replay an attempt recorded by an earlier process (resuming a run): the history,
    /// best-so-far, stagnation counts, varied settings and the conversation are rebuilt as if
    /// the attempt had just happened. Attempts interrupted by wall time or cancellation are not
    /// finished attempts: they are skipped, and that iteration is made again.
    pub fn restore(&mut self, mut record: AttemptRecord) {
        if self.halt.is_some() {
            return;
        }
        let interrupted = record.status == AttemptStatus::Error
            && record.issues.iter().any(|i| i.code == codes::WALL_TIME || i.code == codes::CANCELLED);
        if interrupted {
            return;
        }
        record.iteration = self.next_iteration();
        // The answer it received is on the record already.
        self.reply = None;
        let answered = !(record.status == AttemptStatus::Error && record.raw.is_empty());
        record.repeat_of =
            if answered { self.note_seen(record.artifact.as_ref(), &record.raw, record.iteration) } else { None };
        self.push(record);
    }

    /// Take a record into the history: the best so far, the stagnation counts, the halting
    /// rules after an attempt ([`crate::policy::Policy::halt_after`]) and, when the run goes
    /// on, what the next attempt is told.
    fn push(&mut self, record: AttemptRecord) {
        let best_score = self.best.and_then(|i| self.history.get(i)).map(|b| b.score);
        let has_artifact = record.artifact.is_some();
        let improved = has_artifact && best_score.is_none_or(|b| record.score > b);
        if has_artifact && best_score.is_none_or(|b| record.score >= b) {
            self.best = Some(self.history.len());
        }
        self.stale = if improved { 0 } else { self.stale + 1 };
        let repeats =
            record.repeat_of.and_then(|first| self.seen.iter().find(|s| s.first == first)).map_or(0, |s| s.count);
        let decision = self.plan.policy.halt_after(AfterAttempt {
            accepted: record.status == AttemptStatus::Accepted,
            repeats,
            stale: self.stale,
            made: self.history.len() as u32 + 1,
            limit: self.limit,
        });
        if self.halt.is_none() {
            self.halt = decision;
        }
        if self.halt.is_none() {
            if record.repeat_of.is_some() {
                self.vary();
            }
            self.narrow_by(&record);
            self.prepare_feedback(&record);
        }
        self.history.push(record);
    }

    /// After a repeated answer: a higher temperature, and the next fallback model if any.
    fn vary(&mut self) {
        let base = self.temperature.unwrap_or(BASE_TEMPERATURE);
        self.temperature = Some((base + self.plan.temperature_step).min(1.0));
        if self.proposer < self.plan.fallbacks.len() {
            self.proposer += 1;
        }
    }
}
