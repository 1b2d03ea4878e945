//! The run's result, built once it halted: the best attempt (highest score, ties to the
//! latest), the validation shown, the metrics summed over the attempts, and the escalation of a
//! run that did not succeed.

use std::time::Duration;

use super::Engine;
use crate::canonical::artifact_sha256;
use crate::escalation::{RunFacts, escalate};
use crate::issue::Score;
use crate::policy::{HaltReason, OnEscalation};
use crate::record::{AttemptRecord, AttemptStatus, Metrics, RunResult, RunStatus, Validation};

impl Engine {
    /// The index in the history of the best attempt: highest score, ties to the latest,
    /// among attempts that produced an artifact.
    pub fn best(&self) -> Option<&AttemptRecord> {
        self.best.and_then(|i| self.history.get(i))
    }

    /// Build the result of the run: the one result shape of every face.
    pub fn finish(mut self, run_id: &str, elapsed: Duration) -> RunResult {
        let halted = *self.halt.get_or_insert(HaltReason::Cancelled);
        let status = if halted == HaltReason::Success {
            RunStatus::Succeeded
        } else if self.plan.policy.on_escalation == OnEscalation::Await && halted.awaits_a_person() {
            RunStatus::AwaitingInput
        } else {
            RunStatus::Failed
        };
        let best = self.best();
        let validation = match best.or(self.history.last()) {
            Some(a) => {
                Validation { score: a.score, passed: a.status == AttemptStatus::Accepted, issues: a.issues.clone() }
            }
            None => Validation { score: Score::ZERO, passed: false, issues: Vec::new() },
        };
        let artifact = best.and_then(|b| b.artifact.clone());
        let best_iteration = best.map(|b| b.iteration);
        let metrics = Metrics {
            wall_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            tokens_in: self.history.iter().map(|a| a.tokens_in).sum(),
            tokens_out: self.history.iter().map(|a| a.tokens_out).sum(),
            tokens_estimated: self.history.iter().any(|a| a.tokens_estimated),
            judge_cost_usd: self.history.iter().filter_map(|a| a.judge_cost_usd).reduce(|a, b| a + b),
            cost_usd: if self.history.is_empty() {
                self.plan.price.map(|_| 0.0)
            } else {
                self.history.iter().map(|a| a.cost_usd).sum()
            },
        };
        let escalation = (status != RunStatus::Succeeded).then(|| {
            escalate(
                &self.history,
                RunFacts {
                    halted_because: halted,
                    max_iterations: self.limit,
                    max_tokens: self.plan.max_tokens,
                    max_budget_usd: self.plan.policy.max_budget_usd,
                    spent_usd: self.spent_usd(),
                    next_cost: self.budget_stop.as_ref(),
                    error: self.error.as_ref(),
                },
            )
        });
        RunResult {
            run_id: run_id.to_owned(),
            status,
            halted_because: halted,
            artifact_sha256: artifact.as_ref().map(artifact_sha256),
            artifact,
            validation,
            iterations: self.history.len() as u32,
            best_iteration,
            best_score: best.map(|b| b.score),
            best_ref: best_iteration.map(|i| format!("{run_id}/{i}")),
            metrics,
            escalation,
            error: self.error,
            history: self.history,
        }
    }
}
