//! The loop as a state machine that decides and does no IO.
//!
//! The runner asks [`Engine::next`] what to do, carries it out (calls the proposer, runs the
//! evaluators, measures time) and reports back with [`Engine::settle`]. Time comes in as
//! values; nothing here sleeps, reads a clock or draws random numbers.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::{artifact_sha256, canonical_json};
use crate::chat::{ChatRequest, ChatResponse, FinishReason, Message, Parameters, Role, ToolSpec};
use crate::escalation::{RunFacts, escalate};
use crate::extract::{self, Coercion, Route};
use crate::issue::{Issue, Score, Verdict, codes};
use crate::policy::{Ceilings, HaltReason, OnEscalation, PlanError, Policy};
use crate::price::{CostEstimate, OutputBasis, Price, estimate_tokens};
use crate::prompt::{
    Feedback, FirstPrompt, FreshPrompt, PriorAttempt, PromptStyle, Prompts, Strategy, Templates, bare_skeleton,
    fill_known, placeholder_paths, placeholders_in, pretty, prose_pairs, render_context, skeleton_value_text,
    truncate_chars,
};
use crate::record::{
    AttemptRecord, AttemptStatus, Metrics, PersonReply, RecordedRepair, RunErrorReport, RunResult, RunStatus,
    Validation,
};

/// What is asked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// A JSON object available to templates and evaluators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Earlier turns of a conversation, sent after the system message and before the prompt
    /// (the OpenAI-compatible proxy passes a client's chat this way). By default, none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<Message>,
}

impl Task {
    /// A task with only a prompt.
    pub fn new(prompt: impl Into<String>) -> Self {
        Self { prompt: prompt.into(), system: None, context: None, turns: Vec::new() }
    }
}

impl From<&str> for Task {
    fn from(prompt: &str) -> Self {
        Task::new(prompt)
    }
}

impl From<String> for Task {
    fn from(prompt: String) -> Self {
        Task::new(prompt)
    }
}

/// What is evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A JSON value extracted from the raw text. The default.
    #[default]
    Structured,
    /// The raw text itself (as a JSON string).
    Text,
}

/// Everything a run needs to decide, fixed before the first attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub task: Task,
    /// The proposer's `provider/model` name (for prices and messages).
    pub model: String,
    pub policy: Policy,
    pub ceilings: Ceilings,
    pub mode: Mode,
    /// The JSON Schema shown to the proposer, if any (shared by every run of a runner).
    pub schema: Option<Arc<Value>>,
    /// Whether an extracted artifact is coerced toward `schema` where that is unambiguous (a
    /// number written as text, `"yes"` for a boolean, an enum member in another case, …), each
    /// change recorded among the attempt's repairs. A value that fits is never changed. By
    /// default, `true`.
    pub coerce: bool,
    /// An example instance; by default a skeleton is generated from the schema.
    pub example: Option<Value>,
    pub prompt_style: PromptStyle,
    pub strategy: Strategy,
    pub templates: Templates,
    /// Longest echo of a previous submission in feedback. By default, 4000 characters.
    pub feedback_max_chars: usize,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// The proposer's price; needed for `cost_usd` and budgets.
    pub price: Option<Price>,
    /// Whether any evaluator grades on a scale (lowers the default threshold to 0.9).
    pub scoring: bool,
    /// Models to switch to, in order, each time an answer repeats an earlier one.
    /// By default, none.
    pub fallbacks: Vec<Fallback>,
    /// How much the temperature rises after a repeated answer (capped at 1.0). By default, 0.3.
    pub temperature_step: f32,
    /// Whether the proposer reads the first prompt. `false` when it wrote its own (an agent
    /// submitting over MCP): the first feedback then shows the shape `prompt_style` names
    /// (the schema, the example or both), once. By default, `true`.
    pub prompt_seen: bool,
    /// A function whose call is the answer (its parameters are `schema`). By default, none.
    pub tool: Option<Arc<ToolSpec>>,
    /// The backend's own parameters (`top_p`, `stop`, `seed`, …), sent with every attempt.
    /// By default, none.
    pub parameters: Parameters,
}

