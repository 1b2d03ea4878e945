//! Runs recorded as they happen: a [`Recorder`] writes every attempt to the store when it is
//! made, as the worker holding the run. [`start`] (or [`start_prepared`], for a face that adds
//! evaluators of its own), [`run_built`], [`run_claimed`], [`resume`], [`answer`] and
//! [`answered`] are the one way every face begins or continues a stored run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redraft_core::{
    AttemptRecord, Claim, NewRun, OnEscalation, Origin, PersonReply, RunObserver, RunResult, RunState, Store,
    StoreError, StoredRun, Task,
};
use tokio_util::sync::CancellationToken;

use crate::error::{ConfigError, RunError};
use crate::queue::Worker;
use crate::runner::{RunOptions, Runner, new_run_id};
use crate::spec::{PreparedRun, RunSpec, SpecSetup};

/// Writes each attempt and the result to a store as the run happens, as the worker holding the
/// run: once another worker has taken the run over, its writes are refused and nothing is
/// recorded twice.
#[derive(Debug, Clone)]
pub struct Recorder {
    store: Arc<dyn Store>,
    worker_id: String,
    /// Set when the worker abandoned the run (lost its lease): nothing more is written.
    abandoned: Arc<AtomicBool>,
    /// Set here when the run halts, before its result is written (the run stops being
    /// `running` then: its worker must not take that for a lost lease).
    halted: Arc<AtomicBool>,
}

impl Recorder {
    pub fn new(store: Arc<dyn Store>, worker_id: impl Into<String>) -> Self {
        Self { store, worker_id: worker_id.into(), abandoned: Arc::default(), halted: Arc::default() }
    }

    /// The recorder of a run `worker` holds: it stops writing once the worker abandons it.
    pub fn holding(worker: &Worker, run_id: &str) -> Self {
        Self {
            store: worker.store().clone(),
            worker_id: worker.id().to_owned(),
            abandoned: worker.abandoned_flag(run_id),
            halted: worker.halted_flag(run_id),
        }
    }

    fn abandoned(&self, run_id: &str, what: &str) -> bool {
        let abandoned = self.abandoned.load(Ordering::SeqCst);
        if abandoned {
            tracing::warn!(%run_id, "{what} not recorded: this worker lost the run's lease");
        }
        abandoned
    }

    fn report(run_id: &str, what: &str, e: &StoreError) {
        match e {
            StoreError::LeaseLost { .. } => tracing::warn!(%run_id, "{what} not recorded: {e}"),
            _ => tracing::error!(%run_id, "cannot record {what}: {e}"),
        }
    }
}

#[async_trait::async_trait]
impl RunObserver for Recorder {
    async fn attempt_finished(&self, run_id: &str, attempt: &AttemptRecord) {
        if self.abandoned(run_id, "the attempt") {
            return;
        }
        if let Err(e) = self.store.save_attempt(run_id, &self.worker_id, attempt).await {
            Self::report(run_id, &format!("attempt {}", attempt.iteration), &e);
        }
    }

    /// Written by [`Recorder::run_finished`], with the result: a run that halts after one
    /// attempt costs the store one write, not two.
    async fn last_attempt_finished(&self, _run_id: &str, _attempt: &AttemptRecord) {}

    async fn run_finished(&self, result: &RunResult) {
        self.halted.store(true, Ordering::SeqCst);
        if self.abandoned(&result.run_id, "the result") {
            return;
        }
        if let Err(e) = self.store.finish_run(result, &self.worker_id).await {
            Self::report(&result.run_id, "the result", &e);
        }
    }
}

/// How to begin a run, or go on with one.
#[derive(Debug, Clone, Default)]
pub struct Start {
    /// By default, a new UUIDv7.
    pub run_id: Option<String>,
    pub observers: Vec<Arc<dyn RunObserver>>,
    pub cancel: CancellationToken,
    /// The attempts already made, to replay (a run that goes on after a person's answer).
    pub restore: Vec<AttemptRecord>,
    /// The answers people gave to the run's escalations.
    pub answers: Vec<PersonReply>,
}

