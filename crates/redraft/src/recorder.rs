//! Runs recorded as they happen: a [`Recorder`] writes every attempt to the store when it is
//! made, and [`start`]/[`resume`] are the one way every face begins or continues a stored run.

use std::sync::Arc;

use redraft_core::{AttemptRecord, RunObserver, RunResult, RunState, Store};
use tokio_util::sync::CancellationToken;

use crate::error::ConfigError;
use crate::runner::{RunOptions, new_run_id};
use crate::spec::{RunSpec, SpecSetup};

/// Writes each attempt and the result to a store as the run happens.
#[derive(Debug, Clone)]
pub struct Recorder {
    store: Arc<dyn Store>,
}

impl Recorder {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }
}

#[async_trait::async_trait]
impl RunObserver for Recorder {
    async fn attempt_finished(&self, run_id: &str, attempt: &AttemptRecord) {
        if let Err(e) = self.store.save_attempt(run_id, attempt).await {
            tracing::error!(%run_id, iteration = attempt.iteration, "cannot record the attempt: {e}");
        }
    }

    async fn run_finished(&self, result: &RunResult) {
        if let Err(e) = self.store.finish_run(result).await {
            tracing::error!(run_id = %result.run_id, "cannot record the result: {e}");
        }
    }
}

/// How to begin a run.
#[derive(Debug, Clone, Default)]
pub struct Start {
    /// By default, a new UUIDv7.
    pub run_id: Option<String>,
    pub observers: Vec<Arc<dyn RunObserver>>,
    pub cancel: CancellationToken,
}

/// Check `spec`, record it in `store` (when given) and run it to the end. Everything that can
/// be wrong with the spec is reported before the run is recorded or a model is called.
pub async fn start(
    spec: &RunSpec,
    setup: &SpecSetup<'_>,
    store: Option<Arc<dyn Store>>,
    how: Start,
) -> Result<RunResult, ConfigError> {
    let (mut builder, task) = spec.prepare(setup)?;
    for o in how.observers {
        builder = builder.observer(o);
    }
    let run_id = how.run_id.unwrap_or_else(new_run_id);
    if let Some(store) = &store {
        builder = builder.observer(Arc::new(Recorder::new(store.clone())));
        let value = serde_json::to_value(spec)
            .map_err(|e| ConfigError::Invalid { key: "spec".into(), message: e.to_string() })?;
        let runner = builder.build()?;
        store.insert_run(&run_id, &value, RunState::Running).await?;
        return runner
            .run_with(task, RunOptions { run_id: Some(run_id), cancel: how.cancel, restore: Vec::new() })
            .await;
    }
    builder.build()?.run_with(task, RunOptions { run_id: Some(run_id), cancel: how.cancel, restore: Vec::new() }).await
}

/// Continue a stored run from its last finished attempt, with the same spec (task, policy,
/// evaluators) and the feedback history rebuilt from the recorded attempts.
pub async fn resume(
    run_id: &str,
    setup: &SpecSetup<'_>,
    store: Arc<dyn Store>,
    how: Start,
) -> Result<RunResult, ConfigError> {
    let stored =
        store.run(run_id).await?.ok_or_else(|| redraft_core::StoreError::NotFound { run_id: run_id.to_owned() })?;
    if let Some(result) = stored.result.filter(|_| stored.state.is_finished()) {
        return Ok(result);
    }
    let spec: RunSpec = serde_json::from_value(stored.spec).map_err(|e| ConfigError::Invalid {
        key: "spec".into(),
        message: format!("the stored spec of run `{run_id}` cannot be read: {e}"),
    })?;
    let (mut builder, task) = spec.prepare(setup)?;
    for o in how.observers {
        builder = builder.observer(o);
    }
    builder = builder.observer(Arc::new(Recorder::new(store.clone())));
    let runner = builder.build()?;
    store.set_state(run_id, RunState::Running).await?;
    runner
        .run_with(task, RunOptions { run_id: Some(run_id.to_owned()), cancel: how.cancel, restore: stored.attempts })
        .await
}
