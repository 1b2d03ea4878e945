//! The runner: carries out what the engine decides. Every face calls this one loop.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use redraft_core::{
    ArtifactSource, AttemptEnd, AttemptOutcome, AttemptRecord, Candidate, Ceilings, ChatProvider, ChatRequest,
    ChatResponse, Engine, EvalInput, Evaluator, Fallback, Interruption, Mode, Next, PersonReply, Plan, Policy, Price,
    PromptStyle, ProviderError, RetryDecision, RetryPolicy, RunObserver, RunResult, Strategy, Task, Templates,
    ToolSpec, Verdict,
};
use redraft_eval::{Formats, SchemaEvaluator};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::field::Empty;
use tracing::{Instrument, Span, info, info_span, warn};

use crate::check::{Check, Rejection};
use crate::error::ConfigError;
use crate::model::Model;

/// A configured loop: a proposer, evaluators and a policy. Cheap to share; each
/// [`Runner::run`] is one independent run.
#[derive(Debug, Clone)]
pub struct Runner {
    /// The primary proposer, then the fallbacks in order.
    proposers: Vec<Arc<dyn ChatProvider>>,
    evaluators: Vec<Arc<dyn Evaluator>>,
    /// Every setting of a run; each run copies it and sets its task.
    template: Plan,
    retry: RetryPolicy,
    observers: Vec<Arc<dyn RunObserver>>,
    artifact_source: Option<Arc<dyn ArtifactSource>>,
}

/// The schema given to the builder, compiled at `build`.
#[derive(Debug)]
enum SchemaSource {
    Inline(Value),
    File(PathBuf),
}

/// Builds a [`Runner`]. Everything that can be wrong is reported by [`RunnerBuilder::build`],
/// before any model is called.
#[derive(Debug)]
pub struct RunnerBuilder {
    provider: Option<Arc<dyn ChatProvider>>,
    fallbacks: Vec<Arc<dyn ChatProvider>>,
    evaluators: Vec<Arc<dyn Evaluator>>,
    schema: Option<SchemaSource>,
    formats: Formats,
    template: Plan,
    retry: RetryPolicy,
    observers: Vec<Arc<dyn RunObserver>>,
    artifact_source: Option<Arc<dyn ArtifactSource>>,
}

impl Default for RunnerBuilder {
    fn default() -> Self {
        Self {
            provider: None,
            fallbacks: Vec::new(),
            evaluators: Vec::new(),
            schema: None,
            formats: Formats::Checked,
            template: Plan::new(Task::default(), ""),
            retry: RetryPolicy::default(),
            observers: Vec::new(),
            artifact_source: None,
        }
    }
}

impl RunnerBuilder {
    /// Propose with `model` (its price is used for costs and budgets).
    pub fn model(mut self, model: &Model) -> Self {
        self.provider = Some(model.provider.clone());
        if model.price.is_some() {
            self.template.price = model.price;
        }
        self
    }

    /// Propose with any [`ChatProvider`].
    pub fn provider(mut self, provider: Arc<dyn ChatProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// After a repeated answer, switch to this model (several: in the order given).
    pub fn fallback(mut self, model: &Model) -> Self {
        self.template.fallbacks.push(Fallback { model: model.name().to_owned(), price: model.price });
        self.fallbacks.push(model.provider.clone());
        self
    }

    /// How much the temperature rises after a repeated answer (capped at 1.0). By default, 0.3.
    pub fn temperature_step(mut self, step: f32) -> Self {
        self.template.temperature_step = step;
        self
    }

    /// Check artifacts against this JSON Schema (compiled once, at `build`).
    pub fn schema(mut self, schema: Value) -> Self {
        self.schema = Some(SchemaSource::Inline(schema));
        self
    }

    /// Check artifacts against the JSON Schema in this file (read and compiled at `build`);
    /// its `$ref`s to other files resolve in its directory.
    pub fn schema_file(mut self, path: impl AsRef<Path>) -> Self {
        self.schema = Some(SchemaSource::File(path.as_ref().to_owned()));
        self
    }

    /// What `format` does in the schema given to [`RunnerBuilder::schema`] or
    /// [`RunnerBuilder::schema_file`]. By default, [`Formats::Checked`].
    pub fn formats(mut self, formats: Formats) -> Self {
        self.formats = formats;
        self
    }

    /// Add an evaluator; all evaluators run, the run passes when all pass.
    pub fn evaluator(mut self, evaluator: Arc<dyn Evaluator>) -> Self {
        self.evaluators.push(evaluator);
        self
    }

    /// Add a Rust closure check over the artifact; its rejection is an ordinary failed
    /// attempt.
    pub fn check<F, E>(self, name: &str, f: F) -> Self
    where
        F: Fn(&Value) -> Result<(), E> + Send + Sync + 'static,
        E: Into<Rejection>,
    {
        self.evaluator(Arc::new(Check::new(name, move |a, _| f(a))))
    }

    /// Replace the whole policy.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.template.policy = policy;
        self
    }

