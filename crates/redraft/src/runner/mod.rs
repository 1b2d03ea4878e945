//! The runner: carries out what the engine decides. Every face goes through this one loop —
//! a run ([`Runner::run_with`]), a run whose answers are submitted from outside
//! ([`Runner::submitted`]), and a single call to a model with the loop's retries and time
//! limits ([`Runner::call`], [`Runner::forward`]).
//!
//! - `builder`: [`RunnerBuilder`], which checks everything before a model is called;
//! - `attempt`: one attempt — the proposer called with transport retries, the answer read,
//!   the evaluators run, within what is left of the attempt's time;
//! - `verdict`: the evaluators run on an artifact, those that compute on blocking threads,
//!   under a cancellation flag set when the verdict is no longer wanted;
//! - `call`: one call to the proposer outside a run;
//! - `submitted`: runs whose proposer is outside (an agent submitting its own work).

mod attempt;
mod builder;
mod call;
mod submitted;
mod verdict;

use std::sync::Arc;

use redraft_core::{
    ArtifactSource, AttemptEnd, AttemptOutcome, AttemptRecord, ChatProvider, Engine, Evaluator, Interruption, Next,
    PersonReply, Plan, ProviderError, RetryPolicy, RunObserver, RunResult, Task,
};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::field::Empty;
use tracing::{Instrument, Span, info, info_span};

pub use self::builder::RunnerBuilder;
pub use self::submitted::{SUBMITTED_FEEDBACK_TEMPLATE, Submission, SubmittedRun, artifact_of};
pub use self::verdict::verdict;
use crate::error::ConfigError;

/// A configured loop: a proposer, evaluators and a policy. Cheap to share; each
/// [`Runner::run`] is one independent run.
#[derive(Debug, Clone)]
pub struct Runner {
    /// The primary proposer, then the fallbacks in order.
    proposers: Vec<Arc<dyn ChatProvider>>,
    evaluators: Vec<Arc<dyn Evaluator>>,
    /// Every setting of a run; each run copies it and sets its task.
    plan: Plan,
    retry: RetryPolicy,
    observers: Vec<Arc<dyn RunObserver>>,
    artifact_source: Option<Arc<dyn ArtifactSource>>,
}

/// How a run starts: its id (by default a new UUIDv7), a cancellation token, and the attempts
/// to replay when resuming, with the answers people gave to its escalations (each given when
/// the replay reaches the attempt it followed).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub run_id: Option<String>,
    pub cancel: CancellationToken,
    pub restore: Vec<AttemptRecord>,
    pub answers: Vec<PersonReply>,
}

/// Give a person's answer to the engine of a run being replayed.
fn give_answer(engine: &mut Engine, reply: PersonReply) -> Result<(), ConfigError> {
    engine.answer(reply).map_err(|e| ConfigError::Invalid { key: "answer".into(), message: e.to_string() })
}

/// A new run id: a UUIDv7 string.
pub fn new_run_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// What a run produced, with the typed provider error when the proposer failed.
#[derive(Debug)]
pub(crate) struct Finished {
    pub result: RunResult,
    pub provider_error: Option<ProviderError>,
}

impl Runner {
    /// Start building a runner.
    pub fn builder() -> RunnerBuilder {
        RunnerBuilder::default()
    }

