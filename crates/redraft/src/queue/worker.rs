//! [`Worker`]: this process's id, the leases it holds on the runs it executes, renewed by one
//! heartbeat task, and the tokens fired when a run's lease is lost or its cancellation asked for.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use redraft_core::{Lease, Store};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::remove_run;
use crate::config::QueueConfig;

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

#[cfg(test)]
mod tests {
    use super::*;

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
