//! `extract`, `validate` and `decide`: commands that read one document (a file or stdin) and
//! print what they make of it.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::FormatArgs;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Json,
    Yaml,
}