/// A model the loop may switch to after a repeated answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback {
    /// Its `provider/model` name.
    pub model: String,
    pub price: Option<Price>,
}

/// The temperature a rise starts from when none is set (the HTTP API's default).
pub const BASE_TEMPERATURE: f32 = 0.2;

impl Plan {
    /// A plan with every default for `task` proposed by `model`.
    pub fn new(task: Task, model: impl Into<String>) -> Self {
        Self {
            task,
            model: model.into(),
            policy: Policy::default(),
            ceilings: Ceilings::default(),
            mode: Mode::Structured,
            schema: None,
            coerce: true,
            example: None,
            prompt_style: PromptStyle::Both,
            strategy: Strategy::Conversation,
            templates: Templates::default(),
            feedback_max_chars: 4000,
            temperature: None,
            max_tokens: None,
            price: None,
            scoring: false,
            fallbacks: Vec::new(),
            temperature_step: 0.3,
            prompt_seen: true,
            tool: None,
            parameters: Parameters::default(),
        }
    }

    /// The name and price of proposer `index` (0 is the primary model, then the fallbacks).
    pub fn proposer(&self, index: usize) -> (&str, Option<Price>) {
        match index.checked_sub(1).and_then(|i| self.fallbacks.get(i)) {
            Some(f) => (&f.model, f.price),
            None => (&self.model, self.price),
        }
    }
}

/// What the engine wants next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Make attempt `iteration` with this request, sent to proposer `proposer` (0 is the
    /// primary model, then the fallbacks in order).
    Attempt { iteration: u32, request: ChatRequest, proposer: usize },
    /// Stop.
    Halt(HaltReason),
}

/// The artifact found in a proposer's text, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub artifact: Option<Value>,
    pub extraction: Option<Route>,
    /// What extraction repaired in the text, then what coercion changed.
    pub repairs: Vec<RecordedRepair>,
    /// The `invalid_json` issue when no artifact was found.
    pub issue: Option<Issue>,
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
    /// when the candidate has no artifact.
    Answered { response: ChatResponse, candidate: Candidate, verdict: Option<Verdict> },
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

#[derive(Debug)]
struct Seen {
    key: String,
    first: u32,
    count: u32,
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
    pub fn check(plan: &Plan) -> Result<(), PlanError> {
        Self::validate(plan)?;
        if !Prompts::new(&plan.templates)?.builtin() || plan.policy.max_budget_usd.is_some() {
            Self::new(plan.clone())?;
        }
        Ok(())
    }

    /// The plan's policy, sampling and budget settings.
    fn validate(plan: &Plan) -> Result<(), PlanError> {
        plan.policy.validate(&plan.ceilings)?;
        crate::policy::check_sampling(plan.temperature, plan.max_tokens)?;
        if let Some((name, value, instead)) = plan
            .parameters
            .iter()
            .find_map(|(name, value)| crate::chat::reserved_parameter(name).map(|i| (name, value, i)))
        {
            return Err(PlanError::Invalid {
                key: format!("parameters.{name}"),
                value: value.to_string(),
                rule: format!("is set by redraft: {instead}"),
            });
        }
        if plan.policy.max_budget_usd.is_some() {
            for index in 0..=plan.fallbacks.len() {
                if let (model, None) = plan.proposer(index) {
                    return Err(PlanError::BudgetWithoutPrice { model: model.to_owned() });
                }
            }
        }
        if !(plan.temperature_step.is_finite() && (0.0..=1.0).contains(&plan.temperature_step)) {
            return Err(PlanError::Invalid {
                key: "temperature_step".into(),
                value: plan.temperature_step.to_string(),
                rule: "must be in [0, 1]".into(),
            });
        }
        Ok(())
    }

