//! [`Executor`]: accepts runs into the store, executes them in its slots, claims queued and
//! abandoned runs when a slot frees, takes slots for model calls outside a run, cancels queued
//! runs and stops, handing unfinished runs back to the queue.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use redraft_core::{Claim, NewRun, Origin, RunResult, Store, StoreError, StoredRun, Task};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::wait::Waiting;
use super::{AcceptError, Accepted, RunHooks, SetupParts, Worker};
use crate::config::QueueConfig;
use crate::error::{ConfigError, RunError};
use crate::limits::{FileHeld, Files};
use crate::recorder::{self, Start};
use crate::runner::Runner;
use crate::spec::{PreparedRun, RunSpec, SpecSetup};

/// Runs claimed in one statement at most.
const CLAIM_BATCH: usize = 64;

/// Accepts runs into the store and executes them: at most `slots` at once in this process;
/// the rest wait in the queue, claimed by whichever worker has a free slot first.
pub struct Executor {
    pub(super) worker: Arc<Worker>,
    parts: SetupParts,
    hooks: Arc<dyn RunHooks>,
    slots: Arc<Semaphore>,
    capacity: usize,
    /// The descriptors a run takes besides its slot, shared with a server's connections.
    files: OnceLock<Arc<Files>>,
    pub(super) settings: QueueConfig,
    wake: Notify,
    tracker: TaskTracker,
    stopping: CancellationToken,
    /// Requests waiting for the result of a run, told when it ends here or by the poller.
    pub(super) waiters: Mutex<HashMap<String, Waiting>>,
    /// Whether the poller of awaited runs is running.
    pub(super) polling: AtomicBool,
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
        let setup = self.setup();
        let PreparedRun { runner, task, .. } = spec.prepare(&setup)?;
        // The face the request came through, whose trust whoever continues the run keeps.
        let origin: Origin = setup.guard.face().into();
        let value = serde_json::to_value(spec)
            .map_err(|e| ConfigError::Invalid { key: "spec".into(), message: e.to_string() })?;
        if let Some(slot) = self.free_slot() {
            let new = NewRun { run_id, spec: &value, holder: Some(self.worker.lease()), max_queued: None, origin };
            self.store().insert_run(&new).await?;
            return Ok(Accepted::Started(self.execute(
                run_id.to_owned(),
                RunSource::Built(Box::new((runner, task))),
                Some(slot),
            )));
        }
        let new = NewRun { run_id, spec: &value, holder: None, max_queued: self.bound_to_check().await, origin };
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
