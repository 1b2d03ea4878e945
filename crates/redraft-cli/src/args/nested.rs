//! `runs`, `kinds` and `config`: the commands that take a subcommand of their own.

use std::path::PathBuf;

use clap::Subcommand;

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
    Show {
        /// Instead, list each value a file or a variable set, with where it came from.
        #[arg(long)]
        origins: bool,
    },
}