    /// This runner, also telling `observer` about every attempt (after the others).
    pub fn with_observer(mut self, observer: Arc<dyn RunObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// This runner, taking each attempt's artifact from `source` instead of the proposer's text
    /// (agent mode: the artifact is the workspace the agent edited).
    pub fn with_artifact_source(mut self, source: Arc<dyn ArtifactSource>) -> Self {
        self.artifact_source = Some(source);
        self
    }

    /// This runner, also judging with `evaluator` (after the others; `first`: before them).
    pub fn with_evaluator(mut self, evaluator: Arc<dyn Evaluator>, first: bool) -> Self {
        if first {
            self.evaluators.insert(0, evaluator);
        } else {
            self.evaluators.push(evaluator);
        }
        self.plan.schema = self.evaluators.iter().find_map(|e| e.schema());
        self.plan.scoring = self.evaluators.iter().any(|e| e.scoring());
        self
    }

    /// The primary proposer's `provider/model` name.
    pub fn model_name(&self) -> &str {
        self.plan.model.as_str()
    }

    /// The plan a run of `task` follows.
    pub fn plan(&self, task: Task) -> Plan {
        Plan { task, ..self.plan.clone() }
    }

    /// Run the loop on `task` until it halts. A failed run is still `Ok`: its result holds
    /// the best-so-far artifact, the whole history and an escalation.
    pub async fn run(&self, task: impl Into<Task>) -> Result<RunResult, ConfigError> {
        self.run_until_cancelled(task.into(), CancellationToken::new()).await
    }

    /// Like [`Runner::run`], halting with `cancelled` when `cancel` fires (the attempt in
    /// flight is recorded).
    pub async fn run_until_cancelled(&self, task: Task, cancel: CancellationToken) -> Result<RunResult, ConfigError> {
        self.run_with(task, RunOptions { cancel, ..RunOptions::default() }).await
    }

    /// Run with a given id, a cancellation token, and — to resume — the attempts an earlier
    /// process recorded (they are replayed, not repeated, and observers are not told again).
    /// An error means the run could not begin: nothing was sent to a model.
    pub async fn run_with(&self, task: Task, options: RunOptions) -> Result<RunResult, ConfigError> {
        Ok(self.run_inner(task, options).await?.result)
    }

    pub(crate) async fn run_inner(&self, task: Task, options: RunOptions) -> Result<Finished, ConfigError> {
        let run_id = options.run_id.clone().unwrap_or_else(new_run_id);
        let span = info_span!(
            "run",
            redraft.run_id = %run_id,
            redraft.model = %self.plan.model,
            redraft.status = Empty,
            redraft.halted_because = Empty,
            redraft.iterations = Empty,
            redraft.usage.input_tokens = Empty,
            redraft.usage.output_tokens = Empty,
        );
        let (live, provider_error) = self.drive(run_id, task, options).instrument(span.clone()).await?;
        let result = span.in_scope(|| live.finish());
        // After the run's span has closed: an observer's store may hand the current span to a
        // worker thread (SQLite does), which would keep the span open past the run's end.
        self.tell_finished(&result).await;
        Ok(Finished { result, provider_error })
    }

    async fn tell_finished(&self, result: &RunResult) {
        for o in &self.observers {
            o.run_finished(result).await;
        }
    }

    /// The engine of a new run of `task`, with the attempts and answers of `options` replayed.
    fn engine(
        &self,
        task: Task,
        restore: Vec<AttemptRecord>,
        answers: Vec<PersonReply>,
    ) -> Result<Engine, ConfigError> {
        let mut engine = Engine::new(self.plan(task))?;
        let mut answers = answers.into_iter().peekable();
        for record in restore {
            while let Some(reply) = answers.next_if(|a| a.after_iteration as usize <= engine.history().len()) {
                give_answer(&mut engine, reply)?;
            }
            engine.restore(record);
        }
        for reply in answers {
            give_answer(&mut engine, reply)?;
        }
        Ok(engine)
    }

    /// The loop: ask the engine, carry out the attempt it asks for, report the outcome, until
    /// it halts.
    async fn drive(
        &self,
        run_id: String,
        task: Task,
        options: RunOptions,
    ) -> Result<(Live, Option<ProviderError>), ConfigError> {
        let RunOptions { restore, answers, cancel, .. } = options;
        let context = Arc::new(task.context.clone().unwrap_or(Value::Null));
        let mut live = Live::new(run_id, self.engine(task, restore, answers)?);
        let deadline = live.engine.plan().policy.max_wall_time.map(|d| live.start + d);
        let mut provider_error = None;
        let mut next = live.next(&cancel);
        while let Next::Attempt { iteration, request, proposer } = next {
            let begun = live.begin(self, iteration, proposer).await;
            let provider = self.proposers.get(proposer).or(self.proposers.first()).cloned();
            let attempt = self
                .attempt(&live.run_id, provider, &live.engine, iteration, &request, &context, deadline)
                .instrument(begun.span.clone());
            let wall = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            let end = tokio::select! {
                biased;
                _ = cancel.cancelled() => AttemptEnd::Interrupted(Interruption::Cancelled),
                _ = wall => AttemptEnd::Interrupted(Interruption::WallTime),
                r = attempt => match r {
                    Ok(end) => end,
                    Err(e) => {
                        let message = e.to_string();
                        provider_error = Some(e);
                        AttemptEnd::ProviderFailed { message }
                    }
                },
            };
            next = live.settle(self, begun, request.chars(), end, &cancel).await.1;
        }
        Ok((live, provider_error))
    }
}

/// A run in progress: its engine, and when it began. The loop and submitted runs step it the
/// same way: [`Live::next`], [`Live::begin`], then [`Live::settle`] with how the attempt ended.
#[derive(Debug)]
struct Live {
    run_id: String,
    engine: Engine,
    start: Instant,
}

/// An attempt under way: when it began, and its span.
#[derive(Debug)]
struct Begun {
    iteration: u32,
    t0: Instant,
    started_at: String,
    span: Span,
}

impl Live {
    fn new(run_id: String, engine: Engine) -> Self {
        Self { run_id, engine, start: Instant::now() }
    }

