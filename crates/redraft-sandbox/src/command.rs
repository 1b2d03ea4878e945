//! What to run ([`Command`]) and what came out ([`Output`]).

use std::path::PathBuf;
use std::time::Duration;

use crate::Sandbox;

/// How long a command may run before it and every process it started are terminated.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a terminated command (or a process it left behind) gets between `SIGTERM` and `SIGKILL`.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(2);
/// How many bytes of output are kept, stdout and stderr together (1 MiB in all).
pub const DEFAULT_OUTPUT_CAP: usize = 1 << 20;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// A script for `sh -c SCRIPT`.
    Shell(String),
    /// A program and its arguments, executed directly (no shell); the program is looked up on `PATH`.
    Argv(Vec<String>),
}

impl Program {
    /// The program name used in messages: `sh` for a script, the first word of an argv.
    pub fn name(&self) -> &str {
        match self {
            Program::Shell(_) => "sh",
            Program::Argv(args) => args.first().map_or("", String::as_str),
        }
    }
}

/// A command to run with [`run`](crate::run): the program, where, with what, for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// What to run.
    pub program: Program,
    /// The working directory. [`Sandbox::workdir`] overrides it.
    pub workdir: PathBuf,
    /// Variables set on top of the inherited (or, with a sandbox, filtered) environment. By default, none.
    pub env: Vec<(String, String)>,
    /// Bytes written to the command's stdin, which is then closed. By default, `None`: stdin is `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// How long the command may run before it and every process it started are terminated. By
    /// default, [`DEFAULT_TIMEOUT`] (120 s).
    pub timeout: Duration,
    /// How long terminated processes get between `SIGTERM` and `SIGKILL`: at the timeout, and for
    /// processes the command leaves behind when it exits. By default, [`DEFAULT_KILL_GRACE`] (2 s).
    pub kill_grace: Duration,
    /// How many bytes of output are kept, stdout and stderr together. A stream that fits in half
    /// of it is kept whole; what does not fit is cut from the middle of a stream, keeping its head
    /// and its tail, with a marker `[... N bytes cut ...]` (counted in the cap). The rest is read
    /// and dropped. By default, [`DEFAULT_OUTPUT_CAP`] (1 MiB in all).
    pub output_cap: usize,
    /// Isolation: clean environment, resource limits, bubblewrap. By default, `None`: the command
    /// inherits this process's environment and limits.
    pub sandbox: Option<Sandbox>,
    /// Extra paths exposed read-only inside bubblewrap (e.g. the artifact's temp dir; relative ones
    /// are taken relative to `workdir`); used only when the sandbox runs under bubblewrap. By
    /// default, none.
    pub read_only_paths: Vec<PathBuf>,
}

impl Command {
    /// A command running `program` in `workdir`, with the defaults for everything else.
    pub fn new(program: Program, workdir: impl Into<PathBuf>) -> Self {
        Command {
            program,
            workdir: workdir.into(),
            env: Vec::new(),
            stdin: None,
            timeout: DEFAULT_TIMEOUT,
            kill_grace: DEFAULT_KILL_GRACE,
            output_cap: DEFAULT_OUTPUT_CAP,
            sandbox: None,
            read_only_paths: Vec::new(),
        }
    }

    /// A command running `sh -c script` in `workdir`.
    pub fn shell(script: impl Into<String>, workdir: impl Into<PathBuf>) -> Self {
        Self::new(Program::Shell(script.into()), workdir)
    }

    /// A command executing `args` directly (no shell) in `workdir`.
    pub fn argv<I, S>(args: I, workdir: impl Into<PathBuf>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::new(Program::Argv(args.into_iter().map(Into::into).collect()), workdir)
    }

    /// Sets an environment variable for the command.
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Feeds `data` to the command's stdin, then closes it.
    #[must_use]
    pub fn stdin(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(data.into());
        self
    }

    /// Sets the timeout.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the grace period between `SIGTERM` and `SIGKILL`.
    #[must_use]
    pub fn kill_grace(mut self, grace: Duration) -> Self {
        self.kill_grace = grace;
        self
    }

    /// Sets how many bytes of output are kept, stdout and stderr together.
    #[must_use]
    pub fn output_cap(mut self, bytes: usize) -> Self {
        self.output_cap = bytes;
        self
    }

    /// Runs the command in `sandbox`.
    #[must_use]
    pub fn sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// Exposes `path` read-only inside bubblewrap.
    #[must_use]
    pub fn read_only_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.read_only_paths.push(path.into());
        self
    }
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The exit code; `None` when the command was killed by a signal.
    pub status: Option<i32>,
    /// The signal that killed the command, if one did.
    pub signal: Option<i32>,
    /// Stdout as lossy UTF-8; with stderr, at most [`Command::output_cap`] bytes.
    pub stdout: String,
    /// Stderr as lossy UTF-8; with stdout, at most [`Command::output_cap`] bytes.
    pub stderr: String,
    /// Whether part of stdout was cut to fit the cap (a marker in `stdout` says where and how much).
    pub stdout_truncated: bool,
    /// Whether part of stderr was cut to fit the cap (a marker in `stderr` says where and how much).
    pub stderr_truncated: bool,
    /// Whether the command ran out of time and was terminated with every process it started.
    pub timed_out: bool,
    /// Wall time from spawn to the end of output capture.
    pub duration: Duration,
}

impl Output {
    /// Whether the command exited with code 0 in time.
    pub fn success(&self) -> bool {
        self.status == Some(0) && !self.timed_out
    }

    /// Stdout then stderr, with a newline between them when stdout does not end with one.
    pub fn combined(&self) -> String {
        let mut text = String::with_capacity(self.stdout.len() + self.stderr.len() + 1);
        text.push_str(&self.stdout);
        if !self.stdout.is_empty() && !self.stdout.ends_with('\n') && !self.stderr.is_empty() {
            text.push('\n');
        }
        text.push_str(&self.stderr);
        text
    }
}
