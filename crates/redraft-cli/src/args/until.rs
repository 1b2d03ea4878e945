//! `redraft until` (agent mode): its arguments, and what it does when the loop hits its cap.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use redraft::spec::SandboxRequest;

use super::{PolicyArgs, Progress};

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
    #[arg(long, value_name = "NAME|JSON", value_parser = super::sandbox)]
    pub sandbox: Option<SandboxRequest>,

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
