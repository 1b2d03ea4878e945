//! The queue of runs: a [`Worker`] holds leases on the runs it executes and renews them in the
//! background; an [`Executor`] accepts runs (stored before they are acknowledged), executes them
//! in its slots, and claims queued or abandoned runs from the store. `redraft serve` is an
//! executor (without slots under `--no-worker`), `redraft worker` is one without the HTTP face,
//! and `redraft run` is a worker holding the lease of its one run.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use redraft_core::{
    Ceilings, Claim, Lease, NewRun, RunObserver, RunResult, RunState, Store, StoreError, StoredRun, Task,
};
use redraft_eval::kind::Kinds;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::config::{Config, QueueConfig};
use crate::error::{ConfigError, RunError};
use crate::guard::Guard;
use crate::limits::{FileHeld, Files};
use crate::recorder::{self, Start};
use crate::runner::Runner;
use crate::spec::{PreparedRun, RunSpec, SpecSetup};

/// Runs claimed in one statement at most.
const CLAIM_BATCH: usize = 64;

/// This process as a worker: an id unique to it, and the leases it holds, renewed every
/// heartbeat in one store write. A run whose lease this worker lost (another worker took it
/// over after a pause longer than the lease) or whose cancellation was asked for has its
/// cancel token fired; the store refuses its writes once it is lost.
pub struct Worker {
    id: String,
    store: Arc<dyn Store>,
    ttl: Duration,
    held: Mutex<HashMap<String, Hold>>,
    /// Milliseconds (on this process's monotonic clock, from `epoch`) of the last renewal
    /// that reached the store.
    renewed_ms: AtomicI64,
    epoch: Instant,
    stop: CancellationToken,
}

#[derive(Debug)]
struct Hold {
    cancel: CancellationToken,
    since: Instant,
    /// Set when the lease is lost or can no longer be renewed: the run stops and writes
    /// nothing more (a cancelled result would be a lie; another worker resumes it).
    abandoned: Arc<AtomicBool>,
    /// Set when the run has halted and its result is being written: a renewal that no longer
    /// finds it running is then no loss.
    halted: Arc<AtomicBool>,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker").field("id", &self.id).field("ttl", &self.ttl).finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker on `store` with a new id; its heartbeat runs until it is dropped or stopped.
    /// Needs a tokio runtime.
    pub fn start(store: Arc<dyn Store>, settings: &QueueConfig) -> Arc<Self> {
        let worker = Arc::new(Self {
            id: new_worker_id(),
            store,
            ttl: settings.lease,
            held: Mutex::new(HashMap::new()),
            renewed_ms: AtomicI64::new(0),
            epoch: Instant::now(),
            stop: CancellationToken::new(),
        });
        let weak = Arc::downgrade(&worker);
        let stop = worker.stop.clone();
        tokio::spawn(heartbeat(weak, settings.heartbeat(), stop));
        worker
    }

