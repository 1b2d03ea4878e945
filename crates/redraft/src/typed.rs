//! Typed extraction: a Rust type in, a value of it out — or the whole history of why not.

use std::marker::PhantomData;
use std::sync::Arc;

use redraft_core::{Issue, Metrics, Policy, RunResult, Task, codes};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::check::{Check, Rejection};
use crate::error::ExtractionError;
use crate::model::Model;
use crate::runner::{RunOptions, Runner, RunnerBuilder};

/// Ask `model` for a `T`, checking each answer against `T`'s JSON Schema and feeding the
/// problems back, up to 3 attempts. See [`Extractor`] for more options.
pub async fn extract<T>(model: &Model, task: impl Into<Task>) -> Result<(T, Metrics), ExtractionError>
where
    T: DeserializeOwned + JsonSchema + Send + 'static,
{
    Extractor::<T>::new(model).run(task).await
}

/// The JSON Schema of `T`, as shown to the proposer and enforced.
pub fn schema_of<T: JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Bool(true))
}

/// Typed extraction with options: policy, extra checks on the typed value, settings.
#[derive(Debug)]
pub struct Extractor<T> {
    builder: RunnerBuilder,
    _type: PhantomData<fn() -> T>,
}

impl<T> Extractor<T>
where
    T: DeserializeOwned + JsonSchema + Send + 'static,
{
    /// Extract a `T` with `model`.
    pub fn new(model: &Model) -> Self {
        let builder = Runner::builder().model(model).schema(schema_of::<T>()).evaluator(Arc::new(Check::new(
            "deserialize",
            |artifact: &Value, _: &Value| match serde_json::from_value::<T>(artifact.clone()) {
                Ok(_) => Ok(()),
                Err(e) => Err(Rejection::from(Issue::new("", codes::DESERIALIZE, e.to_string()))),
            },
        )));
        Self { builder, _type: PhantomData }
    }

    /// Change the runner's settings (policy, temperature, templates, observers…).
    pub fn configure(mut self, f: impl FnOnce(RunnerBuilder) -> RunnerBuilder) -> Self {
        self.builder = f(self.builder);
        self
    }

    /// Attempts at most. By default, 3.
    pub fn max_iterations(self, n: u32) -> Self {
        self.configure(|b| b.max_iterations(n))
    }

    /// Replace the policy.
    pub fn policy(self, policy: Policy) -> Self {
        self.configure(|b| b.policy(policy))
    }

    /// Add a check on the typed value; its rejection is an ordinary failed attempt.
    pub fn check<F, E>(self, name: &str, f: F) -> Self
    where
        F: Fn(&T) -> Result<(), E> + Send + Sync + 'static,
        E: Into<Rejection>,
    {
        let check =
            Check::new(name, move |artifact: &Value, _: &Value| match serde_json::from_value::<T>(artifact.clone()) {
                // A value that does not deserialize is reported by the `deserialize` check.
                Err(_) => Ok(()),
                Ok(value) => f(&value).map_err(Into::into),
            });
        self.configure(|b| b.evaluator(Arc::new(check)))
    }

    /// Run the loop and return the typed value with the run's metrics.
    pub async fn run(self, task: impl Into<Task>) -> Result<(T, Metrics), ExtractionError> {
        let runner = self.builder.build()?;
        let finished = runner.run_inner(task.into(), RunOptions::default()).await?;
        let RunResult { status, artifact, metrics, history, halted_because, iterations, escalation, .. } =
            finished.result;
        if let Some(source) = finished.provider_error {
            return Err(ExtractionError::Provider { source, history, metrics });
        }
        if status == redraft_core::RunStatus::Succeeded
            && let Some(Ok(value)) = artifact.map(serde_json::from_value::<T>)
        {
            return Ok((value, metrics));
        }
        let raw_output = history.last().map(|a| a.raw.clone()).unwrap_or_default();
        Err(ExtractionError::MaxRetriesExceeded {
            attempts: iterations,
            halted_because,
            history,
            raw_output,
            metrics,
            escalation,
        })
    }
}