    /// What the engine asks for next (a halt once `cancel` fired).
    fn next(&mut self, cancel: &CancellationToken) -> Next {
        if cancel.is_cancelled() {
            self.engine.cancel();
        }
        self.engine.next(self.start.elapsed())
    }

    /// Attempt `iteration` begins: the observers are told, its span opens.
    async fn begin(&self, runner: &Runner, iteration: u32, proposer: usize) -> Begun {
        for o in &runner.observers {
            o.attempt_started(&self.run_id, iteration).await;
        }
        let span = info_span!(
            "attempt",
            redraft.run_id = %self.run_id,
            redraft.iteration = i64::from(iteration),
            redraft.proposer = attempt::int(proposer as u64),
            redraft.model = Empty,
            redraft.attempt.status = Empty,
            redraft.score = Empty,
            redraft.usage.input_tokens = Empty,
            redraft.usage.output_tokens = Empty,
        );
        Begun { iteration, t0: Instant::now(), started_at: crate::clock::now_rfc3339(), span }
    }

    /// The attempt ended with `end`: the engine records it and decides what comes next, then
    /// the observers hear of the record — told it is the last when the run halts after it (a
    /// store then writes it with the result, in one write).
    async fn settle(
        &mut self,
        runner: &Runner,
        begun: Begun,
        request_chars: usize,
        end: AttemptEnd,
        cancel: &CancellationToken,
    ) -> (Option<AttemptRecord>, Next) {
        let Begun { iteration, t0, started_at, span } = begun;
        let outcome = AttemptOutcome {
            iteration,
            request_chars,
            wall_ms: u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX),
            started_at: Some(started_at),
            finished_at: Some(crate::clock::now_rfc3339()),
            end,
        };
        let record = self.engine.settle(outcome).cloned();
        let next = self.next(cancel);
        if let Some(record) = &record {
            span.record("redraft.model", record.model.as_deref());
            span.record("redraft.attempt.status", record.status.as_str());
            span.record("redraft.score", record.score.get());
            span.record("redraft.usage.input_tokens", attempt::int(record.tokens_in));
            span.record("redraft.usage.output_tokens", attempt::int(record.tokens_out));
            info!(
                iteration,
                status = record.status.as_str(),
                score = record.score.get(),
                issues = record.issues.len(),
                "attempt finished"
            );
            let last = matches!(next, Next::Halt(_));
            for o in &runner.observers {
                if last {
                    o.last_attempt_finished(&self.run_id, record).await;
                } else {
                    o.attempt_finished(&self.run_id, record).await;
                }
            }
        }
        (record, next)
    }

    /// The run's result (call after the engine halted); recorded on the current span. Known
    /// secrets ([`redraft_core::secrets`]) are taken out of it — a model's answer or an
    /// evaluator's issue that repeats an API key — so whoever it goes to (a face, the store, a
    /// library caller) never gets one.
    fn finish(self) -> RunResult {
        let result = redraft_core::secrets::redact_serde(self.engine.finish(&self.run_id, self.start.elapsed()));
        let span = Span::current();
        span.record("redraft.status", if result.succeeded() { "succeeded" } else { "failed" });
        span.record("redraft.halted_because", result.halted_because.as_str());
        span.record("redraft.iterations", i64::from(result.iterations));
        span.record("redraft.usage.input_tokens", attempt::int(result.metrics.tokens_in));
        span.record("redraft.usage.output_tokens", attempt::int(result.metrics.tokens_out));
        info!(status = ?result.status, halted_because = %result.halted_because, iterations = result.iterations, "run finished");
        result
    }
}