/// Check `spec`, record it (when a worker is given: stored as running, held by that worker,
/// which renews its lease while it runs) and run it to the end. Everything that can be wrong
/// with the spec is reported before the run is recorded or a model is called.
pub async fn start(
    spec: &RunSpec,
    setup: &SpecSetup<'_>,
    worker: Option<&Arc<Worker>>,
    how: Start,
) -> Result<RunResult, RunError> {
    let Some(worker) = worker else {
        // Nobody could answer a run that is not kept: it fails as it would have.
        if spec.on_escalation == Some(OnEscalation::Await) {
            return Err(ConfigError::Invalid {
                key: "on_escalation".into(),
                message: "`await` keeps the run in the store until a person answers, and this run is not recorded: record it in a store (without `--no-store`) or use `fail`".into(),
            }
            .into());
        }
        let spec = RunSpec { on_escalation: Some(OnEscalation::Fail), ..spec.clone() };
        let PreparedRun { runner, task, .. } = spec.prepare(setup)?;
        return Ok(run_unrecorded(runner, task, how).await?);
    };
    // Prepared (so checked) once, before the run is stored; the runner that checked it runs it.
    let PreparedRun { runner, task, .. } = spec.prepare(setup)?;
    start_prepared(spec, setup.guard.face().into(), runner, task, worker, how).await
}

/// Record `spec`'s run, already prepared as `runner` (to which the face may have added
/// evaluators and observers) for a request from `origin`, as running and held by `worker`, and
/// run it to the end.
pub async fn start_prepared(
    spec: &RunSpec,
    origin: Origin,
    runner: Runner,
    task: Task,
    worker: &Arc<Worker>,
    mut how: Start,
) -> Result<RunResult, RunError> {
    let run_id = how.run_id.get_or_insert_with(new_run_id).clone();
    let value =
        serde_json::to_value(spec).map_err(|e| ConfigError::Invalid { key: "spec".into(), message: e.to_string() })?;
    let new = NewRun { run_id: &run_id, spec: &value, holder: Some(worker.lease()), max_queued: None, origin };
    worker.store().insert_run(&new).await?;
    let _hold = worker.hold(&run_id, how.cancel.clone());
    run_built(runner, task, worker, how).await
}

/// Run `task` with `runner`, recording nothing: how a face runs without a store.
pub async fn run_unrecorded(runner: Runner, task: Task, how: Start) -> Result<RunResult, ConfigError> {
    let Start { run_id, observers, cancel, restore, answers } = how;
    let runner = observers.into_iter().fold(runner, Runner::with_observer);
    runner.run_with(task, RunOptions { run_id, cancel, restore, answers }).await
}

/// Run `task` with `runner` (already built from the run's spec) as run `how.run_id`, already
/// stored and held by `worker`.
pub async fn run_built(runner: Runner, task: Task, worker: &Arc<Worker>, how: Start) -> Result<RunResult, RunError> {
    let run_id = how.run_id.clone().unwrap_or_else(new_run_id);
    let runner = runner.with_observer(Arc::new(Recorder::holding(worker, &run_id)));
    Ok(run_unrecorded(runner, task, Start { run_id: Some(run_id), ..how }).await?)
}

/// Give `reply` to run `how.run_id`, which awaits it and whose runner this process still has
/// (`redraft until --on-cap ask`), and go on with it, held by `worker`: the answer is recorded,
/// then the run continues from `how.restore` with `how.answers` (`reply` last among them).
pub async fn answered(
    runner: Runner,
    task: Task,
    reply: &PersonReply,
    worker: &Arc<Worker>,
    how: Start,
) -> Result<RunResult, RunError> {
    let run_id = how.run_id.clone().unwrap_or_default();
    worker.store().answer_run(&run_id, reply, Some(&worker.lease())).await?;
    let _hold = worker.hold(&run_id, how.cancel.clone());
    run_built(runner, task, worker, how).await
}

