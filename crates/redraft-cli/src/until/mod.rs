//! `redraft until`: agent mode. The artifact is the working directory: each iteration runs
//! the agent (prompt and feedback on stdin, in `$REDRAFT_PROMPT_FILE` and as `{prompt}`), then
//! the verifier, and writes `.redraft/iterations/<task>/<i>.md`; success writes `final.md`,
//! the cap writes `escalation.md`. Protected paths — the `--protect` globs, and redraft's own
//! configuration files in the working directory — are checked and put back as they were before
//! the loop as soon as the agent's turn ends — when the workspace is read, before any evaluator
//! runs —, checked again right before the verifier starts, and put back after any iteration that
//! ended early and at the end of the loop; a change the agent made rejects the iteration. Redraft
//! starts no program of its own on the workspace: snapshots and diffs are its own code.
//!
//! The working directory is pinned when the loop starts (`root`): every operation on it first
//! checks that its path still leads there, and the loop stops when it does not. What the agent or
//! the verifier left running after killing its supervisor is ended before the workspace is read,
//! before the verifier starts, and when the loop ends.
//!
//! It is the one loop: the flags become a [`RunSpec`] (with its `workspace`), prepared like
//! any run, and recorded in the store like any run (`redraft runs show`); agent mode only
//! plugs in the workspace as the artifact, the protect and verify evaluators and the journal
//! (`plug`).

mod decisions;
mod inside;
mod lock;
mod names;
mod plug;
mod protect;
mod reading;
mod report;
mod root;
mod workspace;

use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Result, anyhow};
use redraft::config::Config;
use redraft::core::{OnEscalation, Origin, PersonReply, RunStatus};
use redraft::eval::ExecEvaluator;
use redraft::queue::Worker;
use redraft::recorder::{self, Start};
use redraft::{CancellationToken, RunError, RunResult, RunSpec, Runner, SpecSetup, Task, WorkspaceSpec};

use self::lock::Lock;
use self::plug::{Journal, Shared, Verifier, WorkspaceArtifact};
use self::protect::{ProtectEvaluator, Protected};
use self::report::IterationReport;
use self::root::Root;
use self::workspace::Workspace;
use crate::args::{OnCap, UntilArgs};
use crate::commands::run::apply_policy_flags;
use crate::commands::{Outcome, after_run, cancel_on_ctrl_c, progress_lines};
use crate::input;

