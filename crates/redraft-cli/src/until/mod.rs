//! `redraft until`: agent mode. The artifact is the working directory: each iteration runs
//! the agent (prompt and feedback on stdin, in `$REDRAFT_PROMPT_FILE` and as `{prompt}`), then
//! the verifier, and writes `.redraft/iterations/<task>/<i>.md`; success writes `final.md`,
//! the cap writes `escalation.md`. Protected files are checked and put back as soon as the
//! agent's turn ends — when the workspace is read, before any evaluator runs — and after any
//! iteration that ended early and at the end of the loop; a change rejects the iteration.

mod decisions;
mod lock;
mod protect;
mod report;
mod workspace;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Result, anyhow};
use redraft::config::Config;
use redraft::core::{
    ArtifactSource, EvalInput, Evaluator, EvaluatorError, OnEscalation, PersonReply, RunStatus, Strategy, Verdict,
};
use redraft::eval::ExecEvaluator;
use redraft::providers::{AgentCommand, CommandProvider};
use redraft::{AttemptRecord, CancellationToken, Mode, RunObserver, RunOptions, RunResult, RunSpec, Runner, Task};
use serde_json::Value;

use self::lock::Lock;
use self::protect::{Finding, ProtectEvaluator, Protected};
use self::report::IterationReport;
use self::workspace::{Snapshot, Workspace};
use crate::args::{OnCap, Progress, UntilArgs};
use crate::commands::Outcome;
use crate::commands::run::apply_policy_flags;
use crate::input;
use crate::output::ProgressLines;

/// Longest cumulative diff in the artifact (what the agent is shown as its submission).
const ARTIFACT_DIFF_KEEP: usize = 16 * 1024;

/// What the pieces of one loop share.
#[derive(Debug)]
struct Shared {
    workspace: Workspace,
    baseline: Snapshot,
    before: Mutex<Option<Snapshot>>,
    current: Mutex<IterationReport>,
    protected: Protected,
    /// What checking the protected files after the agent's turn found, for the protect
    /// evaluator.
    protect_found: Arc<Mutex<Vec<Finding>>>,
    /// Whether the protected files were checked since the agent's turn began.
    protect_checked: AtomicBool,
    diffs: Mutex<Vec<(u32, String)>>,
}

