//! What every request shares: the config, the store, the executor (which stores runs before
//! they are acknowledged, executes them in its slots and claims queued ones), the runs
//! executing here (with their events and cancel tokens), the counters and the shutdown signal.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use redraft::config::Config;
use redraft::core::{RunObserver, RunResult, Store};
use redraft::eval::kind::Kinds;
use redraft::guard::{Face, Guard};
use redraft::limits::Files;
use redraft::queue::{AcceptError, Accepted, Executor, RunHooks, SetupParts, Worker};
use redraft::{ConfigError, RunError, RunSpec, SpecSetup};
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::events::{LiveObserver, LiveRun, RunEvent};
use crate::metrics::{Metrics, MetricsObserver, ShedReason};

/// The server's shared state. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn Store>,
    /// Accepts runs into the store and executes them (none under `--no-worker`).
    executor: Arc<Executor>,
    hooks: Arc<ServerHooks>,
    tokens: Vec<String>,
    shutdown: CancellationToken,
    backend_models: crate::models::BackendModels,
    /// `POST /v1/validate` checks at once: each takes a blocking thread and a core.
    checks: Arc<tokio::sync::Semaphore>,
}

/// What the executor tells the server about the runs it executes: they are live (events,
/// cancel) while they run, and counted.
#[derive(Debug, Default)]
struct ServerHooks {
    live: Mutex<HashMap<String, Arc<LiveRun>>>,
    metrics: Arc<Metrics>,
}

impl ServerHooks {
    fn live_map(&self) -> MutexGuard<'_, HashMap<String, Arc<LiveRun>>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RunHooks for ServerHooks {
    fn started(&self, run_id: &str) -> (Vec<Arc<dyn RunObserver>>, CancellationToken) {
        let live = LiveRun::new(run_id.to_owned());
        self.live_map().insert(run_id.to_owned(), live.clone());
        let cancel = live.cancel.clone();
        (vec![Arc::new(LiveObserver(live)), Arc::new(MetricsObserver(self.metrics.clone()))], cancel)
    }

    fn ended(&self, run_id: &str, outcome: &Result<RunResult, RunError>) {
        let Some(live) = redraft::queue::remove_run(&mut self.live_map(), run_id) else { return };
        match outcome {
            // Already told by the runner, unless the stored run had finished before.
            Ok(result) if !live.is_finished() => live.push(RunEvent::RunFinished(Arc::new(result.clone()))),
            Ok(_) => {}
            Err(e) => {
                tracing::error!(%run_id, "the run could not go on: {e}");
                live.push(RunEvent::Error { run_id: run_id.to_owned(), message: e.to_string() });
            }
        }
    }

    fn claimed(&self, run_id: &str, takeover: bool) {
        if takeover {
            self.metrics.lease_takeover();
            tracing::warn!(%run_id, "took over a run whose worker stopped renewing its lease");
        }
    }
}

impl AppState {
    /// The state of a server with `config`, recording runs in `store`, accepting `tokens`
    /// (none: no authentication). The kinds are loaded from `kinds_dir` when it exists.
    pub fn new(config: Config, store: Arc<dyn Store>, tokens: Vec<String>) -> Result<Self, ConfigError> {
        Self::in_dir(config, store, tokens, working_dir())
    }

    /// Like [`AppState::new`], with `workdir` as the working directory of `exec:` commands and
    /// the root of `schema:` paths (by default, the current directory). Needs a tokio runtime:
    /// the server's worker renews its leases and claims queued runs in the background (no
    /// run is executed here with `max_concurrent_runs = 0`).
    pub fn in_dir(
        config: Config,
        store: Arc<dyn Store>,
        tokens: Vec<String>,
        workdir: PathBuf,
    ) -> Result<Self, ConfigError> {
        Self::build(config, store, tokens, workdir, None)
    }

    /// Like [`AppState::new`], its runs taking their descriptors from `files`, which they
    /// share with the server's connections.
    pub fn sharing_files(
        config: Config,
        store: Arc<dyn Store>,
        tokens: Vec<String>,
        files: Arc<Files>,
    ) -> Result<Self, ConfigError> {
        Self::build(config, store, tokens, working_dir(), Some(files))
    }

