//! What agent mode plugs into the one loop: the workspace as each attempt's artifact
//! ([`WorkspaceArtifact`]), the verifier that keeps its output for the report
//! ([`Verifier`]), and the journal that snapshots the workspace before each iteration and
//! writes each iteration's report ([`Journal`]). The protect evaluator is in `protect`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use redraft::core::{ArtifactSource, EvalInput, Evaluator, EvaluatorError, Verdict};
use redraft::eval::ExecEvaluator;
use redraft::providers::CommandProvider;
use redraft::{AttemptRecord, RunObserver};
use serde_json::Value;

use super::protect::{Finding, Protected};
use super::report::{self, IterationReport};
use super::workspace::{Snapshot, Workspace};

/// Longest cumulative diff in the artifact (what the agent is shown as its submission).
const ARTIFACT_DIFF_KEEP: usize = 16 * 1024;

/// What the pieces of one loop share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) workspace: Workspace,
    pub(super) baseline: Snapshot,
    pub(super) before: Mutex<Option<Snapshot>>,
    pub(super) current: Mutex<IterationReport>,
    pub(super) protected: Protected,
    /// What checking the protected files after the agent's turn found, for the protect
    /// evaluator.
    pub(super) protect_found: Arc<Mutex<Vec<Finding>>>,
    /// Whether the protected files were checked since the agent's turn began.
    pub(super) protect_checked: AtomicBool,
    pub(super) diffs: Mutex<Vec<(u32, String)>>,
}

impl Shared {
    pub(super) fn snapshot(&self) -> Result<Snapshot> {
        tokio::task::block_in_place(|| self.workspace.snapshot())
    }

    fn report(&self) -> IterationReport {
        self.current.lock().map(|r| r.clone()).unwrap_or_default()
    }

    fn with_report(&self, f: impl FnOnce(&mut IterationReport)) {
        if let Ok(mut r) = self.current.lock() {
            f(&mut r);
        }
    }

    /// The workspace when the agent's turn began.
    fn before(&self) -> Snapshot {
        self.before.lock().ok().and_then(|b| b.clone()).unwrap_or_else(|| self.baseline.clone())
    }

    /// Check the protected files after the agent's turn: put back what it changed, remove
    /// what it added where a glob matches (`after` tells what the turn changed).
    fn check_protected(&self, after: Option<&Snapshot>) -> Vec<Finding> {
        self.protect_checked.store(true, Ordering::SeqCst);
        if !self.protected.has_rules() {
            return Vec::new();
        }
        tokio::task::block_in_place(|| {
            let changed = after.map(|after| self.workspace.changed_paths(&self.before(), after)).unwrap_or_default();
            self.protected.check_and_restore(&changed)
        })
    }

    /// Put protected files back outside an evaluation — after the verifier ran, after an
    /// iteration that ended before the workspace was read (a timeout), when the loop stops —
    /// saying what was put back.
    pub(super) fn settle_protected(&self, when: &str) {
        let found = if self.protect_checked.swap(true, Ordering::SeqCst) {
            tokio::task::block_in_place(|| self.protected.check_and_restore(&[]))
        } else {
            let now = if self.protected.has_rules() { self.snapshot().ok() } else { None };
            self.check_protected(now.as_ref())
        };
        for f in found {
            eprintln!("warning: {when}: {}", f.text);
        }
    }
}

/// The artifact of an iteration: the workspace, as a fingerprint plus the cumulative diff.
#[derive(Debug)]
pub(super) struct WorkspaceArtifact(pub(super) Arc<Shared>);

#[async_trait::async_trait]
impl ArtifactSource for WorkspaceArtifact {
    async fn artifact(&self, _raw: &str, _iteration: u32) -> Result<Value, EvaluatorError> {
        let fail = |e: anyhow::Error| EvaluatorError::Failed { evaluator: "workspace".into(), message: e.to_string() };
        let s = &self.0;
        // The snapshot keeps what the agent did (the report shows it); then the protected files
        // are put back before any evaluator — the verifier included — sees the workspace.
        let after = s.snapshot();
        let found = s.check_protected(after.as_ref().ok());
        if let Ok(mut f) = s.protect_found.lock() {
            *f = found;
        }
        let after = after.map_err(fail)?;
        let before = s.before();
        let (diff, cumulative) = tokio::task::block_in_place(|| {
            Ok::<_, anyhow::Error>((s.workspace.diff(&before, &after)?, s.workspace.diff(&s.baseline, &after)?))
        })
        .map_err(fail)?;
        s.with_report(|r| r.diff = diff);
        let (shown, cut) = redraft::core::prompt::truncate_chars(&cumulative, ARTIFACT_DIFF_KEEP);
        let body = if shown.trim().is_empty() { "(no changes since the start)".to_owned() } else { shown };
        let more = if cut { "\n[diff truncated]" } else { "" };
        Ok(Value::String(format!("workspace: {}\nchanges since the start:\n{body}{more}", after.fingerprint())))
    }
}

/// The verifier, keeping its output for the iteration report.
#[derive(Debug)]
pub(super) struct Verifier {
    pub(super) exec: ExecEvaluator,
    pub(super) shared: Arc<Shared>,
}

#[async_trait::async_trait]
impl Evaluator for Verifier {
    fn name(&self) -> &str {
        "verify"
    }

    async fn evaluate(&self, input: EvalInput<'_>) -> Result<Verdict, EvaluatorError> {
        let out = self.exec.run(input.artifact).await?;
        let verdict = self.exec.verdict(&out);
        self.shared.with_report(|r| r.verifier = Some(out));
        verdict
    }
}

/// Snapshots before each iteration; writes each iteration's report when it is recorded.
#[derive(Debug)]
pub(super) struct Journal {
    pub(super) shared: Arc<Shared>,
    pub(super) agent: Arc<CommandProvider>,
    pub(super) dir: PathBuf,
    pub(super) task: String,
    /// Iterations the loop may make: the cap, raised by each answer at the cap.
    pub(super) limit: Arc<AtomicU32>,
}

#[async_trait::async_trait]
impl RunObserver for Journal {
    async fn attempt_started(&self, _run_id: &str, _iteration: u32) {
        let s = &self.shared;
        if let Ok(mut f) = s.protect_found.lock() {
            f.clear();
        }
        let snap = s.snapshot().ok();
        if let Ok(mut b) = s.before.lock() {
            *b = snap;
        }
        s.protect_checked.store(false, Ordering::SeqCst);
        let (agent_command, verifier_command) = {
            let r = s.report();
            (r.agent_command, r.verifier_command)
        };
        s.with_report(|r| *r = IterationReport { agent_command, verifier_command, ..IterationReport::default() });
    }

    async fn attempt_finished(&self, _run_id: &str, attempt: &AttemptRecord) {
        let s = &self.shared;
        // Usually nothing is left to put back; an iteration that timed out before the
        // workspace was read, or a verifier that wrote to a protected file, is caught here.
        s.settle_protected(&format!("after iteration {}", attempt.iteration));
        s.with_report(|r| r.agent = self.agent.last_output());
        let report = s.report();
        if let Ok(mut d) = s.diffs.lock() {
            d.push((attempt.iteration, report.diff.clone()));
        }
        if let Err(e) =
            report::write_iteration(&self.dir, &self.task, self.limit.load(Ordering::SeqCst), attempt, &report)
        {
            tracing::error!("{e}");
        }
    }
}
