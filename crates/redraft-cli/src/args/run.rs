//! `redraft run`: its arguments, and the choices only it offers (prompt style, strategy).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use redraft::core::Directive;
use redraft::spec::{ArtifactExt, SandboxRequest};

use super::{FormatArgs, PolicyArgs, Progress};

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
    #[arg(long = "eval", value_name = "DIRECTIVE", value_parser = super::directive)]
    pub evals: Vec<Directive>,

    /// The extension of the artifact file that `exec:` evaluators get (`py`, `rs`, …).
    /// By default, `json`, or `txt` with `--text`.
    #[arg(long, value_name = "EXT", value_parser = super::artifact_ext)]
    pub artifact_ext: Option<ArtifactExt>,

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
    #[arg(long, value_name = "NAME|JSON", value_parser = super::sandbox)]
    pub sandbox: Option<SandboxRequest>,

    /// An agent command that proposes instead of a model (`{prompt}` in its arguments is
    /// replaced by the prompt, which is also on its stdin and in $REDRAFT_PROMPT_FILE).
    #[arg(last = true, value_name = "AGENT")]
    pub agent: Vec<String>,
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
