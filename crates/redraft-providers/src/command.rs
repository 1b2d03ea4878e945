//! `command/NAME` and ad hoc agents (`-- AGENT ARGS…`): a command-line program proposes.
//!
//! The prompt (task plus feedback) reaches the program three ways at once — on stdin, in the
//! file named by `$REDRAFT_PROMPT_FILE`, and in place of `{prompt}` in its arguments
//! (shell-quoted for a shell command, verbatim for an argument vector) — with
//! `$REDRAFT_ITERATION` and `$REDRAFT_MAX_ITERATIONS` set. Its stdout is the raw output. A
//! line `{"usage": {"input_tokens": n, "output_tokens": m, "cost_usd": x}}` on stderr is taken
//! as reported usage.
//!
//! The agent runs under `redraft_sandbox`'s supervisor: at the timeout, when the attempt is
//! cancelled, and for whatever it leaves behind when it exits, every process it started is
//! killed, including processes that called `setsid` or double-forked. Its stdout and stderr are
//! kept together up to 1 MiB.

use std::path::PathBuf;
use std::time::Duration;

use redraft_core::diagnostics::cut_middle;
use redraft_core::{ChatProvider, ChatRequest, ChatResponse, ProviderError, Usage};
use redraft_sandbox::{Command, Output, Program, Sandbox, shell_quote};
use serde_json::Value;

/// At most this many characters of the agent's stderr go into the error when it fails.
pub const FAILURE_TAIL_CHARS: usize = 2000;

/// How the agent is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentCommand {
    /// `sh -c SCRIPT` (from config).
    Shell(String),
    /// Executed directly, no shell (ad hoc `-- AGENT ARGS…`).
    Argv(Vec<String>),
}

/// A command-line proposer.
#[derive(Debug, Clone)]
pub struct CommandProvider {
    name: String,
    command: AgentCommand,
    workdir: PathBuf,
    timeout: Duration,
    sandbox: Option<Sandbox>,
    require_success: bool,
    max_response_bytes: usize,
    last: std::sync::Arc<std::sync::Mutex<Option<Output>>>,
}

impl CommandProvider {
    /// An agent named `name` (as in `command/NAME`) started as `command` in `workdir`.
    pub fn new(name: impl Into<String>, command: AgentCommand, workdir: impl Into<PathBuf>) -> Self {
        Self {
            name: name.into(),
            command,
            workdir: workdir.into(),
            timeout: Duration::from_secs(120),
            sandbox: None,
            require_success: true,
            max_response_bytes: crate::DEFAULT_MAX_RESPONSE_BYTES,
            last: Default::default(),
        }
    }

    /// Kill the agent, and every process it started, after this long. By default, 120 s.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Run inside this sandbox.
    pub fn sandbox(mut self, sandbox: Option<Sandbox>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// Whether a non-zero exit is a proposer failure. Agents that edit a workspace are judged
    /// by the verifier instead, so their exit status is only recorded. By default, true.
    pub fn require_success(mut self, yes: bool) -> Self {
        self.require_success = yes;
        self
    }

    /// The largest stdout taken as an answer, in bytes; a longer one is
    /// [`ProviderError::ResponseTooLarge`]. Stdout is also capped by the sandbox's output capture,
    /// and output cut there counts as too large. Agents that edit a workspace
    /// (`require_success(false)`) are judged by the verifier, not by their stdout, which is then
    /// never too large. By default, 4 MiB.
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// The output of the most recent call (exit status, stderr, duration).
    pub fn last_output(&self) -> Option<Output> {
        self.last.lock().ok().and_then(|l| l.clone())
    }

    /// The command as a person would read it.
    pub fn display(&self) -> String {
        match &self.command {
            AgentCommand::Shell(s) => s.clone(),
            AgentCommand::Argv(args) => args.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" "),
        }
    }

    fn failed(&self, message: String) -> ProviderError {
        ProviderError::Failed { message: format!("the agent `{}` {message}", self.display()).into() }
    }
}

/// The usage an agent reported on stderr, if any: the last line that is a JSON object with a
/// `usage` object.
pub fn reported_usage(stderr: &str) -> Option<(Usage, Option<f64>)> {
    stderr.lines().rev().find_map(|line| {
        let value: Value = serde_json::from_str(line.trim()).ok()?;
        let usage = value.get("usage")?;
        let tokens = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        let cost = usage.get("cost_usd").and_then(Value::as_f64).filter(|c| c.is_finite() && *c >= 0.0);
        Some((Usage { input_tokens: tokens("input_tokens"), output_tokens: tokens("output_tokens") }, cost))
    })
}

