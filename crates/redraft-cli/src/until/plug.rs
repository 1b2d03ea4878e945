//! What agent mode plugs into the one loop: the workspace as each attempt's artifact
//! ([`WorkspaceArtifact`]), the verifier that keeps its output for the report
//! ([`Verifier`]), and the journal that snapshots the workspace before each iteration and
//! writes each iteration's report ([`Journal`]). The protect evaluator is in `protect`.
//!
//! Each of them first ends what the agent or the verifier left running after killing its
//! supervisor (re-parented to redraft, `end_strays`) — before the agent's turn, right after it
//! (before the workspace is read and its protected paths put back), before the verifier, and
//! when the loop ends — and checks that the working directory is still the one the loop began in
//! (`root`), stopping the run when it is not.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use redraft::CancellationToken;
use redraft::core::{ArtifactSource, EvalInput, Evaluator, EvaluatorError, Issue, Verdict};
use redraft::eval::ExecEvaluator;
use redraft::providers::CommandProvider;
use redraft::{AttemptRecord, RunObserver};
use serde_json::Value;

use super::protect::{Finding, PROTECTED_FILE_MODIFIED, Protected};
use super::report::{self, IterationReport};
use super::root::{Moved, Root};
use super::workspace::{Snapshot, Workspace};

/// How long the processes an agent left behind may take to die before the workspace is read or
/// the verifier starts anyway (a `SIGKILL` takes effect at once; this only bounds a wedged
/// kernel).
const STRAYS_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Longest cumulative diff in the artifact (what the agent is shown as its submission).
const ARTIFACT_DIFF_KEEP: usize = 16 * 1024;

/// What the pieces of one loop share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) root: Arc<Root>,
    pub(super) workspace: Workspace,
    pub(super) baseline: Snapshot,
    pub(super) before: Mutex<Option<Snapshot>>,
    pub(super) current: Mutex<IterationReport>,
    pub(super) protected: Protected,
    /// What the agent's turn changed under the protected paths, for the protect evaluator.
    pub(super) protect_found: Arc<Mutex<Vec<Finding>>>,
    /// Whether the agent's turn was checked since it began.
    pub(super) protect_checked: AtomicBool,
    pub(super) diffs: Mutex<Vec<(u32, String)>>,
    /// Stops the run: fired when the working directory is no longer the one the loop began in.
    pub(super) cancel: CancellationToken,
    /// Why the loop stopped on its own, when it did.
    pub(super) moved: Mutex<Option<Moved>>,
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

    /// The working directory is no longer the one the loop began in: stop the run (the first
    /// reason is kept).
    fn stop(&self, moved: Moved) {
        if let Ok(mut m) = self.moved.lock()
            && m.is_none()
        {
            *m = Some(moved);
        }
        self.cancel.cancel();
    }

    /// Why the loop stopped on its own, when it did.
    pub(super) fn moved(&self) -> Option<Moved> {
        self.moved.lock().ok().and_then(|m| m.clone())
    }

    /// Check that the working directory is the one the loop began in; stop the run if not.
    fn check_root(&self) -> Result<(), Moved> {
        self.root.check().map(|_| ()).inspect_err(|moved| self.stop(moved.clone()))
    }

    /// The agent's turn has ended: find what it changed under the protected paths, and put
    /// them back as they were before the loop.
    fn end_turn(&self) -> Result<Vec<Finding>, Moved> {
        self.protect_checked.store(true, Ordering::SeqCst);
        tokio::task::block_in_place(|| self.protected.end_turn()).inspect_err(|moved| self.stop(moved.clone()))
    }

    /// After an iteration: when it ended before the workspace was read (a timeout), the agent's
    /// turn is checked now — what it left running is ended first —, and what it changed under
    /// the protected paths is put back and said.
    async fn after_iteration(&self, iteration: u32) {
        if self.protect_checked.load(Ordering::SeqCst) {
            return;
        }
        let _ = end_strays("the workspace was read").await;
        if !self.protect_checked.swap(true, Ordering::SeqCst)
            && let Ok(found) = self.end_turn()
        {
            for f in found {
                eprintln!("warning: after iteration {iteration}: {}", f.text);
            }
        }
    }

    /// Put the protected paths back as they were before the loop — when it stops, and at its
    /// cap — saying what was put back (caches aside): what an agent's unfinished turn changed,
    /// and what the verifier left there. What the agent or the verifier left running is ended
    /// first, so that nothing outlives the loop (or tampers with what is put back).
    pub(super) async fn settle_protected(&self, when: &str) {
        let _ = end_strays("the protected paths were put back").await;
        if self.moved().is_some() {
            return;
        }
        let mut found = Vec::new();
        if !self.protect_checked.swap(true, Ordering::SeqCst) {
            found = self.end_turn().unwrap_or_default();
        }
        match tokio::task::block_in_place(|| self.protected.restore_all()) {
            Ok(restored) => found.extend(restored),
            Err(moved) => self.stop(moved),
        }
        for f in found {
            eprintln!("warning: {when}: {}", f.text);
        }
    }
}