    /// `host:pid:random`, unique to this process.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The lease this worker claims runs with.
    pub fn lease(&self) -> Lease<'_> {
        Lease { worker_id: &self.id, ttl: self.ttl }
    }

    /// Stop renewing (the leases then expire, and other workers take the runs over).
    pub fn stop(&self) {
        self.stop.cancel();
    }

    fn held(&self) -> MutexGuard<'_, HashMap<String, Hold>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Watch a run this worker just inserted or claimed: `cancel` fires when its cancellation is
    /// asked for or its lease is lost. Watched until the returned guard is dropped.
    pub fn hold(self: &Arc<Self>, run_id: &str, cancel: CancellationToken) -> HoldGuard {
        let abandoned = Arc::new(AtomicBool::new(false));
        let halted = Arc::new(AtomicBool::new(false));
        self.held()
            .insert(run_id.to_owned(), Hold { cancel, since: Instant::now(), abandoned: abandoned.clone(), halted });
        HoldGuard { worker: Arc::downgrade(self), run_id: run_id.to_owned(), abandoned }
    }

    /// The flag a recorder sets when the run has halted, before it writes the result.
    pub fn halted_flag(&self, run_id: &str) -> Arc<AtomicBool> {
        self.held().get(run_id).map(|h| h.halted.clone()).unwrap_or_default()
    }

    /// The flag set when this worker abandons `run_id` (its lease was lost): a recorder checks
    /// it before every write. A run not held here gets a flag of its own, never set.
    pub fn abandoned_flag(&self, run_id: &str) -> Arc<AtomicBool> {
        self.held().get(run_id).map(|h| h.abandoned.clone()).unwrap_or_default()
    }

    /// Runs this worker holds.
    pub fn holding(&self) -> Vec<String> {
        self.held().keys().cloned().collect()
    }

    /// Of `run_ids`, those this worker does not hold (one lookup each).
    pub fn not_holding<'a>(&self, run_ids: impl IntoIterator<Item = &'a String>) -> Vec<String> {
        let held = self.held();
        run_ids.into_iter().filter(|id| !held.contains_key(id.as_str())).cloned().collect()
    }

    /// Renew every lease once; fire the tokens of runs lost or to be cancelled.
    async fn renew(&self) {
        let asked = Instant::now();
        let ids = self.holding();
        if ids.is_empty() {
            self.renewed_ms.store(self.ms_since_epoch(asked), Ordering::Relaxed);
            return;
        }
        match self.store.renew(&self.lease(), &ids).await {
            Ok(renewal) => {
                self.renewed_ms.store(self.ms_since_epoch(asked), Ordering::Relaxed);
                let held = self.held();
                let renewed: std::collections::HashSet<&String> = renewal.held.iter().collect();
                let cancel: std::collections::HashSet<&String> = renewal.cancel.iter().collect();
                for (run_id, hold) in held.iter() {
                    if cancel.contains(run_id) {
                        tracing::info!(%run_id, "cancel requested: cancelling the run");
                        hold.cancel.cancel();
                    } else if hold.since < asked && !renewed.contains(run_id) && !hold.halted.load(Ordering::SeqCst) {
                        tracing::warn!(%run_id, worker = %self.id, "the lease on this run was lost: another worker resumes it");
                        hold.abandoned.store(true, Ordering::SeqCst);
                        hold.cancel.cancel();
                    }
                }
            }
            Err(e) => {
                let last = Duration::from_millis(u64::try_from(self.renewed_ms.load(Ordering::Relaxed)).unwrap_or(0));
                let since = asked.saturating_duration_since(self.epoch + last);
                tracing::warn!(worker = %self.id, "cannot renew the leases: {e}");
                if since >= self.ttl {
                    // Other workers may be taking these runs over: stop working on them.
                    for (run_id, hold) in self.held().iter() {
                        tracing::warn!(%run_id, "no lease renewal for {} s: abandoning the run", since.as_secs());
                        hold.abandoned.store(true, Ordering::SeqCst);
                        hold.cancel.cancel();
                    }
                }
            }
        }
    }

    fn ms_since_epoch(&self, t: Instant) -> i64 {
        i64::try_from(t.saturating_duration_since(self.epoch).as_millis()).unwrap_or(i64::MAX)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Watches a held run until dropped.
#[derive(Debug)]
pub struct HoldGuard {
    worker: Weak<Worker>,
    run_id: String,
    abandoned: Arc<AtomicBool>,
}

impl HoldGuard {
    /// Whether the worker abandoned the run (its lease was lost).
    pub fn abandoned(&self) -> bool {
        self.abandoned.load(Ordering::SeqCst)
    }
}

impl Drop for HoldGuard {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.upgrade() {
            remove_run(&mut worker.held(), &self.run_id);
        }
    }
}

