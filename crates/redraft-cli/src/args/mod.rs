//! The command line, as clap reads it: [`Cli`] and its [`Command`]s here, with the flag groups
//! several commands share; each family of commands' arguments in a module of its own.

mod documents;
mod nested;
mod run;
mod serve;
mod until;

pub use documents::{DecideArgs, ExtractArgs, Format, ValidateArgs};
pub use nested::{ConfigCommand, KindsCommand, RunsCommand};
pub use run::{PromptStyleArg, RunArgs, StrategyArg};
pub use serve::{McpArgs, ServeArgs, WorkerArgs};
pub use until::{OnCap, UntilArgs};

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use redraft::core::Directive;
use redraft::sandbox::Sandbox;
use redraft::spec::{ArtifactExt, SandboxRequest};

/// Bounded generate → check → feed back → retry loops around language models.
#[derive(Debug, Parser)]
#[command(name = "redraft", version, about, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// Read this config file instead of ./redraft.toml; $XDG_CONFIG_HOME/redraft/redraft.toml
    /// still lies beneath it, and REDRAFT_* variables above it.
    #[arg(long, global = true, value_name = "FILE", env = "REDRAFT_CONFIG", help_heading = "Global options")]
    pub config: Option<PathBuf>,

    /// Log more to stderr (-v info, -vv debug). `RUST_LOG` works too.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = "Global options")]
    pub verbose: u8,

    /// Log lines on stderr as text (coloured only on a terminal) or json (one object per line).
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "FORMAT",
        default_value_t = LogFormat::Text,
        env = "REDRAFT_LOG_FORMAT",
        help_heading = "Global options"
    )]
    pub log_format: LogFormat,
}

/// The format of log lines on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    // Plain comments: variant docs would turn `--help` into the long layout for every flag.
    // Human-readable lines.
    Text,
    // One JSON object per line, with `timestamp`, `level`, `message` and the event's fields.
    Json,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum Command {
    /// Ask a model, check the answer, feed back the problems, until it passes or a limit is hit.
    Run(RunArgs),
    /// Find the JSON value in model output (fenced, in prose, bare, or repaired) and print it.
    Extract(ExtractArgs),
    /// Check a JSON document against a JSON Schema and print every issue.
    Validate(ValidateArgs),
    /// Agent mode: run an agent, then a verifier, in this directory until the verifier passes.
    Until(UntilArgs),
    /// Decide the next step of an iteration: proceed, retry (with feedback) or escalate.
    Decide(DecideArgs),
    /// Serve the MCP tools iterate, validate, example, submit and decide over stdio.
    Mcp(McpArgs),
    /// Serve the HTTP API, the OpenAI-compatible proxy and the run viewer; also execute the
    /// queued runs unless --no-worker.
    Serve(ServeArgs),
    /// Execute queued runs from the store (PostgreSQL to share it between machines), taking
    /// over the runs of workers that died.
    Worker(WorkerArgs),
    /// Show the configuration: the commented defaults, or what is in force here.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Recorded runs: list them, show one, resume one that was interrupted.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Registered kinds: list them or show one (schema, example, rules, tables).
    #[command(subcommand)]
    Kinds(KindsCommand),
}

/// `--no-format-check`, shared by every command that checks against JSON Schemas.
#[derive(Debug, Args, Default)]
pub struct FormatArgs {
    /// Do not check JSON Schema `format`s (`date`, `email`, `uri`, …): they become annotations.
    /// By default, `check_formats` from the config (they are checked).
    #[arg(long)]
    pub no_format_check: bool,
}

impl FormatArgs {
    /// `check_formats` as the flag sets it: `Some(false)` with `--no-format-check`, else unset
    /// (the config decides).
    pub fn check_formats(&self) -> Option<bool> {
        self.no_format_check.then_some(false)
    }

    /// The config with the flag applied.
    pub fn apply(&self, config: &mut redraft::config::Config) {
        if let Some(check) = self.check_formats() {
            config.check_formats = check;
        }
    }
}

/// The policy flags shared by every command that runs a loop.
#[derive(Debug, Args, Default)]
pub struct PolicyArgs {
    /// Attempts at most. By default, 3.
    #[arg(long, visible_alias = "max-iter", value_name = "N")]
    pub max_iterations: Option<u32>,

    /// Score at or above which an answer passes, in [0, 1]. By default, 1.0 (0.9 with a
    /// scoring evaluator).
    #[arg(long, value_name = "X")]
    pub threshold: Option<f64>,

    /// Halt after N attempts in a row that do not improve the best score. By default, off.
    #[arg(long, value_name = "N")]
    pub patience: Option<u32>,

    /// Halt before an attempt that would take spending past this many USD. Needs the
    /// model's price in the config. By default, off.
    #[arg(long, value_name = "USD")]
    pub max_budget: Option<f64>,

    /// Halt after this long, cancelling the attempt in flight (`90s`, `5m`). By default, off.
    #[arg(long, value_name = "DURATION")]
    pub max_wall_time: Option<String>,

    /// An attempt taking longer counts as an error (`timeout`). By default, 120s.
    #[arg(long, value_name = "DURATION")]
    pub attempt_timeout: Option<String>,

    /// Halt with `stagnation` when the same answer is given N times (0 = off). By default, 2.
    #[arg(long, value_name = "N")]
    pub repeat_limit: Option<u32>,

    /// Sampling temperature. By default, the provider's.
    #[arg(long, value_name = "T")]
    pub temperature: Option<f32>,

    /// Output token limit per attempt. By default, the provider's.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Progress {
    Auto,
    Always,
    Never,
}

/// `--sandbox NAME|JSON`, read once where the command line is: text that starts with `{` is an
/// inline spec, anything else the name of a `[sandboxes.NAME]`.
fn sandbox(text: &str) -> Result<SandboxRequest, String> {
    if text.trim_start().starts_with('{') {
        return serde_json::from_str::<Sandbox>(text).map(SandboxRequest::Inline).map_err(|e| {
            format!("the inline sandbox spec is invalid: {e}\nhint: e.g. '{{\"network\": false, \"cpu_seconds\": 60}}'")
        });
    }
    Ok(SandboxRequest::Named(text.to_owned()))
}

/// `--eval DIRECTIVE`.
fn directive(text: &str) -> Result<Directive, String> {
    text.parse().map_err(|e: redraft::core::DirectiveError| e.to_string())
}

/// `--artifact-ext EXT`.
fn artifact_ext(text: &str) -> Result<ArtifactExt, String> {
    ArtifactExt::try_from(text.to_owned())
}