    /// Attempts at most. By default, 3.
    pub fn max_iterations(mut self, n: u32) -> Self {
        self.template.policy.max_iterations = n;
        self
    }

    /// Server-side ceilings on what a policy may ask.
    pub fn ceilings(mut self, ceilings: Ceilings) -> Self {
        self.template.ceilings = ceilings;
        self
    }

    /// Evaluate the raw text instead of extracted JSON.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.template.mode = mode;
        self
    }

    /// An example instance to show the proposer. By default, a skeleton of the schema.
    pub fn example(mut self, example: Value) -> Self {
        self.template.example = Some(example);
        self
    }

    /// A function whose call is the answer: OpenAI-compatible models are asked to call it
    /// and its arguments are the artifact. Give its `parameters` as the schema too (an
    /// evaluator), or they are not checked. By default, none.
    pub fn tool(mut self, tool: ToolSpec) -> Self {
        self.template.tool = Some(Arc::new(tool));
        self
    }

    /// How the expected shape is shown. By default, `both`.
    pub fn prompt_style(mut self, style: PromptStyle) -> Self {
        self.template.prompt_style = style;
        self
    }

    /// Whether an extracted answer is coerced toward the schema before it is checked, where
    /// that is unambiguous (`"€77.08"` for a number is 77.08, `"yes"` for a boolean is `true`),
    /// each change recorded among the attempt's repairs; a value that fits is never changed.
    /// By default, `true`.
    pub fn coerce(mut self, coerce: bool) -> Self {
        self.template.coerce = coerce;
        self
    }

    /// How feedback is given. By default, `conversation`.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.template.strategy = strategy;
        self
    }

    /// Override the prompt templates.
    pub fn templates(mut self, templates: Templates) -> Self {
        self.template.templates = templates;
        self
    }

    /// Longest echo of a previous submission in feedback. By default, 4000 characters.
    pub fn feedback_max_chars(mut self, n: usize) -> Self {
        self.template.feedback_max_chars = n;
        self
    }

    /// Sampling temperature. By default, the provider's.
    pub fn temperature(mut self, t: f32) -> Self {
        self.template.temperature = Some(t);
        self
    }

    /// Output token limit per attempt. By default, the provider's.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.template.max_tokens = Some(n);
        self
    }

    /// The backend's own parameters (`top_p`, `stop`, `seed`, … in OpenAI's names), sent with
    /// every attempt. A parameter the model's provider cannot take, or one redraft sets itself,
    /// fails [`Self::build`] by name.
    pub fn parameters(mut self, parameters: serde_json::Map<String, serde_json::Value>) -> Self {
        self.template.parameters = Arc::new(parameters);
        self
    }

    /// The proposer's price, overriding the model's.
    pub fn price(mut self, price: Price) -> Self {
        self.template.price = Some(price);
        self
    }

    /// How transport failures are retried (the count comes from the policy's
    /// `transport_retries`).
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Be told about every attempt as it happens (several observers are told in order).
    pub fn observer(mut self, observer: Arc<dyn RunObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// Take each attempt's artifact from `source` instead of the proposer's text (agent mode:
    /// the artifact is the workspace the agent edited).
    pub fn artifact_source(mut self, source: Arc<dyn ArtifactSource>) -> Self {
        self.artifact_source = Some(source);
        self
    }

    /// Check everything and build the runner.
    pub fn build(mut self) -> Result<Runner, ConfigError> {
        let provider = self.provider.ok_or(ConfigError::NoProvider)?;
        if let Some(schema) = self.schema {
            let evaluator = match schema {
                SchemaSource::Inline(schema) => SchemaEvaluator::of(&schema, self.formats)?,
                SchemaSource::File(path) => SchemaEvaluator::from_file(&path, self.formats)?,
            };
            self.evaluators.insert(0, Arc::new(evaluator));
        }
        self.template.schema = self.evaluators.iter().find_map(|e| e.schema());
        self.template.scoring = self.evaluators.iter().any(|e| e.scoring());
        self.template.model = provider.name().to_owned();
        self.retry.max_retries = self.template.policy.transport_retries;
        let mut proposers = vec![provider];
        proposers.extend(self.fallbacks);
        for name in self.template.parameters.keys() {
            if let Some(instead) = redraft_core::reserved_parameter(name) {
                let message = format!("is set by redraft: {instead}");
                return Err(ConfigError::Invalid { key: format!("parameters.{name}"), message });
            }
            if let Some(why) = proposers.iter().find_map(|p| p.refused_parameter(name)) {
                return Err(ConfigError::Invalid { key: format!("parameters.{name}"), message: why });
            }
        }
        let runner = Runner {
            proposers,
            evaluators: self.evaluators,
            template: self.template,
            retry: self.retry,
            observers: self.observers,
            artifact_source: self.artifact_source,
        };
        // Check the plan (policy, templates, budget vs price) once now.
        Engine::check(&runner.template)?;
        Ok(runner)
    }
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

/// What calling the proposer came to, short of a provider error.
#[derive(Debug)]
enum Proposal {
    Answered(ChatResponse),
    /// The attempt's time ran out during a call.
    TimedOut,
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

    /// The primary proposer's `provider/model` name.
    pub fn model_name(&self) -> &str {
        self.template.model.as_str()
    }

    /// The plan a run of `task` follows.
    pub fn plan(&self, task: Task) -> Plan {
        Plan { task, ..self.template.clone() }
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
    pub async fn run_with(&self, task: Task, options: RunOptions) -> Result<RunResult, ConfigError> {
        Ok(self.run_inner(task, options).await?.result)
    }

    pub(crate) async fn run_inner(&self, task: Task, options: RunOptions) -> Result<Finished, ConfigError> {
        let run_id = options.run_id.clone().unwrap_or_else(new_run_id);
        let span = info_span!(
            "run",
            redraft.run_id = %run_id,
            redraft.model = %self.template.model,
            redraft.status = Empty,
            redraft.halted_because = Empty,
            redraft.iterations = Empty,
            redraft.usage.input_tokens = Empty,
            redraft.usage.output_tokens = Empty,
        );
        let finished = self.drive(run_id, task, options).instrument(span).await?;
        // After the run's span has closed: an observer's store may hand the current span to a
        // worker thread (SQLite does), which would keep the span open past the run's end.
        for o in &self.observers {
            o.run_finished(&finished.result).await;
        }
        Ok(finished)
    }

    async fn drive(&self, run_id: String, task: Task, options: RunOptions) -> Result<Finished, ConfigError> {
        let RunOptions { restore, answers, cancel, .. } = options;
        let context = task.context.clone().unwrap_or(Value::Null);
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
        let start = Instant::now();
        let deadline = engine.plan().policy.max_wall_time.map(|d| start + d);
        let mut provider_error = None;
        let decide = |engine: &mut Engine| {
            if cancel.is_cancelled() {
                engine.cancel();
            }
            engine.next(start.elapsed())
        };
        let mut next = decide(&mut engine);
        loop {
            let (iteration, request, proposer) = match next {
                Next::Halt(_) => break,
                Next::Attempt { iteration, request, proposer } => (iteration, request, proposer),
            };
            for o in &self.observers {
                o.attempt_started(&run_id, iteration).await;
            }
            let t0 = Instant::now();
            let started_at = crate::clock::now_rfc3339();
            let provider = self.proposers.get(proposer).or(self.proposers.first()).cloned();
            let span = info_span!(
                "attempt",
                redraft.run_id = %run_id,
                redraft.iteration = i64::from(iteration),
                redraft.proposer = int(proposer as u64),
                redraft.model = Empty,
                redraft.attempt.status = Empty,
                redraft.score = Empty,
                redraft.usage.input_tokens = Empty,
                redraft.usage.output_tokens = Empty,
            );
            let attempt = self
                .attempt(&run_id, provider, &engine, iteration, &request, &context, deadline)
                .instrument(span.clone());
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
            let wall_ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
            let finished_at = Some(crate::clock::now_rfc3339());
            let outcome = AttemptOutcome {
                iteration,
                request_chars: request.chars(),
                wall_ms,
                started_at: Some(started_at),
                finished_at,
                end,
            };
            let settled = engine.settle(outcome).is_some();
            // What comes next is known before the observers hear of this attempt, so they can
            // be told it is the last (a store then writes it with the result, in one write).
            next = decide(&mut engine);
            if settled && let Some(record) = engine.history().last() {
                let last = matches!(next, Next::Halt(_));
                span.record("redraft.model", record.model.as_deref());
                span.record("redraft.attempt.status", record.status.as_str());
                span.record("redraft.score", record.score.get());
                span.record("redraft.usage.input_tokens", int(record.tokens_in));
                span.record("redraft.usage.output_tokens", int(record.tokens_out));
                info!(
                    iteration,
                    status = record.status.as_str(),
                    score = record.score.get(),
                    issues = record.issues.len(),
                    "attempt finished"
                );
                for o in &self.observers {
                    if last {
                        o.last_attempt_finished(&run_id, record).await;
                    } else {
                        o.attempt_finished(&run_id, record).await;
                    }
                }
            }
        }
        let result = engine.finish(&run_id, start.elapsed());
        let span = Span::current();
        span.record("redraft.status", if result.succeeded() { "succeeded" } else { "failed" });
        span.record("redraft.halted_because", result.halted_because.as_str());
        span.record("redraft.iterations", i64::from(result.iterations));
        span.record("redraft.usage.input_tokens", int(result.metrics.tokens_in));
        span.record("redraft.usage.output_tokens", int(result.metrics.tokens_out));
        info!(status = ?result.status, halted_because = %result.halted_because, iterations = result.iterations, "run finished");
        Ok(Finished { result, provider_error })
    }

    /// One attempt: propose (with transport retries), extract, evaluate. `attempt_timeout`
    /// bounds the calls and the evaluation together; the waits between retries are not counted
    /// (a server's `Retry-After` is bounded by the wall time, see [`Runner::propose`]).
    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &self,
        run_id: &str,
        provider: Option<Arc<dyn ChatProvider>>,
        engine: &Engine,
        iteration: u32,
        request: &ChatRequest,
        context: &Value,
        deadline: Option<Instant>,
    ) -> Result<AttemptEnd, ProviderError> {
        let provider = provider.ok_or_else(|| ProviderError::Failed { message: "no proposer is configured".into() })?;
        let mut left = engine.plan().policy.attempt_timeout;
        let response = match self.propose(run_id, provider.as_ref(), request, &mut left, deadline).await {
            Ok(Proposal::Answered(response)) => response,
            Ok(Proposal::TimedOut) => return Ok(AttemptEnd::TimedOut),
            // The model's answer is too big: an attempt that failed, not a transport failure.
            Err(ProviderError::ResponseTooLarge { limit, .. }) => return Ok(AttemptEnd::ResponseTooLarge { limit }),
            Err(error) => return Err(error),
        };
        let judged = tokio::time::timeout(left, self.judge(engine, iteration, response, context)).await;
        Ok(judged.unwrap_or(AttemptEnd::TimedOut))
    }

    /// Find the artifact in an answer and evaluate it.
    async fn judge(&self, engine: &Engine, iteration: u32, response: ChatResponse, context: &Value) -> AttemptEnd {
        let candidate = match &self.artifact_source {
            None => engine.candidate(&response.text),
            Some(source) => match source.artifact(&response.text, iteration).await {
                Ok(artifact) => {
                    Candidate { artifact: Some(artifact), extraction: None, repairs: Vec::new(), issue: None }
                }
                Err(e) => {
                    Candidate { artifact: None, extraction: None, repairs: Vec::new(), issue: Some(e.to_issue()) }
                }
            },
        };
        let verdict = match &candidate.artifact {
            Some(artifact) => Some(self.evaluate(artifact, context, iteration).await),
            None => None,
        };
        AttemptEnd::Answered { response, candidate, verdict }
    }

    /// Call the proposer, retrying transport failures as the retry policy decides. Retries
    /// are not attempts. Each call may take what is `left` of the attempt's time, and uses it
    /// up; the waits between calls do not. A server's `Retry-After` is waited for when it ends
    /// before the wall-time `deadline` (without one, when it is within the policy's
    /// `max_delay`); a longer one ends the run as a provider error that names the wait.
    async fn propose(
        &self,
        run_id: &str,
        provider: &dyn ChatProvider,
        request: &ChatRequest,
        left: &mut Duration,
        deadline: Option<Instant>,
    ) -> Result<Proposal, ProviderError> {
        let mut retries = 0;
        loop {
            let t0 = Instant::now();
            let span = provider_call_span(provider.name(), request);
            let called = tokio::time::timeout(*left, provider.complete(request).instrument(span.clone())).await;
            *left = left.saturating_sub(t0.elapsed());
            let error = match called {
                Err(_) => {
                    span.record("error.type", "timeout").record("otel.status_code", "ERROR");
                    return Ok(Proposal::TimedOut);
                }
                Ok(Ok(response)) => {
                    if let Some(usage) = &response.usage {
                        span.record("gen_ai.usage.input_tokens", int(usage.input_tokens));
                        span.record("gen_ai.usage.output_tokens", int(usage.output_tokens));
                    }
                    return Ok(Proposal::Answered(response));
                }
                Ok(Err(error)) => error,
            };
            span.record("error.type", error_type(&error)).record("otel.status_code", "ERROR");
            let wall_time_left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            match self.retry.decide(retries, &error, fastrand::f64(), wall_time_left) {
                RetryDecision::Retry { after } => {
                    warn!(retry = retries + 1, after_ms = after.as_millis() as u64, %error, "transport failure; retrying");
                    for o in &self.observers {
                        o.transport_retry(run_id, provider.name(), &error).await;
                    }
                    tokio::time::sleep(after).await;
                    retries += 1;
                }
                RetryDecision::GiveUp => return Err(error),
                RetryDecision::WaitTooLong { wait, bound } => {
                    let url = error.url().unwrap_or(provider.name()).to_owned();
                    return Err(ProviderError::WaitTooLong { url, wait, bound });
                }
            }
        }
    }

    async fn evaluate(&self, artifact: &Value, context: &Value, iteration: u32) -> Verdict {
        let input = EvalInput { artifact, context, iteration };
        let mut outcomes = Vec::with_capacity(self.evaluators.len());
        for evaluator in &self.evaluators {
            let span = info_span!(
                "evaluator",
                redraft.evaluator = evaluator.name(),
                redraft.iteration = i64::from(iteration),
                redraft.score = Empty,
                redraft.passed = Empty,
                error.type = Empty,
                otel.status_code = Empty,
            );
            let outcome = evaluator.evaluate(input).instrument(span.clone()).await;
            match &outcome {
                Ok(verdict) => {
                    span.record("redraft.score", verdict.score.get()).record("redraft.passed", verdict.passed)
                }
                Err(_) => span.record("error.type", "evaluator_error").record("otel.status_code", "ERROR"),
            };
            let outcome = outcome.map(|mut verdict| {
                for issue in &mut verdict.issues {
                    issue.evaluator.get_or_insert_with(|| evaluator.name().into());
                }
                verdict
            });
            outcomes.push(outcome);
        }
        redraft_core::evaluator::combine(outcomes)
    }
}

/// The span of one call to the proposer, with the OpenTelemetry GenAI attributes known before
/// the answer (`provider/model` split into the provider and the model).
fn provider_call_span(name: &str, request: &ChatRequest) -> Span {
    let (system, model) = name.split_once('/').unwrap_or((name, name));
    info_span!(
        "provider call",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = system,
        gen_ai.system = system,
        gen_ai.request.model = model,
        gen_ai.request.temperature = request.temperature.map(f64::from),
        gen_ai.request.max_tokens = request.max_tokens.map(i64::from),
        redraft.iteration = i64::from(request.iteration),
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    )
}

/// A count as a span attribute: OpenTelemetry integers are `i64` (tracing-opentelemetry would
/// export a `u64` as text).
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A short, low-cardinality name for a provider failure (the `error.type` attribute).
fn error_type(error: &ProviderError) -> String {
    match error {
        ProviderError::Status { status, .. } | ProviderError::Unauthorized { status, .. } => status.to_string(),
        ProviderError::RateLimited { .. } => "429".into(),
        ProviderError::Connect { .. } => "connect".into(),
        ProviderError::Timeout { .. } => "timeout".into(),
        ProviderError::Cut { .. } => "cut".into(),
        ProviderError::InvalidResponse { .. } => "invalid_response".into(),
        ProviderError::ResponseTooLarge { .. } => "response_too_large".into(),
        ProviderError::WaitTooLong { .. } => "wait_too_long".into(),
        _ => "provider_error".into(),
    }
}
