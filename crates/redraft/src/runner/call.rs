//! One call to the proposer outside a run — no loop, no check — with what a run's calls have:
//! the transport retries (`Retry-After` honoured within the wall time), `attempt_timeout` on
//! each call, and the spans. How `/v1/chat` and the OpenAI-compatible proxy's pass-through ask
//! a model.

use std::future::Future;

use redraft_core::{ChatProvider, ChatRequest, ChatResponse, Forwarded, ProviderError};
use serde_json::Value;
use tokio::time::Instant;

use super::Runner;
use super::attempt::provider_call_span;

impl Runner {
    /// Ask the primary proposer once. A transient failure is retried as in a run; the call's
    /// time is bounded by the policy's `attempt_timeout`, its waits by `max_wall_time`.
    pub async fn call(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let provider = self.primary()?;
        let (mut left, deadline) = self.bounds();
        let span = || provider_call_span(provider.name(), Some(request));
        let called = self.retrying("", provider, &mut left, deadline, span, || provider.complete(request)).await?;
        called.ok_or_else(|| self.timed_out())
    }

    /// Send an OpenAI chat completion body as it is to the primary proposer, when it speaks
    /// that API (`None` when it does not), retried and bounded as [`Runner::call`] is.
    pub async fn forward(&self, body: Value) -> Option<Result<Value, ProviderError>> {
        self.forwarding(|provider| {
            let body = body.clone();
            async move { provider.forward(body).await.transpose() }
        })
        .await
    }

    /// Like [`Runner::forward`], streaming the answer when the backend streams: opening the
    /// stream is retried and bounded; once events flow, they are passed on as they come.
    pub async fn forward_stream(&self, body: Value) -> Option<Result<Forwarded, ProviderError>> {
        self.forwarding(|provider| {
            let body = body.clone();
            async move { provider.forward_stream(body).await.transpose() }
        })
        .await
    }

    /// A forwarding `call` to the primary proposer, with the retries and bounds of a call:
    /// `Ok(None)` from it means the proposer does not forward.
    async fn forwarding<'a, T, F, Fut>(&'a self, call: F) -> Option<Result<T, ProviderError>>
    where
        F: Fn(&'a dyn ChatProvider) -> Fut,
        Fut: Future<Output = Result<Option<T>, ProviderError>>,
    {
        let provider = match self.primary() {
            Ok(provider) => provider,
            Err(e) => return Some(Err(e)),
        };
        let (mut left, deadline) = self.bounds();
        let span = || provider_call_span(provider.name(), None);
        match self.retrying("", provider, &mut left, deadline, span, || call(provider)).await {
            Ok(Some(answer)) => answer.map(Ok),
            Ok(None) => Some(Err(self.timed_out())),
            Err(e) => Some(Err(e)),
        }
    }

    /// The models the primary proposer's backend lists (`None`: it cannot list them). Asked
    /// once: a list is no answer worth a retry.
    pub async fn list_models(&self) -> Option<Result<Vec<String>, ProviderError>> {
        match self.primary() {
            Ok(provider) => provider.list_models().await,
            Err(e) => Some(Err(e)),
        }
    }

    /// Why the primary proposer refuses a backend parameter (`None`: it takes it).
    pub fn refused_parameter(&self, name: &str) -> Option<String> {
        self.proposers.first().and_then(|p| p.refused_parameter(name))
    }

    fn primary(&self) -> Result<&dyn ChatProvider, ProviderError> {
        self.proposers
            .first()
            .map(|p| p.as_ref())
            .ok_or_else(|| ProviderError::Failed { message: "no proposer is configured".into() })
    }

    /// The time one call may take, and when its waits must end.
    fn bounds(&self) -> (std::time::Duration, Option<Instant>) {
        let policy = &self.plan.policy;
        (policy.attempt_timeout, policy.max_wall_time.map(|d| Instant::now() + d))
    }

    fn timed_out(&self) -> ProviderError {
        ProviderError::Timeout { url: self.plan.model.clone() }
    }
}