/// End every process this one started that is still running — what an agent or a verifier left
/// behind after killing its supervisor, re-parented here — saying so, before `what`. An error
/// when some could not be ended: nothing that must not run beside them (reading the workspace,
/// the verifier) runs.
async fn end_strays(what: &str) -> Result<(), String> {
    let strays = redraft::sandbox::end_strays(STRAYS_WITHIN).await;
    if strays.killed > 0 {
        eprintln!(
            "warning: {} process(es) the agent or the verifier started got away from its supervisor and were killed before {what}",
            strays.killed
        );
    }
    if strays.alive > 0 {
        let message = format!(
            "{} process(es) the agent started were still alive after {} of killing (one stuck in the kernel cannot be killed, and thousands of processes take long to end), and nothing runs beside them: the workspace is not read nor the verifier run\nhint: run the agent with `--sandbox`, whose PID namespace ends every process with it",
            strays.alive,
            redraft::core::duration::format(STRAYS_WITHIN)
        );
        eprintln!("warning: {message}");
        return Err(message);
    }
    Ok(())
}

/// The artifact of an iteration: the workspace, as a fingerprint plus the cumulative diff.
#[derive(Debug)]
pub(super) struct WorkspaceArtifact(pub(super) Arc<Shared>);

#[async_trait::async_trait]
impl ArtifactSource for WorkspaceArtifact {
    async fn artifact(&self, _raw: &str, _iteration: u32) -> Result<Value, EvaluatorError> {
        let fail = |e: anyhow::Error| EvaluatorError::Failed { evaluator: "workspace".into(), message: e.to_string() };
        let s = &self.0;
        // Nothing the agent started runs while the workspace is read and its protected paths put
        // back: what got away from its supervisor is ended first.
        end_strays("the workspace was read").await.map_err(|message| fail(anyhow::anyhow!(message)))?;
        s.check_root().map_err(|moved| fail(moved.into()))?;
        // The snapshot keeps what the agent did (the report shows it); then the protected paths
        // are put back before any evaluator — the verifier included — sees the workspace.
        let after = s.snapshot();
        let found = s.end_turn().map_err(|moved| fail(moved.into()))?;
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
        // No process the agent started is alive when the verifier starts: its supervisor killed
        // what it left behind, and what got away from the supervisor (the agent killed it) was
        // re-parented to this process, which ends it here.
        if let Err(message) = end_strays("the verifier ran").await {
            return Err(EvaluatorError::Failed { evaluator: "verify".into(), message });
        }
        // The verifier starts in the working directory by its path: only while that still leads
        // to the directory the loop began in.
        if let Err(moved) = self.shared.check_root() {
            return Err(EvaluatorError::Failed { evaluator: "verify".into(), message: moved.to_string() });
        }
        // The verifier never runs against anything but the protected paths as they were before
        // the loop: checked again here, right before it starts.
        match tokio::task::block_in_place(|| self.shared.protected.before_verifier()) {
            Ok(found) => {
                for f in found {
                    eprintln!("warning: right before the verifier ran: {}", f.text);
                }
            }
            Err(why) => {
                let issue = Issue::new(
                    "",
                    PROTECTED_FILE_MODIFIED,
                    format!(
                        "{why}, so the verifier did not run. Change the code under test, not the tests or the verifier."
                    ),
                );
                return Ok(Verdict::from_issues(vec![issue]));
            }
        }
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
    /// Where the task's reports go, in the working directory.
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
        // Nothing the last verifier left running (after killing its supervisor) goes on into the
        // agent's turn.
        let _ = end_strays("the agent's turn began").await;
        // The agent starts in the working directory by its path: only while that still leads to
        // the directory the loop began in (the run stops otherwise, before the agent starts).
        if s.check_root().is_err() {
            return;
        }
        let snap = s.snapshot().ok();
        if let Ok(mut b) = s.before.lock() {
            *b = snap;
        }
        if let Err(moved) = tokio::task::block_in_place(|| s.protected.begin_turn()) {
            s.stop(moved);
            return;
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
        // An iteration that timed out before the workspace was read is checked here.
        s.after_iteration(attempt.iteration).await;
        s.with_report(|r| r.agent = self.agent.last_output());
        let report = s.report();
        if let Ok(mut d) = s.diffs.lock() {
            d.push((attempt.iteration, report.diff.clone()));
        }
        if s.moved().is_some() {
            return;
        }
        if let Err(e) =
            report::write_iteration(&s.root, &self.dir, &self.task, self.limit.load(Ordering::SeqCst), attempt, &report)
        {
            tracing::error!("{e}");
        }
    }
}
