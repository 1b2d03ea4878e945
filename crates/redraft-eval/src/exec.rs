//! `exec:CMD`: a command judges the artifact — tests, compilers, linters, any script.
//!
//! The artifact is written to a temporary file (`.json`, or `.txt` for text); `$ARTIFACT`
//! holds its path and `{artifact}` in the command is replaced by the shell-quoted path. The
//! artifact's text never becomes part of the command line, so an artifact holding `$(…)`,
//! backticks, quotes or newlines cannot execute. Exit 0 passes; anything else fails with the
//! issues read from the output. A JSON object `{"score": x, "issues": [...]}` on stdout is a
//! graded verdict.

use std::path::PathBuf;
use std::time::Duration;

use redraft_core::diagnostics::{self, EXIT_STATUS};
use redraft_core::{EvalInput, Evaluator, EvaluatorError, Issue, Score, Severity, Verdict, codes};
use redraft_sandbox::{Command, Output, Sandbox, shell_quote};
use serde_json::Value;

/// How many trailing lines of unrecognised output become the issue.
pub const TAIL_LINES: usize = 20;

/// A command that judges artifacts.
#[derive(Debug, Clone)]
pub struct ExecEvaluator {
    command: String,
    workdir: PathBuf,
    timeout: Duration,
    extension: Option<String>,
    sandbox: Option<Sandbox>,
}

impl ExecEvaluator {
    /// Run `command` with `sh -c` in `workdir`.
    pub fn new(command: impl Into<String>, workdir: impl Into<PathBuf>) -> Self {
        Self {
            command: command.into(),
            workdir: workdir.into(),
            timeout: Duration::from_secs(120),
            extension: None,
            sandbox: None,
        }
    }

    /// Kill the command (its whole process group) after this long. By default, 120 s.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The artifact file's extension (`py`, `rs`, …). By default, `json`, or `txt` for text.
    pub fn extension(mut self, extension: impl Into<String>) -> Self {
        self.extension = Some(extension.into().trim_start_matches('.').to_owned());
        self
    }

    /// Run inside this sandbox.
    pub fn sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// The command as given.
    pub fn command(&self) -> &str {
        &self.command
    }

    fn failed(&self, message: impl std::fmt::Display) -> EvaluatorError {
        EvaluatorError::Failed { evaluator: format!("exec:{}", self.command), message: message.to_string() }
    }

    /// Run the command on `artifact` and return its raw output.
    pub async fn run(&self, artifact: &Value) -> Result<Output, EvaluatorError> {
        let dir = tempfile::Builder::new()
            .prefix("redraft-artifact-")
            .tempdir()
            .map_err(|e| self.failed(format!("cannot create a temporary directory: {e}")))?;
        let (text, default_ext) = match artifact {
            Value::String(s) => (s.clone(), "txt"),
            other => (serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()), "json"),
        };
        let ext = self.extension.as_deref().unwrap_or(default_ext);
        let path = dir.path().join(format!("artifact.{ext}"));
        std::fs::write(&path, text).map_err(|e| self.failed(format!("cannot write `{}`: {e}", path.display())))?;
        let path_text = path.to_string_lossy().into_owned();
        let script = self.command.replace("{artifact}", &shell_quote(&path_text));
        let mut cmd = Command::shell(script, &self.workdir);
        cmd.env.push(("ARTIFACT".to_owned(), path_text));
        cmd.timeout = self.timeout;
        cmd.sandbox = self.sandbox.clone();
        cmd.read_only_paths.push(dir.path().to_owned());
        redraft_sandbox::run(&cmd).await.map_err(|e| self.failed(e))
    }

    /// The verdict on a finished command.
    pub fn verdict(&self, out: &Output) -> Result<Verdict, EvaluatorError> {
        let wall_ms = u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX);
        if out.timed_out {
            let limit = redraft_core::duration::format(self.timeout);
            let mut issues = vec![Issue::new(
                "",
                codes::TIMEOUT,
                format!("the verifier `{}` took longer than {limit} and was killed", self.command),
            )];
            issues.extend(diagnostics::issues_from_output(&out.combined(), TAIL_LINES).into_iter().take(5));
            return Ok(Verdict { wall_ms, ..Verdict::from_issues(issues) });
        }
        if let Some(graded) = graded(&out.stdout).transpose().map_err(|e| self.failed(e))? {
            return Ok(Verdict { wall_ms, ..graded });
        }
        if out.success() {
            return Ok(Verdict { wall_ms, ..Verdict::pass() });
        }
        let mut issues = diagnostics::issues_from_output(&out.combined(), TAIL_LINES);
        let status = match (out.status, out.signal) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(sig)) => format!("was killed by signal {sig}"),
            (None, None) => "failed".to_owned(),
        };
        if issues.is_empty() {
            issues.push(Issue::new(
                "",
                EXIT_STATUS,
                format!("the verifier `{}` {status} and printed nothing", self.command),
            ));
        } else if let Some(first) = issues.first_mut()
            && first.code == EXIT_STATUS
        {
            first.message = format!("the verifier `{}` {status}:\n{}", self.command, first.message);
        }
        Ok(Verdict { wall_ms, ..Verdict::from_issues(issues) })
    }
}

/// A graded verdict printed on stdout: `{"score": 0.7, "issues": [...], "passed"?: bool}`.
/// Issues may be strings or objects with `path`, `message`, `code`, `severity`.
fn graded(stdout: &str) -> Option<Result<Verdict, String>> {
    let value: Value = serde_json::from_str(stdout.trim()).ok()?;
    let obj = value.as_object()?;
    let score = obj.get("score")?;
    Some((|| {
        let score = score
            .as_f64()
            .and_then(Score::new)
            .ok_or_else(|| format!("its `score` {score} is not a number in [0, 1]"))?;
        let issues = match obj.get("issues") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items.iter().map(graded_issue).collect(),
            Some(other) => return Err(format!("its `issues` must be a list, not {other}")),
        };
        let passed = obj.get("passed").and_then(Value::as_bool).unwrap_or(score.get() >= 1.0);
        Ok(Verdict { score, passed, issues, cost_usd: None, wall_ms: 0 })
    })())
}

fn graded_issue(item: &Value) -> Issue {
    match item {
        Value::String(message) => Issue::new("", "exec", message.clone()),
        Value::Object(o) => {
            let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
            let mut issue = Issue::new(
                text("path").unwrap_or_default(),
                text("code").unwrap_or_else(|| "exec".to_owned()),
                text("message").unwrap_or_else(|| item.to_string()),
            );
            issue.severity = match text("severity").as_deref() {
                Some("warning") => Some(Severity::Warning),
                Some("info") => Some(Severity::Info),
                Some("error") => Some(Severity::Error),
                _ => None,
            };
            issue
        }
        other => Issue::new("", "exec", other.to_string()),
    }
}

#[async_trait::async_trait]
impl Evaluator for ExecEvaluator {
    fn name(&self) -> &str {
        "exec"
    }

    async fn evaluate(&self, input: EvalInput<'_>) -> Result<Verdict, EvaluatorError> {
        let out = self.run(input.artifact).await?;
        self.verdict(&out)
    }
}