pub async fn run(args: UntilArgs, config_path: Option<&Path>) -> Result<Outcome> {
    let config = Config::load(config_path)?;
    let mut spec = RunSpec::default();
    apply_policy_flags(&mut spec, &args.policy)?;
    let max = spec.policy(&config.policy).max_iterations;
    check_reason(max, args.policy.max_iterations.is_some(), args.reason.as_deref())?;
    if args.agent.is_empty() {
        return Err(anyhow!(
            "no agent command was given\nhint: put it after `--`, e.g. `redraft until --verify 'cargo test' -- my-agent --fix`"
        ));
    }
    let cwd = std::env::current_dir().map_err(|e| anyhow!("cannot read the current directory: {e}"))?;
    let root = Arc::new(Root::pin(&cwd)?);
    let prompt = match &args.prompt {
        Some(p) => input::text_or_file(p, "prompt")?,
        None => format!("Make the verifier pass: `{}` must exit with status 0.", args.verify),
    };
    let task_id = match &args.task {
        Some(t) => valid_task(t)?,
        None => default_task(&prompt),
    };
    let _lock = Lock::acquire(root.clone(), &task_id)?;
    // A process the agent detaches from its supervisor (by killing it) is re-parented here, not
    // to init, so that it can be found and stopped before the verifier runs.
    redraft::sandbox::adopt_orphans()?;
    // Before the first agent run: what is protected is what the files are now. Redraft's own
    // configuration files in the working directory are protected in every loop: the next loop
    // would read what the agent wrote there.
    let config_files = config_files(&root, config_path);
    let protected = Protected::capture(root.clone(), &args.protect, &config_files)?;
    for glob in protected.unmatched() {
        eprintln!(
            "warning: `--protect {glob}` matches no file in `{}`; it only stops the agent adding files there\nhint: globs are relative to the working directory; `*` stops at `/`, `dir` or `dir/**` covers everything under `dir`",
            root.path().display()
        );
    }
    let mut task_text = prompt.clone();
    task_text.push_str(&format!("\n\nWhen you are done, this command must pass (exit 0): `{}`", args.verify));
    if protected.has_globs() {
        let globs: Vec<String> = args.protect.iter().map(|g| format!("`{g}`")).collect();
        task_text.push_str(&format!("\nDo not change, add or delete files matching: {}", globs.join(", ")));
    }
    if !config_files.is_empty() {
        let files: Vec<String> = config_files.iter().map(|f| format!("`{}`", names::shown(f))).collect();
        task_text.push_str(&format!(
            "\nDo not create, change or delete redraft's configuration: {} (a change is undone and rejects the iteration)",
            files.join(", ")
        ));
    }
    // The one request shape: what is recorded, and what the runner is prepared from.
    let spec = RunSpec {
        prompt: task_text,
        agent: Some(args.agent.clone()),
        text: true,
        sandbox: args.sandbox.clone(),
        on_escalation: (args.on_cap == OnCap::Ask).then_some(OnEscalation::Await),
        workspace: Some(WorkspaceSpec {
            verify: args.verify.clone(),
            protect: args.protect.clone(),
            task: task_id.clone(),
        }),
        ..spec
    };
    let prepared = spec.prepare(&SpecSetup::local(&config, root.path().to_owned()))?;
    let agent = prepared.agent.clone().ok_or_else(|| anyhow!("the agent command was not prepared"))?;

    // The ignore rules of the reports are read here, once, before the agent's first turn.
    let workspace = tokio::task::block_in_place(|| Workspace::open(root.clone()))?;
    let baseline = tokio::task::block_in_place(|| workspace.snapshot())?;
    let timeout = spec.policy(&config.policy).attempt_timeout;
    let mut verifier = ExecEvaluator::new(&args.verify, root.path()).timeout(timeout).extension("txt");
    // The verifier runs in the sandbox the spec's agent got.
    if let Some(s) = &prepared.sandbox {
        verifier = verifier.sandbox(s.clone());
    }
    let dir = report::task_dir(root.path(), &task_id);
    let limit = Arc::new(AtomicU32::new(max));
    let cancel = cancel_on_ctrl_c();
    let shared = Arc::new(Shared {
        root: root.clone(),
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
        cancel: cancel.clone(),
        moved: Mutex::new(None),
    });
    // Agent mode plugs the workspace into the loop: the artifact, two evaluators, the journal.
    let runner = prepared
        .runner
        .with_artifact_source(Arc::new(WorkspaceArtifact(shared.clone())))
        .with_evaluator(Arc::new(ProtectEvaluator { found: shared.protect_found.clone() }), false)
        .with_evaluator(Arc::new(Verifier { exec: verifier, shared: shared.clone() }), false)
        .with_observer(Arc::new(Journal {
            shared: shared.clone(),
            agent,
            dir: dir.clone(),
            task: task_id.clone(),
            limit: limit.clone(),
        }));
    let worker =
        if args.no_store { None } else { Some(Worker::start(redraft::store::open(&config).await?, &config.queue)) };
    let how = Start {
        run_id: Some(redraft::new_run_id()),
        observers: progress_lines(args.progress, max).into_iter().collect(),
        cancel: cancel.clone(),
        ..Start::default()
    };
    let task = prepared.task;
    let first = match &worker {
        Some(worker) => {
            recorder::start_prepared(&spec, Origin::Cli, runner.clone(), task.clone(), worker, how.clone()).await
        }
        None => recorder::run_unrecorded(runner.clone(), task.clone(), how.clone()).await.map_err(RunError::from),
    };
    let first = match first {
        Ok(result) => result,
        Err(e) => {
            shared.settle_protected("when the loop stopped").await;
            if let Some(moved) = stopped(&shared) {
                return Err(after_run(moved));
            }
            return Err(e.into());
        }
    };
    // From here on the agent has run: an error exits 1, not 2.
    let looped = Looped { runner, task, worker, how, max, limit, cancel };
    let done = looped.until_done(first, &shared).await;
    // The working directory is no longer the one the loop began in: nothing more is written.
    if let Some(moved) = stopped(&shared) {
        return Err(after_run(moved));
    }
    let (result, answers) = done.map_err(after_run)?;
    let ended = Ended { args: &args, config: &config, root: &root, dir: &dir, task_id: &task_id, prompt: &prompt, max };
    ended.write(&result, &answers, &shared).map_err(after_run)
}

