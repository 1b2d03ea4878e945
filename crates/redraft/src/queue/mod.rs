//! The queue of runs: a [`Worker`] holds leases on the runs it executes and renews them in the
//! background; an [`Executor`] accepts runs (stored before they are acknowledged), executes them
//! in its slots, and claims queued or abandoned runs from the store. `redraft serve` is an
//! executor (without slots under `--no-worker`), `redraft worker` is one without the HTTP face,
//! and `redraft run` is a worker holding the lease of its one run.

mod executor;
mod wait;
mod worker;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use redraft_core::{Ceilings, RunObserver, RunResult, StoreError};
use redraft_eval::kind::Kinds;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use self::executor::{CallSlot, Executor};
pub use self::worker::{HoldGuard, Worker, holder_is_gone};
use crate::config::Config;
use crate::error::{ConfigError, RunError};
use crate::guard::Guard;
use crate::spec::SpecSetup;

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
}
