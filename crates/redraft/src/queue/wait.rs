//! The waiting for a run's result wherever it executes: requests told at once when it ends in
//! this process, else by one poller that reads the states of every awaited run at once.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use redraft_core::{RunResult, RunState, StoreError};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{Executor, remove_run};
use crate::error::RunError;

impl Executor {
    /// Requests in this process waiting for a run's result.
    pub fn waiting(&self) -> usize {
        self.waiters().values().map(|w| w.senders.len()).sum()
    }

    fn waiters(&self) -> MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn tell_waiters(&self, run_id: &str, outcome: &Result<RunResult, RunError>) {
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

/// Requests waiting for one run.
#[derive(Debug)]
pub(super) struct Waiting {
    senders: Vec<oneshot::Sender<Result<Option<RunResult>, RunError>>>,
    /// When the run, still queued, is withdrawn.
    deadline: Instant,
}