/// Why the loop stopped on its own, when it did (the working directory moved), as an error.
fn stopped(shared: &Shared) -> Option<anyhow::Error> {
    shared.moved().map(anyhow::Error::from)
}

/// Redraft's configuration files that lie in the working directory, relative to it: every file
/// the configuration is read from (the XDG file, `--config` or `./redraft.toml`), there or not,
/// and `./redraft.toml` always, since a later loop without `--config` would read it. Each is
/// protected where its name puts it (a link there is protected as the link: the agent could
/// replace it) and, when that is a link into the working directory, where it leads too.
fn config_files(root: &Root, explicit: Option<&Path>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let places = redraft::config::Config::file_places(explicit).into_iter().chain([PathBuf::from("redraft.toml")]);
    for place in places {
        let named = root.relative(&place).map(Path::to_owned);
        for rel in named.into_iter().chain(resolved_inside(root, &place)) {
            if !files.contains(&rel) {
                files.push(rel);
            }
        }
    }
    files
}

/// `path` (absolute, or relative to the working directory) relative to the working directory,
/// when it lies there once links are followed: its deepest part that exists is resolved, the rest
/// taken as written.
fn resolved_inside(root: &Root, path: &Path) -> Option<PathBuf> {
    let path = root.path().join(path);
    let mut rest = Vec::new();
    let mut existing = path.as_path();
    let resolved = loop {
        if let Ok(resolved) = std::fs::canonicalize(existing) {
            break resolved;
        }
        rest.push(existing.file_name()?.to_owned());
        existing = existing.parent()?;
    };
    let mut full = resolved;
    for part in rest.iter().rev() {
        full.push(part);
    }
    let rel = full.strip_prefix(root.path()).ok()?;
    let plain = rel.components().all(|c| matches!(c, Component::Normal(_)));
    (plain && !rel.as_os_str().is_empty()).then(|| rel.to_owned())
}

/// The loop after its first round, for `--on-cap ask`: each answer goes on with the same run.
struct Looped {
    runner: Runner,
    task: Task,
    worker: Option<Arc<Worker>>,
    how: Start,
    max: u32,
    limit: Arc<AtomicU32>,
    cancel: CancellationToken,
}

impl Looped {
    /// Ask a person at each cap the run reaches awaiting an answer; their answer continues it
    /// (recorded in the store with the run), an empty one ends it as failed.
    async fn until_done(mut self, mut result: RunResult, shared: &Shared) -> Result<(RunResult, Vec<PersonReply>)> {
        let mut answers = Vec::new();
        loop {
            if result.status != RunStatus::AwaitingInput || shared.moved().is_some() {
                shared.settle_protected("when the loop stopped").await;
                return Ok((result, answers));
            }
            // `--on-cap ask`: the person decides whether the loop goes on, and with what.
            shared.settle_protected("when the loop reached its cap").await;
            let Some(reply) = ask(&result, self.max, &self.cancel).await? else {
                shared.settle_protected("when the loop stopped").await;
                // No answer: the run fails, in the store too (it no longer awaits one).
                let failed = match &self.worker {
                    Some(worker) => worker.store().abort_run(&result.run_id).await?,
                    None => RunResult { status: RunStatus::Failed, ..result },
                };
                return Ok((failed, answers));
            };
            self.limit.fetch_add(reply.max_iterations, Ordering::SeqCst);
            answers.push(reply.clone());
            self.how.restore = result.history.clone();
            self.how.answers = answers.clone();
            let (runner, task, how) = (self.runner.clone(), self.task.clone(), self.how.clone());
            let next = match &self.worker {
                Some(worker) => recorder::answered(runner, task, &reply, worker, how).await,
                None => recorder::run_unrecorded(runner, task, how).await.map_err(RunError::from),
            };
            result = match next {
                Ok(result) => result,
                Err(e) => {
                    shared.settle_protected("when the loop stopped").await;
                    return Err(e.into());
                }
            };
        }
    }
}