/// Continue run `how.run_id`, which `worker` has just claimed, from its last recorded attempt:
/// the same spec (task, policy, evaluators), the feedback history rebuilt from the recorded
/// attempts. A run that had already halted returns its stored result. `claimed`: the run as
/// read with the claim (else it is read here).
pub async fn run_claimed(
    run_id: &str,
    claimed: Option<Box<StoredRun>>,
    setup: &SpecSetup<'_>,
    worker: &Arc<Worker>,
    how: Start,
) -> Result<RunResult, RunError> {
    let stored = match claimed {
        Some(stored) => *stored,
        None => worker.store().run(run_id).await?.ok_or_else(|| StoreError::NotFound { run_id: run_id.to_owned() })?,
    };
    // Halted, or awaiting a person's answer (which puts it back to run).
    if let Some(result) = stored.result.filter(|_| stored.state.has_result()) {
        return Ok(result);
    }
    let spec: RunSpec = match serde_json::from_value(stored.spec) {
        Ok(spec) => spec,
        Err(e) => {
            let error = ConfigError::Invalid {
                key: "spec".into(),
                message: format!("the stored spec of run `{run_id}` cannot be read: {e}"),
            };
            return Err(fail_unrunnable(worker, run_id, stored.attempts, error).await.into());
        }
    };
    if spec.workspace.is_some() {
        // Its artifact is a working directory only `redraft until` reads: left as it is.
        return Err(agent_mode(run_id).into());
    }
    // Set up with the trust of the face the request came through, whoever continues it.
    let setup = setup.continuing(run_id, stored.origin)?;
    let PreparedRun { runner, task, .. } = match spec.prepare(&setup) {
        Ok(prepared) => prepared,
        Err(e) => return Err(fail_unrunnable(worker, run_id, stored.attempts, e).await.into()),
    };
    let how = Start { run_id: Some(run_id.to_owned()), restore: stored.attempts, answers: stored.answers, ..how };
    run_built(runner, task, worker, how).await
}

/// Continue a stored run from its last recorded attempt (`redraft runs resume`): claimed for
/// `worker` first, which is refused while another worker holds a live lease on it — unless
/// `force` (its holder is known to be dead), or that worker ran on this machine and its
/// process has exited.
pub async fn resume(
    run_id: &str,
    setup: &SpecSetup<'_>,
    worker: &Arc<Worker>,
    how: Start,
    force: bool,
) -> Result<RunResult, RunError> {
    let mut claim = worker.store().claim_run(run_id, &worker.lease(), force).await?;
    if let Claim::Held(holder) = &claim
        && crate::queue::holder_is_gone(&holder.worker_id)
    {
        // Its process on this machine is gone: nobody else can be running it.
        tracing::info!(%run_id, holder = %holder.worker_id, "the run's holder has exited: resuming it");
        claim = worker.store().claim_run(run_id, &worker.lease(), true).await?;
    }
    match claim {
        Claim::Held(holder) => {
            let left_ms = holder.lease_until_ms.saturating_sub(crate::clock::now_ms()).max(0);
            return Err(RunError::Held {
                run_id: run_id.to_owned(),
                worker_id: holder.worker_id,
                lease_left: redraft_core::duration::format(std::time::Duration::from_millis(
                    u64::try_from(left_ms).unwrap_or(0),
                )),
            });
        }
        Claim::Finished(_) | Claim::Claimed { .. } => {}
    }
    let _hold = worker.hold(run_id, how.cancel.clone());
    run_claimed(run_id, None, setup, worker, Start { run_id: Some(run_id.to_owned()), ..how }).await
}

