//! `exec:CMD`: a command judges the artifact — tests, compilers, linters, any script.
//!
//! The artifact is written to a temporary file (`.json`, or `.txt` for text); `$ARTIFACT`
//! holds its path and `{artifact}` in the command is replaced by the shell-quoted path. The
//! artifact's text never becomes part of the command line, so an artifact holding `$(…)`,
//! backticks, quotes or newlines cannot execute. Exit 0 passes; anything else fails with the
//! issues read from the output. A JSON object `{"score": x, "issues": [...]}` on stdout is a
//! graded verdict.
//!
//! The command runs under `redraft_sandbox`'s supervisor: at the timeout, when the evaluation is
//! cancelled, and for whatever it leaves behind when it exits, every process it started is
//! killed, including processes that called `setsid` or double-forked. Stdout and stderr are kept
//! together up to 1 MiB (head and tail of a longer stream), and the issues read from them carry
//! at most `diagnostics::MAX_TEXT_CHARS` characters of it.

use std::path::PathBuf;
use std::time::Duration;

use redraft_core::diagnostics::{self, EXIT_STATUS};
use redraft_core::{EvalInput, Evaluator, EvaluatorError, Issue, Score, Severity, Verdict, Work, codes};
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

    /// Kill the command, and every process it started, after this long. By default, 120 s.
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
            if out.success() {
                return Ok(Verdict { wall_ms, ..graded });
            }
            // A graded verdict refines a verifier that exits 0; one that does not never passes,
            // whatever it printed (the code under test can print a verdict too).
            let mut issues = graded.issues;
            issues.push(Issue::new(
                "",
                EXIT_STATUS,
                format!(
                    "the verifier `{}` {}: it passes only when it exits with status 0",
                    self.command,
                    how_it_ended(out)
                ),
            ));
            return Ok(Verdict { wall_ms, score: Score::ZERO, passed: false, ..Verdict::from_issues(issues) });
        }
        if out.success() {
            return Ok(Verdict { wall_ms, ..Verdict::pass() });
        }
        let mut issues = diagnostics::issues_from_output(&out.combined(), TAIL_LINES);
        let status = how_it_ended(out);
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