async fn heartbeat(worker: Weak<Worker>, every: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Some(worker) = worker.upgrade() else { return };
        worker.renew().await;
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn new_worker_id() -> String {
    let random = uuid::Uuid::now_v7().simple().to_string();
    let tail = random.get(random.len().saturating_sub(8)..).unwrap_or(&random);
    format!("{}:{}:{tail}", hostname(), std::process::id())
}

/// Whether the worker `worker_id` (`host:pid:random`) is known to be dead: it ran on this
/// machine and its process is gone. `false` whenever that cannot be told (another machine, no
/// `/proc`, the pid reused by a live process): a live lease is never broken on a guess.
pub fn holder_is_gone(worker_id: &str) -> bool {
    let mut parts = worker_id.rsplitn(3, ':');
    let (Some(_random), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else { return false };
    host == hostname()
        && pid != std::process::id()
        && std::path::Path::new("/proc/self").exists()
        && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// What an executor's owner (the HTTP server, the worker command) is told about the runs it
/// executes, and gives each run.
pub trait RunHooks: Send + Sync + fmt::Debug {
    /// A run starts executing here: observers to tell, and the token that cancels it.
    fn started(&self, run_id: &str) -> (Vec<Arc<dyn RunObserver>>, CancellationToken);
    /// It ended (a result, or why it could not go on). Called exactly once after `started`.
    fn ended(&self, run_id: &str, outcome: &Result<RunResult, RunError>);
    /// A run was claimed from the queue; `takeover`: from a worker whose lease expired.
    fn claimed(&self, _run_id: &str, _takeover: bool) {}
}

/// Hooks that only log.
#[derive(Debug, Default)]
pub struct LogHooks;

impl RunHooks for LogHooks {
    fn started(&self, run_id: &str) -> (Vec<Arc<dyn RunObserver>>, CancellationToken) {
        tracing::info!(%run_id, "run started");
        (Vec::new(), CancellationToken::new())
    }

    fn ended(&self, run_id: &str, outcome: &Result<RunResult, RunError>) {
        match outcome {
            Ok(result) => {
                tracing::info!(%run_id, halted_because = %result.halted_because, iterations = result.iterations, "run finished")
            }
            Err(e) => tracing::error!(%run_id, "the run could not go on: {e}"),
        }
    }

    fn claimed(&self, run_id: &str, takeover: bool) {
        if takeover {
            tracing::warn!(%run_id, "took over a run whose worker stopped renewing its lease");
        }
    }
}

/// Where an accepted run went.
#[derive(Debug)]
pub enum Accepted {
    /// Stored as running and started in this process.
    Started(JoinHandle<Result<RunResult, RunError>>),
    /// Stored as queued: a worker (this one when a slot frees) will claim it.
    Queued,
}

/// Why a run was not accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcceptError {
    /// The spec cannot run (nothing was stored).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not take the run.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The queue is full or the process is stopping: come back later.
    #[error("{0}")]
    Busy(String),
}

/// Everything a run is set up with, owned (a [`SpecSetup`] borrows it for each run).
#[derive(Debug)]
pub struct SetupParts {
    pub config: Arc<Config>,
    pub workdir: PathBuf,
    pub guard: Arc<Guard>,
    pub ceilings: Ceilings,
    pub kinds: Option<Arc<Kinds>>,
}

impl SetupParts {
    pub fn setup(&self) -> SpecSetup<'_> {
        SpecSetup {
            config: &self.config,
            workdir: self.workdir.clone(),
            guard: self.guard.clone(),
            ceilings: self.ceilings.clone(),
            kinds: self.kinds.clone(),
        }
    }
}

/// Accepts runs into the store and executes them: at most `slots` at once in this process;
/// the rest wait in the queue, claimed by whichever worker has a free slot first.
pub struct Executor {
    worker: Arc<Worker>,
    parts: SetupParts,
    hooks: Arc<dyn RunHooks>,
    slots: Arc<Semaphore>,
    capacity: usize,
    /// The descriptors a run takes besides its slot, shared with a server's connections.
    files: OnceLock<Arc<Files>>,
    settings: QueueConfig,
    wake: Notify,
    tracker: TaskTracker,
    stopping: CancellationToken,
    /// Requests waiting for the result of a run, told when it ends here or by the poller.
    waiters: Mutex<HashMap<String, Waiting>>,
    /// Whether the poller of awaited runs is running.
    polling: AtomicBool,
    /// The queue's depth when last counted, and when.
    depth: Mutex<Option<(u64, Instant)>>,
    /// Whether a request is counting the queue now.
    counting: AtomicBool,
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("worker", &self.worker)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl Executor {
    /// An executor with `slots` run slots (0: it accepts runs but executes none — `serve
    /// --no-worker`). Call [`Executor::claim_loop`] to also take runs from the queue.
    pub fn new(worker: Arc<Worker>, parts: SetupParts, hooks: Arc<dyn RunHooks>, slots: usize) -> Arc<Self> {
        let settings = parts.config.queue.clone();
        Arc::new(Self {
            worker,
            parts,
            hooks,
            slots: Arc::new(Semaphore::new(slots)),
            capacity: slots,
            files: OnceLock::new(),
            settings,
            wake: Notify::new(),
            tracker: TaskTracker::new(),
            stopping: CancellationToken::new(),
            waiters: Mutex::new(HashMap::new()),
            polling: AtomicBool::new(false),
            depth: Mutex::new(None),
            counting: AtomicBool::new(false),
        })
    }

    pub fn worker(&self) -> &Arc<Worker> {
        &self.worker
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        self.worker.store()
    }

    pub fn setup(&self) -> SpecSetup<'_> {
        self.parts.setup()
    }

    /// The config, workdir, guard, ceilings and kinds runs are set up with.
    pub fn parts(&self) -> &SetupParts {
        &self.parts
    }

    pub fn settings(&self) -> &QueueConfig {
        &self.settings
    }

    /// Take a descriptor from `files` for every run executed here from now on (a server's,
    /// shared with its connections). Set once; later calls are ignored.
    pub fn share_files(&self, files: Arc<Files>) {
        let _ = self.files.set(files);
    }

    /// A slot and its descriptor, when both are free now.
    fn free_slot(&self) -> Option<Slot> {
        let permit = self.slots.clone().try_acquire_owned().ok()?;
        match self.files.get() {
            None => Some(Slot { _permit: Some(permit), _file: None }),
            Some(files) => files.run().map(|file| Slot { _permit: Some(permit), _file: Some(file) }),
        }
    }

    /// Run slots in this process.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Look for queued runs now (one was just queued from elsewhere, e.g. an answered run).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Runs executing in this process.
    pub fn executing(&self) -> usize {
        self.capacity.saturating_sub(self.slots.available_permits())
    }

    /// Accept a run: check it (built once, here: the runner that checked it is the one that
    /// runs it), store it, and start it at once when a slot is free here, or leave it queued.
    /// Nothing is acknowledged before the store has it.
    pub async fn accept(self: &Arc<Self>, run_id: &str, spec: &RunSpec) -> Result<Accepted, AcceptError> {
        if self.stopping.is_cancelled() {
            return Err(AcceptError::Busy("the server is shutting down".into()));
        }
        let PreparedRun { runner, task, .. } = spec.prepare(&self.setup())?;
        let value = serde_json::to_value(spec)
            .map_err(|e| ConfigError::Invalid { key: "spec".into(), message: e.to_string() })?;
        if let Some(slot) = self.free_slot() {
            let new =
                NewRun { run_id, spec: &value, holder: Some(self.worker.lease()), max_queued: None, local: false };
            self.store().insert_run(&new).await?;
            return Ok(Accepted::Started(self.execute(
                run_id.to_owned(),
                RunSource::Built(Box::new((runner, task))),
                Some(slot),
            )));
        }
        let new = NewRun { run_id, spec: &value, holder: None, max_queued: self.bound_to_check().await, local: false };
        match self.store().insert_run(&new).await {
            Ok(()) => {
                self.wake.notify_one();
                Ok(Accepted::Queued)
            }
            Err(StoreError::QueueFull { queued }) => Err(AcceptError::Busy(format!(
                "the queue is full: {queued} runs are waiting (`[queue] max_queued_runs`)"
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// The bound on queued runs for the store to check as it inserts one, or `None` when the
    /// queue is known (as of at most 200 ms ago) to be a tenth of it or more below it: counting
    /// the queue on every insert would cost a scan of it each time, which a burst of thousands
    /// of runs cannot afford. The bound may thus be passed by the runs accepted within those
    /// 200 ms, never by more.
    async fn bound_to_check(&self) -> Option<u64> {
        let max = self.settings.max_queued_runs;
        let far = |depth: u64| depth.saturating_add((max / 10).max(1)) < max;
        let known = *self.depth.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = known.filter(|(_, at)| at.elapsed() < Duration::from_millis(200));
        if let Some((depth, _)) = fresh {
            return if far(depth) { None } else { Some(max) };
        }
        if self.counting.swap(true, Ordering::AcqRel) {
            // Another request is counting: go by what was known, if anything.
            return match known {
                Some((depth, _)) if far(depth) => None,
                _ => Some(max),
            };
        }
        let counted = self.store().queue_depth().await;
        self.counting.store(false, Ordering::Release);
        match counted {
            Ok(depth) => {
                *self.depth.lock().unwrap_or_else(|e| e.into_inner()) = Some((depth, Instant::now()));
                if far(depth) { None } else { Some(max) }
            }
            Err(_) => Some(max),
        }
    }

    /// Execute a run this worker holds, in a slot (`None`: without one — a run cancelled before
    /// it started needs no model), from what this process has of it.
    fn execute(
        self: &Arc<Self>,
        run_id: String,
        from: RunSource,
        slot: Option<Slot>,
    ) -> JoinHandle<Result<RunResult, RunError>> {
        let (observers, cancel) = self.hooks.started(&run_id);
        let hold = self.worker.hold(&run_id, cancel.clone());
        let this = self.clone();
        let task = async move {
            let how = Start { run_id: Some(run_id.clone()), observers, cancel, ..Start::default() };
            let setup = this.setup();
            let mut outcome = match from {
                RunSource::Built(built) => {
                    let (runner, task) = *built;
                    recorder::run_built(runner, task, &this.worker, how).await
                }
                RunSource::Claimed(stored) => recorder::run_claimed(&run_id, stored, &setup, &this.worker, how).await,
            };
            if hold.abandoned() {
                // Its result here is not the run's: another worker resumes it, and whoever
                // waits reads the real result from the store.
                outcome = Err(
                    StoreError::LeaseLost { run_id: run_id.clone(), worker_id: this.worker.id().to_owned() }.into()
                );
            }
            drop(hold);
            this.hooks.ended(&run_id, &outcome);
            this.tell_waiters(&run_id, &outcome);
            drop(slot);
            // A slot is free: a queued run may take it.
            this.wake.notify_one();
            outcome
        };
        self.tracker.spawn(task.in_current_span())
    }

    /// A slot for one model call outside a run (`/v1/chat`, the proxy's pass-through), held
    /// while the call lasts: taken like a run's, waiting at most `[queue] max_wait` for one to
    /// free (then `Busy`). A process that executes no runs (`--no-worker`) bounds its calls by
    /// its open-files budget only.
    pub async fn call_slot(&self) -> Result<CallSlot, AcceptError> {
        if self.stopping.is_cancelled() {
            return Err(AcceptError::Busy("the server is shutting down".into()));
        }
        let busy = || AcceptError::Busy("every run slot is taken: try again shortly".into());
        let permit = if self.capacity == 0 {
            None
        } else {
            let acquired = tokio::time::timeout(self.settings.max_wait, self.slots.clone().acquire_owned()).await;
            Some(acquired.map_err(|_| busy())?.map_err(|_| busy())?)
        };
        let file = match self.files.get() {
            None => None,
            Some(files) => Some(files.run().ok_or_else(busy)?),
        };
        Ok(CallSlot { _slot: Slot { _permit: permit, _file: file } })
    }

    /// Cancel a queued run that no worker has started: it is claimed here and halts at once as
    /// `cancelled`, recorded, without calling a model. `None` when it is not queued (running
    /// elsewhere: ask its holder with [`Store::request_cancel`]; or finished).
    pub async fn cancel_queued(self: &Arc<Self>, run_id: &str) -> Result<Option<RunResult>, RunError> {
        match self.store().claim_run(run_id, &self.worker.lease(), false).await? {
            Claim::Claimed { .. } => {}
            Claim::Held(_) | Claim::Finished(_) => return Ok(None),
        }
        let (observers, cancel) = self.hooks.started(run_id);
        cancel.cancel();
        let hold = self.worker.hold(run_id, cancel.clone());
        let how = Start { run_id: Some(run_id.to_owned()), observers, cancel, ..Start::default() };
        let outcome = recorder::run_claimed(run_id, None, &self.setup(), &self.worker, how).await;
        drop(hold);
        self.hooks.ended(run_id, &outcome);
        self.tell_waiters(run_id, &outcome);
        outcome.map(Some)
    }

    /// Claim runs from the queue (and runs whose worker died) whenever a slot is free, until
    /// [`Executor::stop`]. Store errors are logged and retried.
    pub async fn claim_loop(self: Arc<Self>) {
        if self.capacity == 0 {
            return;
        }
        loop {
            let mut slots = tokio::select! {
                () = self.stopping.cancelled() => return,
                slot = self.slots.clone().acquire_owned() => match slot {
                    Ok(slot) => slot,
                    Err(_) => return,
                },
            };
            // Every free slot at once (a burst is claimed in a few statements, not one by one).
            let more = self.slots.available_permits().min(CLAIM_BATCH - 1);
            if let Some(more) = u32::try_from(more).ok().filter(|n| *n > 0)
                && let Ok(extra) = self.slots.clone().try_acquire_many_owned(more)
            {
                slots.merge(extra);
            }
            // Each run also needs a descriptor: in a server, connections may hold them all.
            let mut files = match self.files.get() {
                None => Vec::new(),
                Some(budget) => {
                    let files: Vec<FileHeld> = (0..slots.num_permits()).map_while(|_| budget.run()).collect();
                    if files.is_empty() {
                        drop(slots);
                        tokio::select! {
                            () = self.stopping.cancelled() => return,
                            () = budget.freed() => {}
                            () = tokio::time::sleep(self.settings.poll) => {}
                        }
                        continue;
                    }
                    // The slots without a descriptor go back.
                    if let Some(fitting) = slots.split(files.len()) {
                        slots = fitting;
                    }
                    files
                }
            };
            let wanted = slots.num_permits();
            match self.store().claim_many(&self.worker.lease(), wanted).await {
                Ok(claimed) => {
                    let all = claimed.len() == wanted;
                    for claimed in claimed {
                        let Some(permit) = slots.split(1) else { break };
                        let slot = Slot { _permit: Some(permit), _file: files.pop() };
                        self.hooks.claimed(&claimed.run_id, claimed.takeover);
                        drop(self.execute(claimed.run_id, RunSource::Claimed(claimed.run), Some(slot)));
                    }
                    drop(slots);
                    if all {
                        continue;
                    }
                }
                Err(e) => {
                    drop(slots);
                    tracing::warn!("cannot claim runs from the queue: {e}");
                }
            }
            tokio::select! {
                () = self.stopping.cancelled() => return,
                () = self.wake.notified() => {}
                () = self.store().queued_elsewhere() => {}
                () = tokio::time::sleep(self.settings.poll) => {}
            }
        }
    }

    /// Whether [`Executor::stop`] was called.
    pub fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }

    /// Stop accepting and claiming; let the runs executing here finish within `grace`, then put
    /// those still unfinished back in the queue (another worker resumes them from their last
    /// recorded attempt) and stop renewing. Returns how many were put back.
    pub async fn stop(&self, grace: Duration) -> usize {
        self.stopping.cancel();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait()).await.is_ok() {
            self.worker.stop();
            return 0;
        }
        let mut released = 0;
        for run_id in self.worker.holding() {
            match self.store().release(&run_id, self.worker.id()).await {
                Ok(true) => released += 1,
                Ok(false) => {}
                Err(e) => tracing::warn!(%run_id, "cannot put the run back in the queue: {e}"),
            }
        }
        self.worker.stop();
        released
    }

    /// Requests in this process waiting for a run's result.
    pub fn waiting(&self) -> usize {
        self.waiters().values().map(|w| w.senders.len()).sum()
    }

    fn waiters(&self) -> MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn tell_waiters(&self, run_id: &str, outcome: &Result<RunResult, RunError>) {
        if let Ok(result) = outcome {
            let waiting = remove_run(&mut self.waiters(), run_id);
            for waiter in waiting.map(|w| w.senders).unwrap_or_default() {
                let _ = waiter.send(Ok(Some(result.clone())));
            }
        }
    }

    /// Wait for the result of run `run_id`, wherever it executes: told at once when it ends in
    /// this process, else found by the one poller that reads the states of every awaited run
    /// in a single query. A run still queued after `[queue] max_wait` is withdrawn — it will
    /// never run — and `Ok(None)` returned.
    pub async fn wait(self: &Arc<Self>, run_id: &str) -> Result<Option<RunResult>, RunError> {
        let (tx, rx) = oneshot::channel();
        {
            let mut waiters = self.waiters();
            let deadline = Instant::now() + self.settings.max_wait;
            waiters
                .entry(run_id.to_owned())
                .or_insert_with(|| Waiting { senders: Vec::new(), deadline })
                .senders
                .push(tx);
        }
        if !self.polling.swap(true, Ordering::AcqRel) {
            tokio::spawn(self.clone().poll_waited());
        }
        rx.await.unwrap_or_else(|_| Err(StoreError::NotFound { run_id: run_id.to_owned() }.into()))
    }

    /// Until no request waits: read the states of the awaited runs not executing here, answer
    /// those that halted, withdraw those queued past their deadline — all of them at every
    /// tick, and at once those another process announces finished (a store that can tell).
    async fn poll_waited(self: Arc<Self>) {
        let every = Duration::from_millis(200).min(self.settings.poll);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let announced = tokio::select! {
                _ = tick.tick() => None,
                finished = self.store().finished_elsewhere() => finished,
            };
            let waited: Vec<String> = {
                let waiters = self.waiters();
                match announced {
                    Some(ids) => ids.into_iter().filter(|id| waiters.contains_key(id)).collect(),
                    None => waiters.keys().cloned().collect(),
                }
            };
            let ids = self.worker.not_holding(&waited);
            if ids.is_empty() {
                if !self.waiters().is_empty() {
                    continue;
                }
                self.polling.store(false, Ordering::Release);
                // A request may have come in between: keep polling for it.
                if self.waiters().is_empty() || self.polling.swap(true, Ordering::AcqRel) {
                    return;
                }
                continue;
            }
            self.answer_halted(&ids).await;
        }
    }

    /// Read the states of `ids` (awaited, not executing here): answer those that halted,
    /// withdraw those queued past their deadline.
    async fn answer_halted(&self, ids: &[String]) {
        let states = match self.store().states(ids).await {
            Ok(states) => states,
            Err(e) => {
                tracing::warn!("cannot read the state of awaited runs: {e}");
                return;
            }
        };
        let found: std::collections::HashSet<&String> = states.iter().map(|(id, _)| id).collect();
        for id in ids.iter().filter(|id| !found.contains(id)) {
            self.answer(id, Err(StoreError::NotFound { run_id: id.clone() }.into()));
        }
        let halted: Vec<String> =
            states.iter().filter(|(_, state)| state.has_result()).map(|(id, _)| id.clone()).collect();
        match self.store().results(&halted).await {
            Ok(results) => {
                let mut unanswered: std::collections::HashSet<&String> = halted.iter().collect();
                for (run_id, result) in results {
                    unanswered.remove(&run_id);
                    self.answer(&run_id, Ok(Some(result)));
                }
                // Halted without a result to read (deleted meanwhile).
                for run_id in unanswered {
                    self.answer(run_id, Ok(None));
                }
            }
            Err(e) => tracing::warn!("cannot read the results of awaited runs: {e}"),
        }
        for (run_id, state) in &states {
            match state {
                RunState::Succeeded | RunState::Failed | RunState::AwaitingInput => {}
                RunState::Queued => {
                    let due = self.waiters().get(run_id).is_some_and(|w| Instant::now() >= w.deadline);
                    if due && matches!(self.store().withdraw(run_id).await, Ok(true)) {
                        self.answer(run_id, Ok(None));
                    }
                }
                RunState::Running => {}
            }
        }
    }

    fn answer(&self, run_id: &str, outcome: Result<Option<RunResult>, RunError>) {
        let waiting = remove_run(&mut self.waiters(), run_id).map(|w| w.senders).unwrap_or_default();
        for waiter in waiting {
            let copy = match &outcome {
                Ok(result) => Ok(result.clone()),
                Err(RunError::Store(StoreError::NotFound { run_id })) => {
                    Err(StoreError::NotFound { run_id: run_id.clone() }.into())
                }
                Err(e) => {
                    Err(StoreError::Query { action: format!("wait for run `{run_id}`"), message: e.to_string() }.into())
                }
            };
            let _ = waiter.send(copy);
        }
    }
}

/// What a run executing here holds until it ends: its slot, and the descriptor it may open a
/// connection with when the process shares its descriptors with connections.
#[derive(Debug)]
struct Slot {
    _permit: Option<OwnedSemaphorePermit>,
    _file: Option<FileHeld>,
}

/// A slot held by a model call outside a run: freed when dropped.
#[derive(Debug)]
pub struct CallSlot {
    _slot: Slot,
}

/// What a process has of a run it is about to execute.
enum RunSource {
    /// The runner and task: this process just accepted it.
    Built(Box<(Runner, Task)>),
    /// Claimed from the queue: set up from its stored spec, with the attempts to resume from
    /// (as read with the claim, or `None`: read them).
    Claimed(Option<Box<StoredRun>>),
}

/// Requests waiting for one run.
/// Remove a run from a table of runs in flight, and give back the table's room once it is
/// mostly empty: a burst of thousands of runs would otherwise leave every such table at its
/// peak size for the life of the process.
pub fn remove_run<V>(runs: &mut HashMap<String, V>, run_id: &str) -> Option<V> {
    let removed = runs.remove(run_id);
    if runs.capacity() > 64 && runs.len() * 4 < runs.capacity() {
        runs.shrink_to(runs.len() * 2);
    }
    removed
}

#[derive(Debug)]
struct Waiting {
    senders: Vec<oneshot::Sender<Result<Option<RunResult>, RunError>>>,
    /// When the run, still queued, is withdrawn.
    deadline: Instant,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_of_runs_gives_back_its_room_after_a_burst_and_keeps_what_is_left() {
        let mut runs: HashMap<String, u32> = (0..5_000).map(|i| (format!("run-{i}"), i)).collect();
        let peak = runs.capacity();
        for i in 0..4_990 {
            assert_eq!(remove_run(&mut runs, &format!("run-{i}")), Some(i));
        }
        assert_eq!(runs.len(), 10);
        assert!(runs.capacity() < peak / 16, "capacity {} after the burst, {peak} at its peak", runs.capacity());
        for i in 4_990..5_000 {
            assert_eq!(runs.get(&format!("run-{i}")), Some(&i), "a run still in flight is kept");
        }
        assert_eq!(remove_run(&mut runs, "run-0"), None, "a run removed twice is not there");
    }

    #[test]
    fn a_holder_is_gone_only_when_its_process_on_this_machine_is() {
        let me = new_worker_id();
        assert!(!holder_is_gone(&me), "this process is alive");
        let host = hostname();
        // Pids above the kernel's maximum (4194304) are never alive.
        assert!(holder_is_gone(&format!("{host}:4294967:abcd1234")));
        assert!(!holder_is_gone("another-machine:4294967:abcd1234"), "another machine: cannot tell");
        assert!(!holder_is_gone("garbage"));
        assert!(!holder_is_gone(&format!("{host}:notapid:abcd")));
    }
}
