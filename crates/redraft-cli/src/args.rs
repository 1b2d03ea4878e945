//! The command line, as clap reads it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Bounded generate → check → feed back → retry loops around language models.
#[derive(Debug, Parser)]
#[command(name = "redraft", version, about, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// Read this config file instead of searching ./redraft.toml and $XDG_CONFIG_HOME/redraft/.
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

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first.
    List {
        /// Only runs in this state: queued, running, succeeded, failed, awaiting_input.
        #[arg(long, value_name = "STATE")]
        status: Option<String>,
        /// Only runs of this model (`provider/model`).
        #[arg(long, value_name = "PROVIDER/MODEL")]
        model: Option<String>,
        /// Only runs checked against this kind.
        #[arg(long, value_name = "NAME")]
        kind: Option<String>,
        /// Only runs whose id, model, kind or prompt contains this text (ignoring ASCII case).
        #[arg(long, value_name = "TEXT")]
        search: Option<String>,
        /// At most this many. By default, 20.
        #[arg(long, default_value_t = 20, value_name = "N")]
        limit: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show a run: its result rebuilt from the store (or what it has so far).
    Show {
        run_id: String,
        /// Print the whole result as JSON (artifact, history, metrics, escalation).
        #[arg(long)]
        json: bool,
    },
    /// Continue an interrupted run from its last finished attempt.
    Resume {
        run_id: String,
        /// Print the whole result as JSON (artifact, history, metrics, escalation).
        #[arg(long)]
        json: bool,
        /// Resume even though another process holds the run's lease: only when that process is
        /// known to be dead (otherwise both run it, and its attempts are paid twice).
        #[arg(long)]
        force: bool,
        /// Where kinds live. By default, `kinds_dir` from the config.
        #[arg(long, value_name = "DIR")]
        kinds: Option<PathBuf>,
    },
    /// Answer the question of a run awaiting input, and continue it here with the answer.
    Answer {
        run_id: String,
        /// Your answer to the run's question, given to the model as a person's reply.
        answer: String,
        /// Attempts the run may make after the answer. By default, as many as it had.
        #[arg(long, value_name = "N")]
        max_iterations: Option<u32>,
        /// Print the whole result as JSON (artifact, history, metrics, escalation).
        #[arg(long)]
        json: bool,
        /// Where kinds live. By default, `kinds_dir` from the config.
        #[arg(long, value_name = "DIR")]
        kinds: Option<PathBuf>,
    },
    /// End a run awaiting input as failed, keeping its escalation.
    Abort {
        run_id: String,
        /// Print the whole result as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum KindsCommand {
    /// List the kinds.
    List {
        /// Where kinds live. By default, `kinds_dir` from the config (`./kinds`).
        #[arg(long, value_name = "DIR")]
        kinds: Option<PathBuf>,
    },
    /// Show a kind: description, schema, example, rules and tables, as JSON.
    Show {
        name: String,
        /// Where kinds live. By default, `kinds_dir` from the config (`./kinds`).
        #[arg(long, value_name = "DIR")]
        kinds: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the default redraft.toml, every key commented.
    Default,
    /// Print the configuration in force here (files and REDRAFT_* variables merged).
    Show,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The task: text, `@FILE` to read a file, or `-` for stdin.
    #[arg(long, short = 'p', value_name = "TEXT|@FILE")]
    pub prompt: String,

    /// A system message: text or `@FILE`.
    #[arg(long, value_name = "TEXT|@FILE")]
    pub system: Option<String>,

    /// A JSON object shown to the model and to evaluators: JSON text or `@FILE`.
    #[arg(long, value_name = "JSON|@FILE")]
    pub context: Option<String>,

    /// Check answers against this JSON Schema file (same as `--eval schema:FILE`).
    #[arg(long = "schema", value_name = "FILE")]
    pub schemas: Vec<PathBuf>,

    /// A registered kind: its schema, rules and LLM check (same as `--eval kind:NAME`).
    #[arg(long, value_name = "NAME")]
    pub kind: Option<String>,

    /// Where kinds live. By default, `kinds_dir` from the config (`./kinds`).
    #[arg(long, value_name = "DIR")]
    pub kinds: Option<PathBuf>,

    /// An evaluator directive; repeat for several (all must pass, the score is the lowest):
    /// `schema:PATH`, `kind:NAME`, `exec:CMD` (`{artifact}` and `$ARTIFACT` name the artifact
    /// file), `http:URL`, `score:CRITERION` (an LLM judge), `llm:NAME` (a kind, LLM-checked)
    #[arg(long = "eval", value_name = "DIRECTIVE")]
    pub evals: Vec<String>,

    /// The extension of the artifact file that `exec:` evaluators get (`py`, `rs`, …).
    /// By default, `json`, or `txt` with `--text`.
    #[arg(long, value_name = "EXT")]
    pub artifact_ext: Option<String>,

    /// The proposer, as `provider/model` (`openai/gpt-4o-mini`, `mock/replies.jsonl`).
    /// By default, `default_model` from the config.
    #[arg(long, short = 'm', value_name = "PROVIDER/MODEL", env = "REDRAFT_MODEL")]
    pub model: Option<String>,

    /// Evaluate the raw text instead of extracting JSON from it.
    #[arg(long)]
    pub text: bool,

    /// How the expected shape is shown to the model. By default, both.
    #[arg(long, value_enum, value_name = "STYLE")]
    pub prompt_style: Option<PromptStyleArg>,

    /// How the model is asked again after a rejection: `conversation` (its answer stays in the
    /// chat and the feedback follows) or `fresh` (one prompt rebuilt with the earlier attempts
    /// and their issues). By default, `strategy` from the config (conversation).
    #[arg(long, value_enum, value_name = "STRATEGY")]
    pub strategy: Option<StrategyArg>,

    #[command(flatten)]
    pub formats: FormatArgs,

    /// Constrained decoding: also send the schema as `response_format` to an OpenAI-compatible
    /// server (OpenAI, vLLM, llama-server), so the shape comes from the decoder; every check
    /// still runs. A server that refuses it is asked again without it. By default,
    /// `constrained` from the config (on).
    #[arg(long, overrides_with = "no_constrained")]
    pub constrained: bool,

    /// Do not send the schema as `response_format`: the model is only prompted for the shape.
    #[arg(long)]
    pub no_constrained: bool,

    /// Check answers exactly as extracted: no schema-aligned coercion (by default `"€77.08"`
    /// where the schema asks for a number is checked as 77.08, and the change is recorded
    /// among the attempt's repairs). By default, `coerce` from the config (on).
    #[arg(long)]
    pub strict: bool,

    #[command(flatten)]
    pub policy: PolicyArgs,

    /// Print the whole result as JSON (artifact, history, metrics, escalation) on stdout instead of only the artifact.
    #[arg(long)]
    pub json: bool,

    /// Do not record the run in the store (`.redraft/redraft.db` by default).
    #[arg(long)]
    pub no_store: bool,

    /// When the run would fail (its attempts ran out, stopped improving or repeated), stop it
    /// awaiting your answer instead, kept in the store: `redraft runs answer ID "text"`
    /// continues it with the answer, `redraft runs abort ID` ends it. The config's
    /// `on_escalation = "await"` does too.
    #[arg(long = "await", conflicts_with = "no_store")]
    pub await_answer: bool,

    /// A progress line per attempt on stderr. By default, only when stderr is a terminal.
    #[arg(long, value_enum, default_value_t = Progress::Auto, value_name = "WHEN")]
    pub progress: Progress,

    /// Run `exec:` evaluators and command proposers in this sandbox: a `[sandboxes.NAME]` from
    /// the config, or inline JSON such as '{"network": false, "cpu_seconds": 60}'.
    #[arg(long, value_name = "NAME|JSON")]
    pub sandbox: Option<String>,

    /// An agent command that proposes instead of a model (`{prompt}` in its arguments is
    /// replaced by the prompt, which is also on its stdin and in $REDRAFT_PROMPT_FILE).
    #[arg(last = true, value_name = "AGENT")]
    pub agent: Vec<String>,
}

#[derive(Debug, Args)]
pub struct UntilArgs {
    /// The task for the agent: text, `@FILE`, or `-` for stdin. By default, "make the verifier pass".
    #[arg(long, short = 'p', value_name = "TEXT|@FILE")]
    pub prompt: Option<String>,

    /// The verifier, run with `sh -c` after each iteration; exit 0 means done.
    #[arg(long, value_name = "CMD", required = true)]
    pub verify: String,

    /// The task's name, used for `.redraft/iterations/<task>/`. By default, a slug of the
    /// prompt and today's date.
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,

    /// Files the agent must not change (e.g. 'tests/**'); a change rejects the iteration and
    /// is undone. Repeat for several.
    #[arg(long, value_name = "GLOB")]
    pub protect: Vec<String>,

    /// Run the agent and the verifier in this sandbox: a `[sandboxes.NAME]` from the config,
    /// or inline JSON.
    #[arg(long, value_name = "NAME|JSON")]
    pub sandbox: Option<String>,

    #[command(flatten)]
    pub policy: PolicyArgs,

    /// Why this loop may take more than 3 iterations: needed with `--max-iter` above 3, and
    /// written in decisions.md.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,

    /// When the loop hits its cap (its iterations ran out, stopped improving or repeated):
    /// `fail` escalates; `ask` shows the escalation and asks you on the terminal, then goes on
    /// with your answer for as many iterations again (an empty answer stops it).
    #[arg(long, value_enum, default_value_t = OnCap::Fail, value_name = "WHAT")]
    pub on_cap: OnCap,

    /// Where the loop's outcome is recorded: one dated entry appended per loop.
    #[arg(long, value_name = "FILE", default_value = "decisions.md")]
    pub decisions: PathBuf,

    /// Do not append the loop's outcome to decisions.md.
    #[arg(long)]
    pub no_decisions: bool,

    /// Do not record the loop in the store (by default it is, like every run: `redraft runs`
    /// lists it).
    #[arg(long)]
    pub no_store: bool,

    /// Print the whole result as JSON (artifact, history, metrics, escalation) on stdout.
    #[arg(long)]
    pub json: bool,

    /// A progress line per iteration on stderr. By default, only when stderr is a terminal.
    #[arg(long, value_enum, default_value_t = Progress::Auto, value_name = "WHEN")]
    pub progress: Progress,

    /// The agent command and its arguments.
    #[arg(last = true, value_name = "AGENT", required = true)]
    pub agent: Vec<String>,
}

/// What `redraft until` does when the loop hits its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnCap {
    // Escalate: write escalation.md and exit 1.
    Fail,
    // Ask on the terminal and go on with the answer.
    Ask,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    Conversation,
    Fresh,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PromptStyleArg {
    Schema,
    Example,
    Both,
}

#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// The model output to read; `-` or nothing for stdin.
    #[arg(value_name = "FILE|-")]
    pub input: Option<String>,

    /// Print `{"value", "route", "repairs"}` instead of only the value.
    #[arg(long)]
    pub json: bool,

    /// Print the value on one line.
    #[arg(long)]
    pub compact: bool,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The JSON Schema to check against.
    #[arg(long, value_name = "FILE", required_unless_present = "kind", conflicts_with = "kind")]
    pub schema: Option<PathBuf>,

    /// A registered kind to check against (its schema, then its rules).
    #[arg(long, value_name = "NAME")]
    pub kind: Option<String>,

    /// Where kinds live. By default, `kinds_dir` from the config (`./kinds`).
    #[arg(long, value_name = "DIR")]
    pub kinds: Option<PathBuf>,

    /// The context rules read (`context.city` …): JSON or `@FILE`.
    #[arg(long, value_name = "JSON|@FILE")]
    pub context: Option<String>,

    /// The document to check (JSON, or model output holding JSON); `-` or nothing for stdin.
    #[arg(value_name = "FILE|-")]
    pub input: Option<String>,

    #[command(flatten)]
    pub formats: FormatArgs,

    /// Print `{"passed", "issues"}` as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DecideArgs {
    /// The `iteration_check` (JSON or YAML); `-` or nothing for stdin.
    #[arg(value_name = "FILE|-")]
    pub input: Option<String>,

    /// The output format. By default, the input's.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<Format>,

    /// Record each check per `task_id` under `.redraft/decide/`, so that an escalation
    /// summarises every earlier iteration.
    #[arg(long)]
    pub store: bool,
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Where kinds live. By default, `kinds_dir` from the config (`./kinds`).
    #[arg(long, value_name = "DIR")]
    pub kinds: Option<PathBuf>,

    /// Do not record `iterate` runs in the store (`.redraft/redraft.db` by default).
    #[arg(long)]
    pub no_store: bool,

    // For requests that do not say (`check_formats`).
    #[command(flatten)]
    pub formats: FormatArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen, HOST:PORT (port 0 picks a free one). Without tokens (the variable
    /// named by `[server] tokens_env`, `REDRAFT_TOKENS` by default) only a loopback address is
    /// accepted. By default, `[server] addr` from the config (`127.0.0.1:8080`).
    #[arg(long, value_name = "HOST:PORT")]
    pub addr: Option<String>,

    /// Where kinds live. By default, `kinds_dir` from the config (`./kinds`).
    #[arg(long, value_name = "DIR")]
    pub kinds: Option<PathBuf>,

    /// Only accept runs (stored as queued); `redraft worker` processes sharing the database
    /// execute them.
    #[arg(long)]
    pub no_worker: bool,

    // For requests that do not say (`check_formats`).
    #[command(flatten)]
    pub formats: FormatArgs,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Runs executed at once. By default, `[server] max_concurrent_runs` from the config (64).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: Option<u32>,

    /// Where kinds live. By default, `kinds_dir` from the config (`./kinds`).
    #[arg(long, value_name = "DIR")]
    pub kinds: Option<PathBuf>,

    // For runs that do not say (`check_formats`).
    #[command(flatten)]
    pub formats: FormatArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Json,
    Yaml,
}
