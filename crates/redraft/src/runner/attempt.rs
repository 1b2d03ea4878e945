//! One attempt: the proposer called with transport retries, its answer read into an artifact,
//! the evaluators run on it. The retries and the evaluation are also what a single call
//! ([`Runner::call`]) and a submitted answer ([`super::SubmittedRun`]) go through.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redraft_core::{
    ArtifactRead, AttemptEnd, ChatProvider, ChatRequest, ChatResponse, Engine, EvalInput, Evaluator, ProviderError,
    RetryStep, Verdict,
};
use serde_json::Value;
use tokio::time::Instant;
use tracing::field::Empty;
use tracing::{Instrument, Span, info_span, warn};

use super::Runner;

impl Runner {
    /// One attempt: propose (with transport retries), extract, evaluate. `attempt_timeout`
    /// bounds the calls and the evaluation together; the waits between retries are not counted
    /// (a server's `Retry-After` is bounded by the wall time, see [`Runner::retrying`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn attempt(
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
        let span = || provider_call_span(provider.name(), Some(request));
        let called = self.retrying(run_id, provider.as_ref(), &mut left, deadline, span, || provider.complete(request));
        let response = match called.await {
            Ok(Some(response)) => response,
            Ok(None) => return Ok(AttemptEnd::TimedOut),
            // The model's answer is too big: an attempt that failed, not a transport failure.
            Err(ProviderError::ResponseTooLarge { limit, .. }) => return Ok(AttemptEnd::ResponseTooLarge { limit }),
            Err(error) => return Err(error),
        };
        let judged = tokio::time::timeout(left, self.judge(engine, iteration, response, context)).await;
        Ok(judged.unwrap_or(AttemptEnd::TimedOut))
    }

    /// Find the artifact in an answer and evaluate it.
    async fn judge(&self, engine: &Engine, iteration: u32, response: ChatResponse, context: &Value) -> AttemptEnd {
        let read = match &self.artifact_source {
            None => engine.read_artifact(&response.text),
            Some(source) => match source.artifact(&response.text, iteration).await {
                Ok(artifact) => {
                    ArtifactRead { artifact: Some(artifact), extraction: None, repairs: Vec::new(), issue: None }
                }
                Err(e) => {
                    ArtifactRead { artifact: None, extraction: None, repairs: Vec::new(), issue: Some(e.to_issue()) }
                }
            },
        };
        self.judged(read, response, context, iteration).await
    }

    /// An answer whose artifact is read: evaluated when there is one.
    pub(super) async fn judged(
        &self,
        read: ArtifactRead,
        response: ChatResponse,
        context: &Value,
        iteration: u32,
    ) -> AttemptEnd {
        let verdict = match &read.artifact {
            Some(artifact) => Some(verdict(&self.evaluators, artifact, context, iteration).await),
            None => None,
        };
        AttemptEnd::Answered { response, read, verdict }
    }

    /// Make a call to `provider`, retrying transport failures as the retry policy decides.
    /// Retries are not attempts. Each call may take what is `left` of the attempt's time, and
    /// uses it up; the waits between calls do not. A server's `Retry-After` is waited for when
    /// it ends before the wall-time `deadline` (without one, when it is within the policy's
    /// `max_delay`); a longer one ends the call as a provider error that names the wait.
    /// `Ok(None)`: the time ran out during a call.
    pub(super) async fn retrying<T, F, Fut>(
        &self,
        run_id: &str,
        provider: &dyn ChatProvider,
        left: &mut Duration,
        deadline: Option<Instant>,
        span: impl Fn() -> Span,
        mut call: F,
    ) -> Result<Option<T>, ProviderError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ProviderError>>,
        T: Usage,
    {
        let mut retries = 0;
        loop {
            let t0 = Instant::now();
            let span = span();
            let called = tokio::time::timeout(*left, call().instrument(span.clone())).await;
            *left = left.saturating_sub(t0.elapsed());
            let error = match called {
                Err(_) => {
                    span.record("error.type", "timeout").record("otel.status_code", "ERROR");
                    return Ok(None);
                }
                Ok(Ok(answer)) => {
                    if let Some((input, output)) = answer.tokens() {
                        span.record("gen_ai.usage.input_tokens", int(input));
                        span.record("gen_ai.usage.output_tokens", int(output));
                    }
                    return Ok(Some(answer));
                }
                Ok(Err(error)) => error,
            };
            span.record("error.type", error_type(&error)).record("otel.status_code", "ERROR");
            let wall_time_left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            match self.retry.step(retries, &error, fastrand::f64(), wall_time_left) {
                RetryStep::Retry { after } => {
                    warn!(retry = retries + 1, after_ms = after.as_millis() as u64, %error, "transport failure; retrying");
                    for o in &self.observers {
                        o.transport_retry(run_id, provider.name(), &error).await;
                    }
                    tokio::time::sleep(after).await;
                    retries += 1;
                }
                RetryStep::GiveUp => return Err(error),
                RetryStep::WaitTooLong { wait, bound } => {
                    let url = error.url().unwrap_or(provider.name()).to_owned();
                    return Err(ProviderError::WaitTooLong { url, wait, bound });
                }
            }
        }
    }
}

/// What a call's answer says of the tokens it used, for its span.
pub(super) trait Usage {
    fn tokens(&self) -> Option<(u64, u64)>;
}

impl Usage for ChatResponse {
    fn tokens(&self) -> Option<(u64, u64)> {
        self.usage.as_ref().map(|u| (u.input_tokens, u.output_tokens))
    }
}

impl<T> Usage for Option<T> {
    fn tokens(&self) -> Option<(u64, u64)> {
        None
    }
}

/// Run every evaluator on `artifact`, each in its span, and combine their verdicts: how an
/// attempt is judged, and how a check outside a run (MCP `validate`) judges too.
pub async fn verdict(evaluators: &[Arc<dyn Evaluator>], artifact: &Value, context: &Value, iteration: u32) -> Verdict {
    let cancel = redraft_core::CancelFlag::new();
    let input = EvalInput { artifact, context, iteration, cancel: &cancel };
    let mut outcomes = Vec::with_capacity(evaluators.len());
    for evaluator in evaluators {
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
            Ok(verdict) => span.record("redraft.score", verdict.score.get()).record("redraft.passed", verdict.passed),
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

/// The span of one call to the proposer, with the OpenTelemetry GenAI attributes known before
/// the answer (`provider/model` split into the provider and the model; the sampling of
/// `request`, when the call is one redraft wrote rather than a body it forwards).
pub(super) fn provider_call_span(name: &str, request: Option<&ChatRequest>) -> Span {
    let (system, model) = name.split_once('/').unwrap_or((name, name));
    info_span!(
        "provider call",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = system,
        gen_ai.system = system,
        gen_ai.request.model = model,
        gen_ai.request.temperature = request.and_then(|r| r.temperature).map(f64::from),
        gen_ai.request.max_tokens = request.and_then(|r| r.max_tokens).map(i64::from),
        redraft.iteration = request.map(|r| i64::from(r.iteration)),
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    )
}

/// A count as a span attribute: OpenTelemetry integers are `i64` (tracing-opentelemetry would
/// export a `u64` as text).
pub(super) fn int(n: u64) -> i64 {
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