impl Shared {
    fn snapshot(&self) -> Result<Snapshot> {
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
            let changed = match after.map(|after| self.workspace.changed_paths(&self.before(), after)) {
                Some(Ok(changed)) => changed,
                Some(Err(e)) => {
                    tracing::warn!("cannot list what the agent changed, so files it added are not checked: {e}");
                    Vec::new()
                }
                None => Vec::new(),
            };
            self.protected.check_and_restore(&changed)
        })
    }

    /// Put protected files back outside an evaluation — after the verifier ran, after an
    /// iteration that ended before the workspace was read (a timeout), when the loop stops —
    /// saying what was put back.
    fn settle_protected(&self, when: &str) {
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
struct WorkspaceArtifact(Arc<Shared>);

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
struct Verifier {
    exec: ExecEvaluator,
    shared: Arc<Shared>,
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
struct Journal {
    shared: Arc<Shared>,
    agent: Arc<CommandProvider>,
    dir: PathBuf,
    task: String,
    /// Iterations the loop may make: the cap, raised by each answer at the cap.
    limit: Arc<AtomicU32>,
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

pub async fn run(args: UntilArgs, config_path: Option<&Path>) -> Result<Outcome> {
    let config = Config::load(config_path)?;
    let mut flags = RunSpec::default();
    apply_policy_flags(&mut flags, &args.policy)?;
    let mut policy = flags.policy(&config.policy);
    check_reason(policy.max_iterations, args.policy.max_iterations.is_some(), args.reason.as_deref())?;
    if args.on_cap == OnCap::Ask {
        policy.on_escalation = OnEscalation::Await;
    }
    if args.agent.is_empty() {
        return Err(anyhow!(
            "no agent command was given\nhint: put it after `--`, e.g. `redraft until --verify 'cargo test' -- my-agent --fix`"
        ));
    }
    let root = std::env::current_dir().map_err(|e| anyhow!("cannot read the current directory: {e}"))?;
    let prompt = match &args.prompt {
        Some(p) => input::text_or_file(p, "prompt")?,
        None => format!("Make the verifier pass: `{}` must exit with status 0.", args.verify),
    };
    let task_id = match &args.task {
        Some(t) => valid_task(t)?,
        None => default_task(&prompt),
    };
    let sandbox = args.sandbox.as_deref().map(|s| config.sandbox(s)).transpose()?;
    let _lock = Lock::acquire(&root, &task_id)?;
    // Before the first agent run: what is protected is what the files are now.
    let protected = Protected::capture(&root, &args.protect)?;
    for glob in protected.unmatched() {
        eprintln!(
            "warning: `--protect {glob}` matches no file in `{}`; it only stops the agent adding files there\nhint: globs are relative to the working directory; `*` stops at `/`, `dir` or `dir/**` covers everything under `dir`",
            root.display()
        );
    }

    let workspace = Workspace::open(&root)?;
    let baseline = tokio::task::block_in_place(|| workspace.snapshot())?;
    let timeout = policy.attempt_timeout;
    let agent = Arc::new(
        CommandProvider::new(
            format!("command/{}", agent_name(&args.agent)),
            AgentCommand::Argv(args.agent.clone()),
            &root,
        )
        .timeout(timeout)
        .sandbox(sandbox.clone())
        .require_success(false),
    );
    let mut verifier_exec = ExecEvaluator::new(&args.verify, &root).timeout(timeout).extension("txt");
    if let Some(s) = &sandbox {
        verifier_exec = verifier_exec.sandbox(s.clone());
    }
    let dir = report::task_dir(&root, &task_id);
    let max = policy.max_iterations;
    let limit = Arc::new(AtomicU32::new(max));

    let mut task_text = prompt.clone();
    task_text.push_str(&format!("\n\nWhen you are done, this command must pass (exit 0): `{}`", args.verify));
    if protected.has_rules() {
        let globs: Vec<String> = args.protect.iter().map(|g| format!("`{g}`")).collect();
        task_text.push_str(&format!("\nDo not change, add or delete files matching: {}", globs.join(", ")));
    }
    let shared = Arc::new(Shared {
        workspace,
        baseline,
        before: Mutex::new(None),
        current: Mutex::new(IterationReport {
            agent_command: agent.display(),
            verifier_command: args.verify.clone(),
            ..IterationReport::default()
        }),
        protected,
        protect_found: Arc::new(Mutex::new(Vec::new())),
        protect_checked: AtomicBool::new(true),
        diffs: Mutex::new(Vec::new()),
    });
    let mut builder = Runner::builder()
        .provider(agent.clone())
        .policy(policy.clone())
        .mode(Mode::Text)
        .strategy(Strategy::Fresh)
        .artifact_source(Arc::new(WorkspaceArtifact(shared.clone())))
        .evaluator(Arc::new(ProtectEvaluator { found: shared.protect_found.clone() }))
        .evaluator(Arc::new(Verifier { exec: verifier_exec, shared: shared.clone() }))
        .observer(Arc::new(Journal {
            shared: shared.clone(),
            agent: agent.clone(),
            dir: dir.clone(),
            task: task_id.clone(),
            limit: limit.clone(),
        }));
    builder = builder.feedback_max_chars(config.feedback_max_chars).temperature_step(config.temperature_step);
    if let Some(t) = flags.temperature.or(config.temperature) {
        builder = builder.temperature(t);
    }
    let show_progress = match args.progress {
        Progress::Always => true,
        Progress::Never => false,
        Progress::Auto => std::io::stderr().is_terminal(),
    };
    if show_progress {
        builder = builder.observer(Arc::new(ProgressLines { max_iterations: max }));
    }
    let runner = builder.build()?;

    let cancel = CancellationToken::new();
    let on_ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_ctrl_c.cancel();
        }
    });
    let task = Task::new(task_text);
    let mut answers: Vec<PersonReply> = Vec::new();
    let mut options = RunOptions { cancel: cancel.clone(), ..RunOptions::default() };
    let result = loop {
        let result = match runner.run_with(task.clone(), options.clone()).await {
            Ok(r) => r,
            Err(e) => {
                shared.settle_protected("when the loop stopped");
                return Err(e.into());
            }
        };
        if result.status != RunStatus::AwaitingInput {
            break result;
        }
        // `--on-cap ask`: the person decides whether the loop goes on, and with what.
        shared.settle_protected("when the loop reached its cap");
        match ask(&result, max, &cancel).await? {
            Some(reply) => {
                limit.fetch_add(reply.max_iterations, Ordering::SeqCst);
                answers.push(reply);
                options = RunOptions {
                    run_id: Some(result.run_id.clone()),
                    cancel: cancel.clone(),
                    restore: result.history.clone(),
                    answers: answers.clone(),
                };
            }
            None => break RunResult { status: RunStatus::Failed, ..result },
        }
    };
    shared.settle_protected("when the loop stopped");

    let now = shared.snapshot()?;
    let changes = tokio::task::block_in_place(|| shared.workspace.stat(&shared.baseline, &now))
        .unwrap_or_else(|e| format!("(cannot list the changes: {e})"));
    let written = if result.succeeded() {
        let cumulative = tokio::task::block_in_place(|| shared.workspace.diff(&shared.baseline, &now))?;
        report::write_final(&dir, &task_id, &args.verify, &result, &cumulative)?
    } else {
        let diffs = shared.diffs.lock().map(|d| d.clone()).unwrap_or_default();
        let include = config.decide.escalation_includes_diff.then_some(diffs.as_slice());
        report::write_escalation(&dir, &task_id, &args.verify, &result, include)?
    };
    if !args.no_decisions {
        let entry = decisions::Entry {
            task: &task_id,
            prompt: &prompt,
            verify: &args.verify,
            result: &result,
            max_iterations: max,
            reason: args.reason.as_deref(),
            changes: &changes,
            report: written.strip_prefix(&root).unwrap_or(&written),
            answers: &answers,
            at: &redraft::clock::now_rfc3339(),
        };
        let path = root.join(&args.decisions);
        // The loop's own reports are written; a decisions file that cannot be is said, not fatal.
        if let Err(e) = decisions::append(&path, &entry) {
            eprintln!("warning: {e}");
        }
    }
    if args.json {
        let mut stdout = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut stdout, &result)?;
        writeln!(stdout)?;
    }
    if result.succeeded() {
        eprintln!(
            "redraft: `{}` passes after {} iteration(s); see {}",
            args.verify,
            result.iterations,
            written.display()
        );
        Ok(Outcome::Success)
    } else {
        eprint!("{}", crate::output::escalation_text(&result));
        eprintln!("see {}", written.display());
        Ok(Outcome::Failed)
    }
}