    fn build(
        config: Config,
        store: Arc<dyn Store>,
        tokens: Vec<String>,
        workdir: PathBuf,
        files: Option<Arc<Files>>,
    ) -> Result<Self, ConfigError> {
        // However they were read, the tokens are secrets: no response or log shows them.
        for token in &tokens {
            redraft::core::secrets::register(token);
        }
        // And every credential the config names, however it was made, before any request.
        config.register_credentials();
        let kinds = if config.kinds_dir.is_dir() { Some(Arc::new(Kinds::load(&config.kinds_dir)?)) } else { None };
        let guard = Arc::new(Guard::network(Face::Http, &config.server)?);
        let slots = config.server.max_concurrent_runs;
        let worker = Worker::start(store.clone(), &config.queue);
        let ceilings = config.server.ceilings.clone();
        let parts = SetupParts { config: Arc::new(config), workdir, guard, ceilings, kinds };
        let hooks = Arc::new(ServerHooks::default());
        let executor = Executor::new(worker, parts, hooks.clone(), slots);
        // Before the claim loop starts: every run it claims counts against the budget.
        if let Some(files) = files {
            executor.share_files(files);
        }
        // Execute queued runs (and those of workers that died) whenever a slot is free.
        tokio::spawn(executor.clone().claim_loop());
        Ok(Self {
            inner: Arc::new(Inner {
                store,
                executor,
                hooks,
                tokens: tokens.into_iter().map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).collect(),
                shutdown: CancellationToken::new(),
                backend_models: crate::models::BackendModels::default(),
                checks: Arc::new(tokio::sync::Semaphore::new(checks_at_once())),
            }),
        })
    }

    pub fn config(&self) -> &Config {
        &self.inner.executor.parts().config
    }

    /// A place among the `POST /v1/validate` checks running at once, if one is free.
    pub(crate) fn check_slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.inner.checks.clone().try_acquire_owned().ok()
    }

    /// The OpenAI-compatible backends' own model lists, as last asked.
    pub(crate) fn backend_models(&self) -> &crate::models::BackendModels {
        &self.inner.backend_models
    }

    pub fn store(&self) -> Arc<dyn Store> {
        self.inner.store.clone()
    }

    pub fn kinds(&self) -> Option<&Arc<Kinds>> {
        self.inner.executor.parts().kinds.as_ref()
    }

    pub fn tokens(&self) -> &[String] {
        &self.inner.tokens
    }

    pub fn metrics(&self) -> &Metrics {
        &self.inner.hooks.metrics
    }

    pub(crate) fn shared_metrics(&self) -> Arc<Metrics> {
        self.inner.hooks.metrics.clone()
    }

    /// Accepts, executes and waits for runs.
    pub fn executor(&self) -> &Arc<Executor> {
        &self.inner.executor
    }

    /// Fires when the server begins shutting down.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    /// What requests may ask for.
    pub fn guard(&self) -> &Guard {
        &self.inner.executor.parts().guard
    }

    /// How runs of this face are set up: the guard (allow-lists, no agents), the server's
    /// ceilings.
    pub fn setup(&self) -> SpecSetup<'_> {
        self.inner.executor.setup()
    }

    /// A run executing in this process.
    pub fn live(&self, run_id: &str) -> Option<Arc<LiveRun>> {
        self.inner.hooks.live_map().get(run_id).cloned()
    }

    /// Runs executing in this process.
    pub fn in_flight(&self) -> usize {
        self.inner.hooks.live_map().len()
    }

    /// Bring the queue gauges up to date (before `/metrics` is rendered).
    pub async fn refresh_queue_metrics(&self) {
        match self.inner.store.queue_depth().await {
            Ok(depth) => self.metrics().set_queue_depth(depth),
            Err(e) => tracing::warn!("cannot count the queued runs: {e}"),
        }
        self.metrics().set_runs_waiting(u64::try_from(self.inner.executor.waiting()).unwrap_or(u64::MAX));
    }

    /// Store a run and start it here when a slot is free, or queue it: 503 with `Retry-After`
    /// when the queue is full, the store cannot take it, or the server is stopping.
    pub async fn accept(&self, run_id: &str, spec: &RunSpec) -> Result<Accepted, ApiError> {
        if self.inner.shutdown.is_cancelled() {
            self.metrics().run_shed(ShedReason::ShuttingDown);
            return Err(ApiError::shutting_down());
        }
        match self.inner.executor.accept(run_id, spec).await {
            Ok(accepted) => Ok(accepted),
            Err(AcceptError::Busy(message)) => {
                let reason =
                    if self.inner.executor.is_stopping() { ShedReason::ShuttingDown } else { ShedReason::QueueFull };
                self.metrics().run_shed(reason);
                Err(ApiError::busy(message, 2))
            }
            Err(AcceptError::Store(e)) if e.is_transient() => {
                self.metrics().run_shed(ShedReason::Overloaded);
                Err(ApiError::overloaded(&e))
            }
            Err(AcceptError::Config(e)) => Err(e.into()),
            Err(AcceptError::Store(e)) => Err(e.into()),
            Err(e) => Err(ApiError::internal(e.to_string())),
        }
    }
}

impl AppState {
    /// A slot for one model call outside a run (`/v1/chat`, the proxy's pass-through): 503 with
    /// `Retry-After` when none frees within `[queue] max_wait`, or the server is stopping.
    pub async fn call_slot(&self) -> Result<redraft::queue::CallSlot, ApiError> {
        if self.inner.shutdown.is_cancelled() {
            self.metrics().run_shed(ShedReason::ShuttingDown);
            return Err(ApiError::shutting_down());
        }
        self.inner.executor.call_slot().await.map_err(|e| {
            self.metrics().run_shed(ShedReason::QueueFull);
            ApiError::busy(e.to_string(), 2)
        })
    }
}

/// The directory `exec:` commands run in and `schema:` paths start from, by default.
fn working_dir() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."))
}

/// How many `POST /v1/validate` checks run at once: two per core, so that a flood of hostile
/// checks takes no more than the machine's cores and leaves runs their threads.
pub(crate) fn checks_at_once() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).saturating_mul(2)
}