/// A person's answer to the escalation of `stored`, a run awaiting one, giving it
/// `max_iterations` more attempts (by default as many as its spec gave it, else the config's):
/// checked against the setup's ceilings. Nothing is stored.
pub fn person_reply(
    stored: &StoredRun,
    answer: &str,
    max_iterations: Option<u32>,
    setup: &SpecSetup<'_>,
) -> Result<PersonReply, RunError> {
    let run_id = &stored.run_id;
    // A network face may not answer a run the user's own CLI started (it would go on with the
    // network's trust, or nowhere).
    setup.continuing(run_id, stored.origin)?;
    if stored.state != RunState::AwaitingInput {
        return Err(StoreError::NotAwaiting { run_id: run_id.clone(), state: stored.state }.into());
    }
    // The request as it was stored, read as the one request type (never by key).
    let spec = <RunSpec as serde::Deserialize>::deserialize(&stored.spec).map_err(|e| ConfigError::Invalid {
        key: "spec".into(),
        message: format!("the stored spec of run `{run_id}` cannot be read: {e}"),
    })?;
    if spec.workspace.is_some() {
        // Its artifact is a working directory only `redraft until` reads, and that process
        // asks its person itself: an answer from here would leave the run where nothing runs it.
        return Err(agent_mode(run_id).into());
    }
    let answer = answer.trim();
    if answer.is_empty() {
        return Err(ConfigError::Invalid {
            key: "answer".into(),
            message: "is empty: write what the run should know or do, or abort the run instead".into(),
        }
        .into());
    }
    let question = stored.result.as_ref().and_then(|r| r.escalation.as_ref()).map(|e| e.question.clone());
    let max_iterations = max_iterations.or(spec.max_iterations).unwrap_or(setup.config.policy.max_iterations);
    if max_iterations == 0 || max_iterations > setup.ceilings.max_iterations {
        return Err(ConfigError::Invalid {
            key: "max_iterations".into(),
            message: format!(
                "`{max_iterations}` attempts after the answer: give between 1 and {}",
                setup.ceilings.max_iterations.min(1000)
            ),
        }
        .into());
    }
    Ok(PersonReply {
        question: question.unwrap_or_default(),
        answer: answer.to_owned(),
        max_iterations,
        after_iteration: u32::try_from(stored.attempts.len()).unwrap_or(u32::MAX),
        answered_at: Some(redraft_core::time::rfc3339_ms(crate::clock::now_ms())),
    })
}

/// Give a person's answer to run `run_id`, awaiting one, and continue it in this process, held
/// by `worker` (`redraft runs answer`): from where it stopped, the answer given to the model.
pub async fn answer(
    run_id: &str,
    answer: &str,
    max_iterations: Option<u32>,
    setup: &SpecSetup<'_>,
    worker: &Arc<Worker>,
    how: Start,
) -> Result<RunResult, RunError> {
    let stored = worker.store().run(run_id).await?.ok_or_else(|| StoreError::NotFound { run_id: run_id.to_owned() })?;
    let reply = person_reply(&stored, answer, max_iterations, setup)?;
    worker.store().answer_run(run_id, &reply, Some(&worker.lease())).await?;
    let _hold = worker.hold(run_id, how.cancel.clone());
    run_claimed(run_id, None, setup, worker, Start { run_id: Some(run_id.to_owned()), ..how }).await
}

/// Why an agent-mode run (`redraft until`) is not continued here.
fn agent_mode(run_id: &str) -> ConfigError {
    ConfigError::Invalid {
        key: "workspace".into(),
        message: format!(
            "run `{run_id}` is an agent-mode loop: run `redraft until` again in its working directory to go on"
        ),
    }
}

/// A stored run that cannot be set up here (its spec no longer passes this process's config,
/// or cannot be read) halts as failed, with the reason as its error — rather than going back to
/// the queue to fail again on every worker. The error is returned for the caller to report.
async fn fail_unrunnable(
    worker: &Arc<Worker>,
    run_id: &str,
    history: Vec<AttemptRecord>,
    error: ConfigError,
) -> ConfigError {
    let result = failed_result(run_id, history, "cannot_run", &error.to_string());
    if let Err(e) = worker.store().finish_run(&result, worker.id()).await {
        Recorder::report(run_id, "the result", &e);
    }
    error
}

/// The result of a run that failed outside its loop, with `code` and `message` as its error.
pub(crate) fn failed_result(run_id: &str, history: Vec<AttemptRecord>, code: &str, message: &str) -> RunResult {
    use redraft_core::record::{Metrics, RunErrorReport, RunStatus, Validation};
    RunResult {
        run_id: run_id.to_owned(),
        status: RunStatus::Failed,
        halted_because: redraft_core::HaltReason::ProviderError,
        artifact: None,
        validation: Validation { score: redraft_core::Score::ZERO, passed: false, issues: Vec::new() },
        iterations: u32::try_from(history.len()).unwrap_or(u32::MAX),
        best_iteration: None,
        best_score: None,
        best_ref: None,
        artifact_sha256: None,
        metrics: Metrics::default(),
        history,
        escalation: None,
        error: Some(RunErrorReport { code: code.into(), message: message.into() }),
    }
}