    /// Check the plan and prepare the first prompt.
    pub fn new(plan: Plan) -> Result<Self, PlanError> {
        Self::validate(&plan)?;
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

    /// The request for the next attempt, as it would be sent.
    pub fn request(&self) -> ChatRequest {
        let mut messages = Vec::new();
        if let Some(system) = &self.plan.task.system {
            messages.push(Message::system(system.clone()));
        }
        messages.extend(self.plan.task.turns.iter().cloned());
        match self.plan.strategy {
            Strategy::Conversation => messages.extend(self.conversation.iter().cloned()),
            Strategy::Fresh => messages.push(Message::user(self.fresh_prompt())),
        }
        ChatRequest {
            messages,
            temperature: self.temperature,
            max_tokens: self.plan.max_tokens,
            iteration: self.next_iteration(),
            max_iterations: self.limit,
            tool: self.plan.tool.clone(),
            parameters: self.plan.parameters.clone(),
            schema: self
                .narrowed
                .clone()
                .or_else(|| self.plan.schema.clone())
                .filter(|_| self.plan.mode == Mode::Structured && self.plan.tool.is_none()),
        }
    }

    fn fresh_prompt(&self) -> String {
        if self.prior.is_empty() {
            return self.first_prompt.clone();
        }
        let ctx = FreshPrompt {
            first: &self.first_prompt,
            attempt: self.next_iteration(),
            max_attempts: self.limit,
            structured: self.plan.mode == Mode::Structured,
            prior: &self.prior,
        };
        let prompt = self.prompts.fresh(&ctx).unwrap_or_else(|e| format!("{}\n\n({e})", self.first_prompt));
        match &self.reply {
            Some(reply) => format!("{prompt}\n\n{}", reply_text(reply)),
            None => prompt,
        }
    }

    /// The last user message of the request being answered (see [`AttemptRecord::prompt`]).
    fn sent_prompt(&self) -> String {
        match self.plan.strategy {
            Strategy::Conversation => self
                .conversation
                .iter()
                .rev()
                .find(|m| m.role == Role::User)
                .map(|m| m.content.clone())
                .unwrap_or_default(),
            Strategy::Fresh => self.fresh_prompt(),
        }
    }

    fn next_iteration(&self) -> u32 {
        self.history.len() as u32 + 1
    }

    /// The estimated cost of the next attempt: its prompt at ceil(chars/4) tokens, and as
    /// many output tokens as the longest answer so far (before any answer: `max_tokens`,
    /// at most 1024).
    pub fn estimate_next_cost(&self, request: &ChatRequest) -> Option<f64> {
        self.estimate_next(request).map(|e| e.usd)
    }

    /// Like [`Engine::estimate_next_cost`], with how the estimate was made.
    pub fn estimate_next(&self, request: &ChatRequest) -> Option<CostEstimate> {
        let price = self.plan.proposer(self.proposer).1?;
        let (tokens_out, basis) = match self.history.iter().map(|a| a.tokens_out).max() {
            Some(longest) => (longest, OutputBasis::LongestAnswer),
            None => (u64::from(self.plan.max_tokens.unwrap_or(1024).min(1024)), OutputBasis::MaxTokens),
        };
        Some(CostEstimate::new(price, request.chars(), tokens_out, basis))
    }

    /// Decide what happens next, `elapsed` since the run started.
    pub fn next(&mut self, elapsed: Duration) -> Next {
        if let Some(h) = self.halt {
            return Next::Halt(h);
        }
        let policy = &self.plan.policy;
        if self.history.len() as u32 >= self.limit {
            return self.stop(HaltReason::MaxIterations);
        }
        if policy.max_wall_time.is_some_and(|limit| elapsed >= limit) {
            return self.stop(HaltReason::WallTime);
        }
        let request = self.request();
        if let Some(budget) = policy.max_budget_usd
            && let Some(estimate) = self.estimate_next(&request)
            && self.spent_usd() + estimate.usd > budget
        {
            self.budget_stop = Some(estimate);
            return self.stop(HaltReason::Budget);
        }
        Next::Attempt { iteration: self.next_iteration(), request, proposer: self.proposer }
    }

    fn stop(&mut self, reason: HaltReason) -> Next {
        self.halt = Some(reason);
        Next::Halt(reason)
    }

    /// Find the artifact in a proposer's text: extracted JSON in structured mode (coerced
    /// toward the schema, see [`Plan::coerce`]), the text itself in text mode.
    pub fn candidate(&self, raw: &str) -> Candidate {
        match self.plan.mode {
            Mode::Text => Candidate {
                artifact: Some(Value::String(raw.to_owned())),
                extraction: None,
                repairs: Vec::new(),
                issue: None,
            },
            Mode::Structured => match extract::extract(raw) {
                Ok(found) => {
                    let mut artifact = found.value;
                    let coerced = self.coerce(&mut artifact);
                    let mut repairs: Vec<RecordedRepair> = found.repairs.into_iter().map(Into::into).collect();
                    repairs.extend(coerced.into_iter().map(RecordedRepair::from));
                    Candidate { artifact: Some(artifact), extraction: Some(found.route), repairs, issue: None }
                }
                Err(no) => Candidate {
                    artifact: None,
                    extraction: None,
                    repairs: Vec::new(),
                    issue: Some(Issue::new("", codes::INVALID_JSON, no.to_string())),
                },
            },
        }
    }

    /// Coerce an extracted artifact toward the plan's schema, when the plan says so. A JSON
    /// Schema given back instead of an answer is left as it is, for the evaluators and the
    /// `schema_echo` check to see what the proposer wrote.
    fn coerce(&self, artifact: &mut Value) -> Vec<Coercion> {
        match self.plan.schema.as_deref() {
            Some(schema)
                if self.plan.coerce && !looks_like_a_schema(artifact, schema) && !is_a_json_schema(artifact) =>
            {
                extract::coerce(artifact, schema)
            }
            _ => Vec::new(),
        }
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
            AttemptEnd::Answered { response, candidate, verdict } => {
                self.answered_record(iteration, outcome.request_chars, outcome.wall_ms, response, candidate, verdict)
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

    fn failed_record(&self, iteration: u32, wall_ms: u64, issue: Issue) -> AttemptRecord {
        AttemptRecord {
            iteration,
            status: AttemptStatus::Error,
            raw: String::new(),
            artifact: None,
            extraction: None,
            repairs: Vec::new(),
            score: Score::ZERO,
            issues: vec![issue],
            tokens_in: 0,
            tokens_out: 0,
            tokens_estimated: false,
            cost_usd: Some(0.0).filter(|_| self.plan.proposer(self.proposer).1.is_some()),
            judge_cost_usd: None,
            wall_ms,
            started_at: None,
            finished_at: None,
            finish_reason: None,
            repeat_of: None,
            model: Some(self.plan.proposer(self.proposer).0.to_owned()),
            served_model: None,
            temperature: self.temperature,
            reply: None,
            prompt: None,
        }
    }

    fn answered_record(
        &mut self,
        iteration: u32,
        request_chars: usize,
        wall_ms: u64,
        response: ChatResponse,
        candidate: Candidate,
        verdict: Option<Verdict>,
    ) -> AttemptRecord {
        let (tokens_in, tokens_out, tokens_estimated) = match response.usage {
            Some(u) => (u.input_tokens, u.output_tokens, false),
            None => (estimate_tokens(request_chars), estimate_tokens(response.text.chars().count()), true),
        };
        let (model, price) = self.plan.proposer(self.proposer);
        let model = model.to_owned();
        let cost_usd = response.cost_usd.or_else(|| price.map(|p| p.cost(tokens_in, tokens_out)));
        let judge_cost_usd = verdict.as_ref().and_then(|v| v.cost_usd);
        let (mut status, score, mut issues) = match (&candidate.artifact, verdict) {
            (Some(_), Some(v)) => {
                let ok = v.score.get() >= self.threshold && !v.issues.iter().any(Issue::is_error);
                (if ok { AttemptStatus::Accepted } else { AttemptStatus::Rejected }, v.score, v.issues)
            }
            (Some(_), None) => (AttemptStatus::Accepted, Score::ONE, Vec::new()),
            (None, _) => {
                let status = match &candidate.issue {
                    Some(i) if i.code != codes::INVALID_JSON => AttemptStatus::Error,
                    _ => AttemptStatus::InvalidJson,
                };
                (status, Score::ZERO, candidate.issue.into_iter().collect())
            }
        };
        if let Some(artifact) = &candidate.artifact {
            let copied = placeholder_paths(artifact, &self.placeholders);
            if !copied.is_empty() {
                status = AttemptStatus::Rejected;
                issues.extend(copied.into_iter().map(|(path, p)| {
                    let mut issue = Issue::new(
                        path,
                        codes::PLACEHOLDER,
                        format!("\"{p}\" is a placeholder from the example: replace it with the real value"),
                    );
                    issue.evaluator = Some("redraft".into());
                    issue
                }));
            }
        }
        if let (Some(artifact), Some(schema)) = (&candidate.artifact, self.plan.schema.as_deref())
            && status == AttemptStatus::Rejected
            && looks_like_a_schema(artifact, schema)
        {
            // The validator's complaints (missing properties…) don't say why; this does.
            let mut issue = Issue::new(
                "",
                codes::SCHEMA_ECHO,
                "this is a JSON Schema, not an answer: give the values from the task, in the shape the schema describes",
            );
            issue.evaluator = Some("redraft".into());
            issues.insert(0, issue);
        }
        let repeat_of = self.note_seen(candidate.artifact.as_ref(), &response.text, iteration);
        AttemptRecord {
            iteration,
            status,
            raw: response.text,
            artifact: candidate.artifact,
            extraction: candidate.extraction,
            repairs: candidate.repairs,
            score,
            issues,
            tokens_in,
            tokens_out,
            tokens_estimated,
            cost_usd,
            judge_cost_usd,
            wall_ms,
            started_at: None,
            finished_at: None,
            finish_reason: response.finish_reason,
            repeat_of,
            model: Some(model),
            served_model: response.served_model,
            temperature: self.temperature,
            reply: None,
            prompt: None,
        }
    }

    /// Count an answer for stagnation: the earlier attempt it repeats, if any. Answers compare
    /// by canonical artifact, or by raw text when no artifact was found.
    fn note_seen(&mut self, artifact: Option<&Value>, raw: &str, iteration: u32) -> Option<u32> {
        let key = match artifact {
            Some(a) => canonical_json(a),
            None => format!("raw:{raw}"),
        };
        match self.seen.iter_mut().find(|s| s.key == key) {
            Some(s) => {
                s.count += 1;
                Some(s.first)
            }
            None => {
                self.seen.push(Seen { key, first: iteration, count: 1 });
                None
            }
        }
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
        let policy = &self.plan.policy;
        let decision = if record.status == AttemptStatus::Accepted {
            Some(HaltReason::Success)
        } else if policy.repeat_limit > 0 && repeats >= policy.repeat_limit {
            Some(HaltReason::Stagnation)
        } else if policy.patience > 0 && self.stale >= policy.patience {
            Some(HaltReason::Patience)
        } else if self.history.len() as u32 + 1 >= self.limit {
            Some(HaltReason::MaxIterations)
        } else {
            None
        };
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

    /// Take the schemas of `record`'s hints into the schema the next requests send (see
    /// [`crate::narrow`]): a path keeps its latest, so what an earlier attempt learned still
    /// holds when a later one fails elsewhere.
    fn narrow_by(&mut self, record: &AttemptRecord) {
        let Some(schema) = self.plan.schema.as_deref() else { return };
        let mut changed = false;
        for issue in &record.issues {
            let Some(fragment) = issue.hint_schema() else { continue };
            match self.narrowing.iter_mut().find(|(path, _)| *path == issue.path) {
                Some((_, known)) if known == fragment => {}
                Some((_, known)) => {
                    *known = fragment.clone();
                    changed = true;
                }
                None => {
                    self.narrowing.push((issue.path.clone(), fragment.clone()));
                    changed = true;
                }
            }
        }
        if changed {
            let constraints = self.narrowing.iter().map(|(path, fragment)| (path.as_str(), fragment));
            self.narrowed = crate::narrow::narrow(schema, constraints).map(Arc::new);
        }
    }

    /// After a repeated answer: a higher temperature, and the next fallback model if any.
    fn vary(&mut self) {
        let base = self.temperature.unwrap_or(BASE_TEMPERATURE);
        self.temperature = Some((base + self.plan.temperature_step).min(1.0));
        if self.proposer < self.plan.fallbacks.len() {
            self.proposer += 1;
        }
    }

    fn prepare_feedback(&mut self, record: &AttemptRecord) {
        let structured = self.plan.mode == Mode::Structured;
        let echo = match &record.artifact {
            Some(Value::String(s)) if !structured => s.clone(),
            Some(a) => pretty(a),
            None => record.raw.clone(),
        };
        let mut prior = PriorAttempt::new(
            record.iteration,
            &echo,
            self.plan.feedback_max_chars,
            record.issues.clone(),
            record.repeat_of,
        );
        // An answer too large to read is an answer: the proposer is told about it.
        let too_large = record.issues.iter().any(|i| i.code == codes::RESPONSE_TOO_LARGE);
        prior.timed_out = record.status == AttemptStatus::Error && !too_large;
        prior.cut_off = record.finish_reason == Some(FinishReason::Length);
        match self.plan.strategy {
            Strategy::Fresh => self.prior.push(prior),
            Strategy::Conversation => {
                if prior.timed_out {
                    // Nothing was answered: send the same conversation again.
                    return;
                }
                let example = self.example_again.take();
                let ctx = Feedback {
                    attempt: record.iteration + 1,
                    max_attempts: self.limit,
                    previous: record.iteration,
                    structured,
                    prior: &prior,
                    schema: self.schema_again.take(),
                    example: self.filled_example(record).or(example),
                };
                let text = self.prompts.feedback(&ctx).unwrap_or_else(|e| fallback_feedback(&ctx, &e.to_string()));
                // Nothing of an answer too large was kept: only the feedback follows.
                if !too_large {
                    self.conversation.push(Message::assistant(kept_answer(&record.raw, self.plan.feedback_max_chars)));
                }
                self.conversation.push(Message::user(text));
            }
        }
    }

    /// When `record` lost the shape — prose, a copied placeholder, a schema instead of an
    /// answer — the generated example again, with every placeholder an answer so far filled in
    /// (this one's `Key: value` lines or JSON first, then the earlier answers, latest first).
    fn filled_example(&self, record: &AttemptRecord) -> Option<String> {
        let skeleton = self.skeleton.as_ref()?;
        let lost = record.status == AttemptStatus::InvalidJson
            || record.issues.iter().any(|i| i.code == codes::PLACEHOLDER || i.code == codes::SCHEMA_ECHO);
        if !lost {
            return None;
        }
        // A schema's members (`type`, `properties`) are not answers.
        let prose = if record.artifact.is_none() { prose_pairs(&record.raw, skeleton) } else { Value::Null };
        let mut known: Vec<&Value> = vec![&prose];
        known.extend(answer_given(record));
        known.extend(self.history.iter().rev().filter(|a| a.iteration != record.iteration).filter_map(answer_given));
        Some(skeleton_value_text(&fill_known(skeleton, &known)))
    }

    /// The index in the history of the best attempt: highest score, ties to the latest,
    /// among attempts that produced an artifact.
    pub fn best(&self) -> Option<&AttemptRecord> {
        self.best.and_then(|i| self.history.get(i))
    }

    /// Build the result of the run: the one result shape of every face.
    pub fn finish(mut self, run_id: &str, elapsed: Duration) -> RunResult {
        let halted = *self.halt.get_or_insert(HaltReason::Cancelled);
        let status = if halted == HaltReason::Success {
            RunStatus::Succeeded
        } else if self.plan.policy.on_escalation == OnEscalation::Await && halted.awaits_a_person() {
            RunStatus::AwaitingInput
        } else {
            RunStatus::Failed
        };
        let best = self.best();
        let validation = match best.or(self.history.last()) {
            Some(a) => {
                Validation { score: a.score, passed: a.status == AttemptStatus::Accepted, issues: a.issues.clone() }
            }
            None => Validation { score: Score::ZERO, passed: false, issues: Vec::new() },
        };
        let artifact = best.and_then(|b| b.artifact.clone());
        let best_iteration = best.map(|b| b.iteration);
        let metrics = Metrics {
            wall_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            tokens_in: self.history.iter().map(|a| a.tokens_in).sum(),
            tokens_out: self.history.iter().map(|a| a.tokens_out).sum(),
            tokens_estimated: self.history.iter().any(|a| a.tokens_estimated),
            judge_cost_usd: self.history.iter().filter_map(|a| a.judge_cost_usd).reduce(|a, b| a + b),
            cost_usd: if self.history.is_empty() {
                self.plan.price.map(|_| 0.0)
            } else {
                self.history.iter().map(|a| a.cost_usd).sum()
            },
        };
        let escalation = (status != RunStatus::Succeeded).then(|| {
            escalate(
                &self.history,
                RunFacts {
                    halted_because: halted,
                    max_iterations: self.limit,
                    max_tokens: self.plan.max_tokens,
                    max_budget_usd: self.plan.policy.max_budget_usd,
                    spent_usd: self.spent_usd(),
                    next_cost: self.budget_stop.as_ref(),
                    error: self.error.as_ref(),
                },
            )
        });
        RunResult {
            run_id: run_id.to_owned(),
            status,
            halted_because: halted,
            artifact_sha256: artifact.as_ref().map(artifact_sha256),
            artifact,
            validation,
            iterations: self.history.len() as u32,
            best_iteration,
            best_score: best.map(|b| b.score),
            best_ref: best_iteration.map(|i| format!("{run_id}/{i}")),
            metrics,
            escalation,
            error: self.error,
            history: self.history,
        }
    }
}

/// How a person's answer reaches the model.
fn reply_text(reply: &PersonReply) -> String {
    format!(
        "A person answered the question your attempts raised.\nQuestion: {}\nAnswer: {}\nUse their answer in your next answer.",
        reply.question.trim(),
        reply.answer.trim()
    )
}

/// The artifact of an attempt, unless it was a schema given instead of an answer.
fn answer_given(a: &AttemptRecord) -> Option<&Value> {
    a.artifact.as_ref().filter(|_| !a.issues.iter().any(|i| i.code == codes::SCHEMA_ECHO))
}

/// Whether `artifact` is a JSON Schema rather than an answer to `schema`: an object with a
/// `type` naming a JSON type and `properties`, `required` or `items` (or with `$schema`),
/// where `schema` itself defines none of those keys as properties of the answer.
pub fn looks_like_a_schema(artifact: &Value, schema: &Value) -> bool {
    let Some(obj) = artifact.as_object() else {
        return false;
    };
    let own = schema.get("properties").and_then(Value::as_object);
    let keyword = |k: &str| obj.contains_key(k) && !own.is_some_and(|p| p.contains_key(k));
    let typed = keyword("type")
        && obj
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| matches!(t, "object" | "array" | "string" | "number" | "integer" | "boolean" | "null"));
    (typed && (keyword("properties") || keyword("required") || keyword("items"))) || keyword("$schema")
}

/// Whether `value` is itself a JSON Schema rather than an answer: an object whose every
/// member is a JSON Schema keyword, with a `$schema`, a `type` naming JSON types, or
/// `properties` describing members. What a model writes when it echoes "a JSON object" back
/// (`{"type": "object"}`), or a schema it was shown.
pub fn is_a_json_schema(value: &Value) -> bool {
    const KEYWORDS: &[&str] = &[
        "$schema",
        "$id",
        "$ref",
        "$defs",
        "definitions",
        "type",
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "items",
        "prefixItems",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "format",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "title",
        "description",
        "default",
        "examples",
    ];
    const TYPES: &[&str] = &["object", "array", "string", "number", "integer", "boolean", "null"];
    let Some(obj) = value.as_object() else {
        return false;
    };
    if obj.is_empty() || !obj.keys().all(|k| KEYWORDS.contains(&k.as_str())) {
        return false;
    }
    let type_names = |t: &Value| match t {
        Value::String(s) => TYPES.contains(&s.as_str()),
        Value::Array(a) => !a.is_empty() && a.iter().all(|t| t.as_str().is_some_and(|s| TYPES.contains(&s))),
        _ => false,
    };
    let described = obj
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty() && p.values().all(|v| v.is_object() || v.is_boolean()));
    obj.contains_key("$schema") || obj.get("type").is_some_and(type_names) || described
}

/// A previous answer as the conversation keeps it for the next attempt: like every echo,
/// at most `max_chars` characters, with the marker the feedback's echo uses when it is cut.
fn kept_answer(raw: &str, max_chars: usize) -> String {
    let (kept, cut) = truncate_chars(raw, max_chars);
    if !cut {
        return kept;
    }
    let shown = kept.chars().count();
    let total = shown + raw[kept.len()..].chars().count();
    format!("{kept}\n[truncated: showing the first {shown} of {total} characters]")
}

fn fallback_feedback(ctx: &Feedback<'_>, error: &str) -> String {
    let mut text = format!("Attempt {} of {}.\n\nYour previous answer was rejected:\n", ctx.attempt, ctx.max_attempts);
    for (i, issue) in ctx.prior.issues.iter().enumerate() {
        text.push_str(&format!("{}. {}: {} [{}]\n", i + 1, issue.path, issue.message, issue.code));
    }
    text.push_str(&format!("\n(the feedback template failed: {error})\n\nReturn only the corrected answer."));
    text
}

#[cfg(test)]
mod tests {
    use super::{is_a_json_schema, looks_like_a_schema};
    use serde_json::json;

    #[test]
    fn a_schema_given_back_is_told_apart_from_an_answer() {
        let schema = json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}});
        assert!(looks_like_a_schema(&json!({"title": "Person", "type": "object", "required": ["name"]}), &schema));
        assert!(looks_like_a_schema(&json!({"$schema": "https://json-schema.org/draft/2020-12/schema"}), &schema));
        assert!(!looks_like_a_schema(&json!({"name": "Ann"}), &schema));
        assert!(!looks_like_a_schema(&json!({"type": "welder", "required": ["x"]}), &schema));
        // An answer whose own fields are called `type` and `required` is an answer.
        let forms =
            json!({"type": "object", "properties": {"type": {"type": "string"}, "required": {"type": "array"}}});
        assert!(!looks_like_a_schema(&json!({"type": "object", "required": ["a"]}), &forms));
    }

    #[test]
    fn a_json_schema_is_told_from_an_answer() {
        for schema in [
            json!({"type": "object"}),
            json!({"type": ["string", "null"]}),
            json!({"properties": {"name": {"type": "string"}}, "required": ["name"]}),
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema"}),
            json!({"type": "object", "title": "Person", "description": "A person."}),
        ] {
            assert!(is_a_json_schema(&schema), "{schema}");
        }
        for answer in [
            json!({}),
            json!({"type": "invoice", "total": 3}),
            json!({"type": "nurse"}),
            json!({"name": "Yuki", "type": "object"}),
            json!({"title": "Dr", "description": "A doctor."}),
            json!([{"type": "object"}]),
            json!("object"),
        ] {
            assert!(!is_a_json_schema(&answer), "{answer}");
        }
    }
}
