//! What every request shares: the config, the store, the kinds, the runs in flight (with their
//! events and cancel tokens), the run slots, the counters and the shutdown signal.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use redraft::config::Config;
use redraft::core::{RunObserver, RunResult, Store};
use redraft::eval::kind::Kinds;
use redraft::guard::{Face, Guard};
use redraft::recorder::{self, Start};
use redraft::{ConfigError, RunSpec, SpecSetup};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::error::ApiError;
use crate::events::{LiveObserver, LiveRun, RunEvent};
use crate::metrics::{Metrics, MetricsObserver};

/// The server's shared state. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: Arc<Config>,
    store: Arc<dyn Store>,
    kinds: Option<Arc<Kinds>>,
    workdir: PathBuf,
    /// What requests may ask for: the `[server]` allow-lists, parsed once at start.
    guard: Arc<Guard>,
    tokens: Vec<String>,
    slots: Arc<Semaphore>,
    live: Mutex<HashMap<String, Arc<LiveRun>>>,
    metrics: Arc<Metrics>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

/// What a background run does.
#[derive(Debug)]
pub enum Job {
    /// Start a new run of this spec.
    Start(Box<RunSpec>),
    /// Continue a stored run from its last finished attempt.
    Resume,
}

impl AppState {
    /// The state of a server with `config`, recording runs in `store`, accepting `tokens`
    /// (none: no authentication). The kinds are loaded from `kinds_dir` when it exists.
    pub fn new(config: Config, store: Arc<dyn Store>, tokens: Vec<String>) -> Result<Self, ConfigError> {
        let workdir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Self::in_dir(config, store, tokens, workdir)
    }

    /// Like [`AppState::new`], with `workdir` as the working directory of `exec:` commands and
    /// the root of `schema:` paths (by default, the current directory).
    pub fn in_dir(
        config: Config,
        store: Arc<dyn Store>,
        tokens: Vec<String>,
        workdir: PathBuf,
    ) -> Result<Self, ConfigError> {
        let kinds = if config.kinds_dir.is_dir() { Some(Arc::new(Kinds::load(&config.kinds_dir)?)) } else { None };
        let slots = Arc::new(Semaphore::new(config.server.max_concurrent_runs.max(1)));
        let guard = Arc::new(Guard::network(Face::Http, &config.server)?);
        Ok(Self {
            inner: Arc::new(Inner {
                config: Arc::new(config),
                store,
                kinds,
                workdir,
                guard,
                tokens: tokens.into_iter().map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).collect(),
                slots,
                live: Mutex::new(HashMap::new()),
                metrics: Arc::new(Metrics::default()),
                tracker: TaskTracker::new(),
                shutdown: CancellationToken::new(),
            }),
        })
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    pub fn store(&self) -> Arc<dyn Store> {
        self.inner.store.clone()
    }

    pub fn kinds(&self) -> Option<&Arc<Kinds>> {
        self.inner.kinds.as_ref()
    }

    pub fn tokens(&self) -> &[String] {
        &self.inner.tokens
    }

    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// Fires when the server begins shutting down.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    /// The background runs (closed and waited for on shutdown).
    pub fn tracker(&self) -> &TaskTracker {
        &self.inner.tracker
    }

    /// What requests may ask for.
    pub fn guard(&self) -> &Guard {
        &self.inner.guard
    }

    /// How runs of this face are set up: the guard (allow-lists, no agents), the server's
    /// ceilings.
    pub fn setup(&self) -> SpecSetup<'_> {
        let config = self.config();
        SpecSetup {
            config,
            workdir: self.inner.workdir.clone(),
            guard: self.inner.guard.clone(),
            ceilings: config.server.ceilings.clone(),
            kinds: self.inner.kinds.clone(),
        }
    }

    fn live_map(&self) -> MutexGuard<'_, HashMap<String, Arc<LiveRun>>> {
        self.inner.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A run in flight in this process.
    pub fn live(&self, run_id: &str) -> Option<Arc<LiveRun>> {
        self.live_map().get(run_id).cloned()
    }

    /// Runs in flight in this process.
    pub fn in_flight(&self) -> usize {
        self.live_map().len()
    }

    /// Take a run slot now: 503 with `Retry-After` when all are taken or the server is stopping.
    pub fn slot(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(ApiError::shutting_down());
        }
        self.inner
            .slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| ApiError::busy(self.config().server.max_concurrent_runs, 2))
    }

    /// Check a spec as a run would, without running anything: 400/403/404 when it cannot run.
    pub fn check(&self, spec: &RunSpec) -> Result<(), ApiError> {
        spec.prepare(&self.setup())?.0.build()?;
        Ok(())
    }

    /// Run `job` in the background as `run_id`, recorded in the store, holding `slot` until it
    /// halts. The run is live (events, cancel) from now until it halts.
    pub fn launch(
        &self,
        run_id: String,
        job: Job,
        slot: OwnedSemaphorePermit,
    ) -> JoinHandle<Result<RunResult, ConfigError>> {
        let live = LiveRun::new(run_id.clone());
        self.live_map().insert(run_id.clone(), live.clone());
        let state = self.clone();
        let observers: Vec<Arc<dyn RunObserver>> =
            vec![Arc::new(LiveObserver(live.clone())), Arc::new(MetricsObserver(self.inner.metrics.clone()))];
        let how = Start { run_id: Some(run_id.clone()), observers, cancel: live.cancel.clone() };
        let task = async move {
            let setup = state.setup();
            let store = state.store();
            let outcome = match job {
                Job::Start(spec) => recorder::start(&spec, &setup, Some(store), how).await,
                Job::Resume => recorder::resume(&run_id, &setup, store, how).await,
            };
            match &outcome {
                // Already told by the runner, unless the stored run had finished before.
                Ok(result) => live.push(RunEvent::RunFinished(Box::new(result.clone()))),
                Err(e) => {
                    tracing::error!(%run_id, "the run could not go on: {e}");
                    live.push(RunEvent::Error { run_id: run_id.clone(), message: e.to_string() });
                }
            }
            state.live_map().remove(&run_id);
            drop(slot);
            outcome
        };
        self.inner.tracker.spawn(task.in_current_span())
    }

    /// Resume, in the background, every run the store holds as unfinished (a crash left them
    /// `running`). Each waits for a run slot.
    pub async fn resume_unfinished(&self) -> Result<usize, ConfigError> {
        let ids = self.inner.store.unfinished().await?;
        for run_id in &ids {
            tracing::info!(%run_id, "resuming a run left unfinished");
            let state = self.clone();
            let run_id = run_id.clone();
            self.inner.tracker.spawn(async move {
                let Ok(slot) = state.inner.slots.clone().acquire_owned().await else { return };
                if state.inner.shutdown.is_cancelled() {
                    return;
                }
                let _ = state.launch(run_id, Job::Resume, slot).await;
            });
        }
        Ok(ids.len())
    }
}