#[async_trait::async_trait]
impl ChatProvider for CommandProvider {
    fn name(&self) -> &str {
        &self.name
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        // The program is a model's stand-in: like a model server, it is never shown a known
        // secret (the verifier's output fed back may hold one), on stdin, in the file or in its
        // arguments.
        let prompt = redraft_core::secrets::redact_string(request.as_prompt());
        let dir = tempfile::Builder::new()
            .prefix("redraft-prompt-")
            .tempdir()
            .map_err(|e| self.failed(format!("could not start: cannot create a temporary directory: {e}")))?;
        let prompt_file = dir.path().join("prompt.md");
        std::fs::write(&prompt_file, &prompt)
            .map_err(|e| self.failed(format!("could not start: cannot write `{}`: {e}", prompt_file.display())))?;
        let program = match &self.command {
            AgentCommand::Shell(script) => Program::Shell(script.replace("{prompt}", &shell_quote(&prompt))),
            AgentCommand::Argv(args) => Program::Argv(args.iter().map(|a| a.replace("{prompt}", &prompt)).collect()),
        };
        let mut cmd = Command::shell(String::new(), &self.workdir);
        cmd.program = program;
        cmd.stdin = Some(prompt.clone().into_bytes());
        cmd.timeout = self.timeout;
        cmd.sandbox = self.sandbox.clone();
        cmd.read_only_paths.push(dir.path().to_owned());
        cmd.env.extend([
            ("REDRAFT_PROMPT_FILE".to_owned(), prompt_file.to_string_lossy().into_owned()),
            ("REDRAFT_ITERATION".to_owned(), request.iteration.to_string()),
            ("REDRAFT_MAX_ITERATIONS".to_owned(), request.max_iterations.to_string()),
        ]);
        let out = redraft_sandbox::run(&cmd).await.map_err(|e| self.failed(format!("could not start: {e}")))?;
        if let Ok(mut last) = self.last.lock() {
            *last = Some(out.clone());
        }
        if out.timed_out {
            return Err(self
                .failed(format!("took longer than {} and was killed", redraft_core::duration::format(self.timeout))));
        }
        if self.require_success && !out.success() {
            let tail: Vec<&str> = out.stderr.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
            let status = out.status.map(|c| format!("status {c}")).unwrap_or_else(|| "a signal".to_owned());
            return Err(
                self.failed(format!("exited with {status}: {}", cut_middle(&tail.join("\n"), FAILURE_TAIL_CHARS)))
            );
        }
        // An agent that edits a workspace is judged by the verifier: its stdout is a log, kept
        // as far as the output capture keeps it, never an answer too large.
        let stdout_is_the_answer = self.require_success;
        if stdout_is_the_answer && (out.stdout_truncated || out.stdout.len() > self.max_response_bytes) {
            // Longer than allowed, or cut by the output capture (whose cap may be the lower
            // one): either way not the whole answer.
            let limit = match out.stdout_truncated {
                true => self.max_response_bytes.min(out.stdout.len()),
                false => self.max_response_bytes,
            };
            return Err(ProviderError::ResponseTooLarge { from: self.display(), limit });
        }
        let (usage, cost_usd) = match reported_usage(&out.stderr) {
            Some((u, c)) => (Some(u), c),
            None => (None, None),
        };
        Ok(ChatResponse { text: out.stdout, usage, finish_reason: None, cost_usd, served_model: None })
    }
}

#[cfg(test)]
mod tests {
    use redraft_testkit::processes::{live_marked, token};

    use super::*;

    #[test]
    fn reads_reported_usage_from_stderr() {
        let stderr =
            "working…\n{\"usage\": {\"input_tokens\": 120, \"output_tokens\": 30, \"cost_usd\": 0.002}}\ndone\n";
        let (u, c) = reported_usage(stderr).unwrap();
        assert_eq!(u, Usage { input_tokens: 120, output_tokens: 30 });
        assert_eq!(c, Some(0.002));
        assert!(reported_usage("{\"other\": 1}\nplain").is_none());
    }

    fn request() -> ChatRequest {
        ChatRequest::new(vec![redraft_core::Message::user("fix it")])
    }

    /// An agent that starts a sleeper in a session of its own, waits until it runs, then `rest`.
    fn escaping_agent(dir: &std::path::Path, token: &str, rest: &str) -> CommandProvider {
        let script = format!(
            "cat > /dev/null; setsid sh -c 'echo $$ > escapee.tmp; mv escapee.tmp escapee; exec sleep {token}' >/dev/null 2>&1 &
             while [ ! -e escapee ]; do sleep 0.01; done; {rest}"
        );
        CommandProvider::new("agent", AgentCommand::Shell(script), dir)
    }

    #[tokio::test]
    async fn an_agent_that_escapes_with_setsid_is_killed_at_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let token = token();
        let agent = escaping_agent(dir.path(), &token, &format!("sleep {token}")).timeout(Duration::from_secs(2));
        let err = agent.complete(&request()).await.unwrap_err();
        assert!(err.to_string().contains("took longer than"), "{err}");
        assert!(dir.path().join("escapee").exists());
        // Gone by the time the call returns: the supervisor waits for the last process.
        assert!(live_marked(&token).is_empty(), "left running: {:?}", live_marked(&token));
    }

    #[tokio::test]
    async fn an_agent_leaves_nothing_behind_when_it_exits() {
        let dir = tempfile::tempdir().unwrap();
        let token = token();
        let agent = escaping_agent(dir.path(), &token, "echo '{\"answer\": 42}'");
        let response = agent.complete(&request()).await.unwrap();
        assert_eq!(response.text, "{\"answer\": 42}\n");
        assert!(live_marked(&token).is_empty(), "left running: {:?}", live_marked(&token));
    }

    #[tokio::test]
    async fn a_failing_agent_with_huge_stderr_gives_a_bounded_error() {
        let dir = tempfile::tempdir().unwrap();
        let script = "head -c 3000000 /dev/zero | tr '\\0' e >&2; echo >&2; echo 'the real reason' >&2; exit 2";
        let agent = CommandProvider::new("agent", AgentCommand::Shell(script.into()), dir.path());
        let message = agent.complete(&request()).await.unwrap_err().to_string();
        assert!(message.chars().count() < FAILURE_TAIL_CHARS + 200, "{}", message.len());
        assert!(message.contains("exited with status 2") && message.ends_with("the real reason"), "{message:.200}");
    }
}