/// Loops of more than this many iterations need a reason, recorded with their outcome.
const ITERATIONS_WITHOUT_REASON: u32 = 3;

/// Refuse a cap above 3 iterations without a reason (from `--max-iter`, or the config when
/// `flagged` is false).
fn check_reason(max: u32, flagged: bool, reason: Option<&str>) -> Result<()> {
    if max <= ITERATIONS_WITHOUT_REASON || reason.is_some_and(|r| !r.trim().is_empty()) {
        return Ok(());
    }
    let from =
        if flagged { format!("`--max-iter {max}`") } else { format!("`max_iterations = {max}` from the config") };
    Err(anyhow!(
        "{from} lets the agent loop more than {ITERATIONS_WITHOUT_REASON} times, which needs a reason\nhint: say why with `--reason TEXT` (it is written in decisions.md), or use `--max-iter {ITERATIONS_WITHOUT_REASON}` or fewer"
    ))
}

/// Show the escalation of a loop that hit its cap and ask for an answer on the terminal:
/// `None` when the person gives none (an empty line, end of input, Ctrl-C).
async fn ask(result: &RunResult, max: u32, cancel: &CancellationToken) -> Result<Option<PersonReply>> {
    eprint!("{}", crate::output::escalation_text(result));
    let question = result.escalation.as_ref().map(|e| e.question.clone()).unwrap_or_default();
    eprint!("Your answer, given to the agent for {max} more iteration(s) (empty to stop): ");
    let _ = std::io::stderr().flush();
    let read = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    });
    let line = tokio::select! {
        read = read => read.map_err(|e| anyhow!("cannot read the answer: {e}"))?.map_err(|e| anyhow!("cannot read the answer: {e}"))?,
        () = cancel.cancelled() => String::new(),
    };
    let answer = line.trim();
    if answer.is_empty() {
        eprintln!("\nredraft: no answer: the loop stops here");
        return Ok(None);
    }
    Ok(Some(PersonReply {
        question,
        answer: answer.to_owned(),
        max_iterations: max,
        after_iteration: result.iterations,
        answered_at: Some(redraft::clock::now_rfc3339()),
    }))
}

fn agent_name(argv: &[String]) -> String {
    argv.first()
        .map(|a| Path::new(a).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| a.clone()))
        .unwrap_or_else(|| "agent".to_owned())
}

fn valid_task(task: &str) -> Result<String> {
    if task.is_empty()
        || task.len() > 100
        || !task.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        || task.starts_with('.')
    {
        return Err(anyhow!(
            "`--task {task}` is not a usable name\nhint: use letters, digits, `-`, `_` and `.`, e.g. `--task fix-login`"
        ));
    }
    Ok(task.to_owned())
}

/// A slug of the prompt plus today's date: `make-the-verifier-pass-2026-11-22`.
fn default_task(prompt: &str) -> String {
    let mut slug = String::new();
    for word in prompt.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).take(6) {
        if slug.len() + word.len() > 40 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&word.to_ascii_lowercase());
    }
    if slug.is_empty() {
        slug.push_str("task");
    }
    format!("{slug}-{}", redraft::clock::today())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_slugs() {
        let t = default_task("Fix the failing login test, please!");
        assert!(t.starts_with("fix-the-failing-login-test-please-"), "{t}");
        assert!(valid_task("../x").is_err());
        assert!(valid_task("fix-login_2").is_ok());
    }
}