/// How a command that did not exit with 0 ended: `exited with status 1`, `was killed by signal 9`.
fn how_it_ended(out: &Output) -> String {
    match (out.status, out.signal) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        (None, None) => "failed".to_owned(),
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

    /// Runs a command and reads its bounded output in one pass: it computes little.
    fn work(&self) -> Work {
        Work::Wait
    }

    async fn evaluate(&self, input: EvalInput<'_>) -> Result<Verdict, EvaluatorError> {
        let out = self.run(input.artifact).await?;
        self.verdict(&out)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use redraft_testkit::processes::{eventually, live_marked, token};

    use super::*;

    /// A script starting a sleeper in a session of its own, waiting until it runs, then `rest`.
    fn escaping(token: &str, rest: &str) -> String {
        format!(
            "setsid sh -c 'echo $$ > escapee.tmp; mv escapee.tmp escapee; exec sleep {token}' >/dev/null 2>&1 &
             while [ ! -e escapee ]; do sleep 0.01; done; {rest}"
        )
    }

    fn escapee(dir: &Path) -> u32 {
        std::fs::read_to_string(dir.join("escapee")).unwrap().trim().parse().unwrap()
    }

    #[tokio::test]
    async fn a_graded_verdict_passes_only_when_the_verifier_exits_0() {
        let dir = tempfile::tempdir().unwrap();
        let accepted = |v: &Verdict| v.score.get() >= 1.0 && !v.issues.iter().any(Issue::is_error);
        // The code under test prints a verdict, then the tests fail, or the verifier is killed.
        for script in
            [r#"echo '{"score": 1.0, "issues": []}'; exit 1"#, r#"echo '{"score": 1, "passed": true}'; kill -9 $$"#]
        {
            let ev = ExecEvaluator::new(script, dir.path());
            let verdict = ev.verdict(&ev.run(&json!({"n": 1})).await.unwrap()).unwrap();
            assert!(!accepted(&verdict) && !verdict.passed, "{script}: {verdict:?}");
            assert!(verdict.issues.iter().any(|i| i.code == EXIT_STATUS && i.message.contains("exits with status 0")));
        }
        // A verifier that exits 0 grades as it says.
        let ev = ExecEvaluator::new(r#"echo '{"score": 0.5, "issues": ["half"]}'"#, dir.path());
        let verdict = ev.verdict(&ev.run(&json!({"n": 1})).await.unwrap()).unwrap();
        assert_eq!(verdict.score.get(), 0.5);
        let ev = ExecEvaluator::new(r#"echo '{"score": 1}'"#, dir.path());
        assert!(accepted(&ev.verdict(&ev.run(&json!({"n": 1})).await.unwrap()).unwrap()));
    }

    #[tokio::test]
    async fn a_verifier_that_escapes_with_setsid_is_killed_at_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let token = token();
        let ev =
            ExecEvaluator::new(escaping(&token, &format!("sleep {token}")), dir.path()).timeout(Duration::from_secs(2));
        let out = ev.run(&json!({"n": 1})).await.unwrap();
        assert!(out.timed_out, "{out:?}");
        let verdict = ev.verdict(&out).unwrap();
        assert!(!verdict.passed && verdict.issues[0].code == codes::TIMEOUT, "{verdict:?}");
        let pid = escapee(dir.path());
        assert!(
            eventually(Duration::from_secs(5), || live_marked(&token).is_empty()).await,
            "left running: {:?} (escapee {pid})",
            live_marked(&token)
        );
    }

    #[tokio::test]
    async fn a_verifier_leaves_nothing_behind_when_it_exits() {
        let dir = tempfile::tempdir().unwrap();
        let token = token();
        let ev = ExecEvaluator::new(escaping(&token, "echo 'test.py:3: assert 1 == 2'; exit 1"), dir.path());
        let out = ev.run(&json!({"n": 1})).await.unwrap();
        let verdict = ev.verdict(&out).unwrap();
        assert!(!verdict.passed && verdict.issues[0].path == "test.py:3", "{verdict:?}");
        let pid = escapee(dir.path());
        assert!(live_marked(&token).is_empty(), "left running: {:?} (escapee {pid})", live_marked(&token));
    }

    #[tokio::test]
    async fn a_cancelled_evaluation_kills_the_verifier_and_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let token = token();
        let ev = ExecEvaluator::new(escaping(&token, &format!("sleep {token}")), dir.path());
        let artifact = json!({"n": 1});
        let mut running = Box::pin(ev.run(&artifact));
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !dir.path().join("escapee").exists() {
            assert!(std::time::Instant::now() < deadline, "the escapee did not start");
            assert!(tokio::time::timeout(Duration::from_millis(50), &mut running).await.is_err(), "run finished");
        }
        assert!(!live_marked(&token).is_empty());
        drop(running);
        assert!(
            eventually(Duration::from_secs(5), || live_marked(&token).is_empty()).await,
            "left running: {:?}",
            live_marked(&token)
        );
    }

    #[tokio::test]
    async fn a_gibibyte_of_verifier_output_is_capped_and_its_issue_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let ev = ExecEvaluator::new(
            "head -c 1073741824 /dev/zero | tr '\\0' x; echo; echo '1 failed, 2 passed'; exit 1",
            dir.path(),
        );
        let out = ev.run(&json!({"n": 1})).await.unwrap();
        assert_eq!(out.status, Some(1), "{:?}", (out.signal, out.timed_out));
        assert!(out.stdout.len() + out.stderr.len() <= redraft_sandbox::DEFAULT_OUTPUT_CAP, "{}", out.stdout.len());
        let verdict = ev.verdict(&out).unwrap();
        let x: usize = verdict.issues.iter().map(|i| i.message.matches('x').count()).sum();
        assert!(x <= diagnostics::MAX_TEXT_CHARS, "{x} characters of output in the issues");
        assert!(verdict.issues.iter().any(|i| i.message.ends_with("1 failed, 2 passed")), "{:?}", verdict.issues.len());
    }
}