/// What a finished loop leaves: `final.md` or `escalation.md`, an entry in decisions.md, the
/// result on stdout with `--json`, and a line on stderr.
struct Ended<'a> {
    args: &'a UntilArgs,
    config: &'a Config,
    root: &'a Root,
    dir: &'a Path,
    task_id: &'a str,
    prompt: &'a str,
    max: u32,
}

impl Ended<'_> {
    fn write(&self, result: &RunResult, answers: &[PersonReply], shared: &Shared) -> Result<Outcome> {
        let args = self.args;
        let now = shared.snapshot()?;
        let changes = tokio::task::block_in_place(|| shared.workspace.stat(&shared.baseline, &now))
            .unwrap_or_else(|e| format!("(cannot list the changes: {e})"));
        let written = if result.succeeded() {
            let cumulative = tokio::task::block_in_place(|| shared.workspace.diff(&shared.baseline, &now))?;
            report::write_final(self.root, self.dir, self.task_id, &args.verify, result, &cumulative)?
        } else {
            let diffs = shared.diffs.lock().map(|d| d.clone()).unwrap_or_default();
            let include = self.config.decide.escalation_includes_diff.then_some(diffs.as_slice());
            report::write_escalation(self.root, self.dir, self.task_id, &args.verify, result, include)?
        };
        if !args.no_decisions {
            let entry = decisions::Entry {
                task: self.task_id,
                prompt: self.prompt,
                verify: &args.verify,
                result,
                max_iterations: self.max,
                reason: args.reason.as_deref(),
                changes: &changes,
                report: written.strip_prefix(self.root.path()).unwrap_or(&written),
                answers,
                at: &redraft::clock::now_rfc3339(),
            };
            let path = self.root.path().join(&args.decisions);
            // The loop's own reports are written; a decisions file that cannot be is said, not fatal.
            if let Err(e) = decisions::append(self.root, &path, &entry) {
                eprintln!("warning: {e}");
            }
        }
        if args.json {
            let mut stdout = crate::redacted::stdout();
            serde_json::to_writer_pretty(&mut stdout, result)?;
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
            eprint!("{}", crate::output::escalation_text(result));
            eprintln!("see {}", written.display());
            Ok(Outcome::Failed)
        }
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
    fn configuration_files_are_protected_where_named_and_where_a_link_leads() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = Root::pin(dir.path()).unwrap();
        let ws = root.path();
        std::fs::write(outside.path().join("shared.toml"), "").unwrap();
        std::os::unix::fs::symlink(outside.path().join("shared.toml"), ws.join("redraft.toml")).unwrap();
        std::fs::create_dir(ws.join("conf")).unwrap();
        std::fs::write(ws.join("conf/real.toml"), "").unwrap();
        std::os::unix::fs::symlink("conf/real.toml", ws.join("mine.toml")).unwrap();
        let files = |explicit: Option<&Path>| -> Vec<String> {
            config_files(&root, explicit).iter().map(|f| names::shown(f)).collect()
        };
        // A link to a file outside is protected as the link.
        assert!(files(None).contains(&"redraft.toml".to_owned()), "{:?}", files(None));
        // A link to a file inside: the link and the file.
        let named = files(Some(Path::new("mine.toml")));
        assert!(named.contains(&"mine.toml".to_owned()) && named.contains(&"conf/real.toml".to_owned()), "{named:?}");
        let absolute = files(Some(&ws.join("conf/real.toml")));
        assert!(absolute.contains(&"conf/real.toml".to_owned()), "{absolute:?}");
        // A file outside the working directory is not the loop's to protect.
        let elsewhere = files(Some(&outside.path().join("shared.toml")));
        assert!(!elsewhere.iter().any(|f| f.contains("shared")), "{elsewhere:?}");
    }

    #[test]
    fn dates_and_slugs() {
        let t = default_task("Fix the failing login test, please!");
        assert!(t.starts_with("fix-the-failing-login-test-please-"), "{t}");
        assert!(valid_task("../x").is_err());
        assert!(valid_task("fix-login_2").is_ok());
    }
}
