//! One attempt: the proposer called with transport retries, its answer read into an artifact,
//! the evaluators run on it. The retries and the evaluation are also what a single call
//! ([`Runner::call`]) and a submitted answer ([`super::SubmittedRun`]) go through.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redraft_core::{
    ArtifactRead, AttemptEnd, CancelFlag, ChatProvider, ChatRequest, ChatResponse, Engine, Issue, ProviderError,
    RetryStep, Verdict, codes,
};
use serde_json::Value;
use tokio::time::Instant;
use tracing::field::Empty;
use tracing::{Instrument, Span, info_span, warn};

use super::Runner;
use super::verdict::{CancelOnDrop, checked, off_thread};

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
        context: &Arc<Value>,
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
        Ok(self.judge(engine, iteration, response, context, left).await)
    }

    /// Find the artifact in an answer and evaluate it, within `budget` (what the call left of
    /// the attempt's time). Reading the answer and the evaluators that compute run off the
    /// threads that serve requests, and are told to stop when the budget runs out or this
    /// future is dropped (the run was cancelled or ran out of wall time). An answer not checked
    /// within the budget is rejected unchecked with a `check_timeout` issue, and recorded.
    async fn judge(
        &self,
        engine: &Engine,
        iteration: u32,
        response: ChatResponse,
        context: &Arc<Value>,
        budget: Duration,
    ) -> AttemptEnd {
        let cancel = CancelFlag::new();
        let _stop = CancelOnDrop(cancel.clone());
        let deadline = Instant::now() + budget;
        let read = match &self.artifact_source {
            None => {
                let reader = engine.reader();
                let text = response.text.clone();
                match tokio::time::timeout_at(deadline, off_thread(move || reader.read(&text))).await {
                    Ok(Ok(read)) => read,
                    Ok(Err(message)) => {
                        let issue =
                            Issue::new("", codes::EVALUATOR_ERROR, format!("reading the answer failed: {message}"));
                        ArtifactRead { artifact: None, extraction: None, repairs: Vec::new(), issue: Some(issue) }
                    }
                    Err(_) => return unchecked(response, None, budget),
                }
            }
            Some(source) => match tokio::time::timeout_at(deadline, source.artifact(&response.text, iteration)).await {
                Ok(Ok(artifact)) => {
                    ArtifactRead { artifact: Some(artifact), extraction: None, repairs: Vec::new(), issue: None }
                }
                Ok(Err(e)) => {
                    ArtifactRead { artifact: None, extraction: None, repairs: Vec::new(), issue: Some(e.to_issue()) }
                }
                Err(_) => return unchecked(response, None, budget),
            },
        };
        self.judged_by(read, response, context, iteration, deadline, budget, &cancel).await
    }

    /// An answer whose artifact is read: evaluated when there is one, within `budget` (see
    /// [`Runner::judge`]).
    pub(super) async fn judged(
        &self,
        read: ArtifactRead,
        response: ChatResponse,
        context: &Arc<Value>,
        iteration: u32,
        budget: Duration,
    ) -> AttemptEnd {
        let cancel = CancelFlag::new();
        let _stop = CancelOnDrop(cancel.clone());
        self.judged_by(read, response, context, iteration, Instant::now() + budget, budget, &cancel).await
    }

    /// An answer whose artifact is read, evaluated by `deadline` under `cancel`.
    #[allow(clippy::too_many_arguments)]
    async fn judged_by(
        &self,
        mut read: ArtifactRead,
        response: ChatResponse,
        context: &Arc<Value>,
        iteration: u32,
        deadline: Instant,
        budget: Duration,
        cancel: &CancelFlag,
    ) -> AttemptEnd {
        // A known secret in the answer (a model or a command repeating a key) goes no further:
        // not to the evaluators (an `http:` validator's request, an `exec:` verifier's file).
        let response = ChatResponse { text: redraft_core::secrets::redact_string(response.text), ..response };
        if let Some(artifact) = read.artifact.as_mut() {
            redraft_core::secrets::redact_json(artifact);
        }
        let Some(artifact) = read.artifact.take().map(Arc::new) else {
            return AttemptEnd::Answered { response, read, verdict: None };
        };
        let checking = checked(&self.evaluators, &artifact, context, iteration, cancel);
        let verdict = tokio::time::timeout_at(deadline, checking).await;
        cancel.cancel();
        // The evaluators are done with it (unless some are still being stopped).
        read.artifact = Some(Arc::try_unwrap(artifact).unwrap_or_else(|shared| (*shared).clone()));
        match verdict {
            Ok(verdict) => AttemptEnd::Answered { response, read, verdict: Some(verdict) },
            Err(_) => unchecked(response, Some(read), budget),
        }
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

/// How an attempt ends when its answer could not be checked within `budget`: rejected
/// unchecked with a `check_timeout` issue, the answer kept (and the artifact, when it was read).
fn unchecked(response: ChatResponse, read: Option<ArtifactRead>, budget: Duration) -> AttemptEnd {
    let issue = Issue::new(
        "",
        codes::CHECK_TIMEOUT,
        format!(
            "the answer could not be checked in the {} left of the attempt (`attempt_timeout`) and was rejected unchecked: give a shorter, simpler answer",
            redraft_core::duration::format(budget)
        ),
    );
    match read {
        Some(read) if read.artifact.is_some() => {
            AttemptEnd::Answered { response, read, verdict: Some(Verdict::from_issues(vec![issue])) }
        }
        _ => {
            let read = ArtifactRead { artifact: None, extraction: None, repairs: Vec::new(), issue: Some(issue) };
            AttemptEnd::Answered { response, read, verdict: None }
        }
    }
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
