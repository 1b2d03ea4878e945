//! The `redraft` command.
//!
//! Key design decision: stdout carries data only (the artifact, or the JSON result with
//! `--json`); progress, logs and escalations go to stderr. Exit codes are decided in one
//! place: 0 success, 1 a failed run (or no JSON / an invalid document), 2 bad usage or
//! configuration — in which case nothing was sent to a model.

mod args;
mod commands;
mod input;
mod output;
mod telemetry;
mod until;

/// mimalloc gives memory back to the system once a burst of runs is over (the system
/// allocator keeps a server's peak for good), and holds up under many threads.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::commands::Outcome;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    // Logs, and traces when an OTLP endpoint is configured (sent from the runtime).
    let telemetry = {
        let _runtime = runtime.enter();
        match telemetry::init(cli.log_format, cli.verbose, cli.config.as_deref()) {
            Ok(telemetry) => telemetry,
            Err(e) => return exit_code(Err(e)),
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => commands::run::run(args, cli.config.as_deref()).await,
            Command::Extract(args) => commands::extract::run(args),
            Command::Validate(args) => commands::validate::run(args, cli.config.as_deref()),
            Command::Until(args) => until::run(args, cli.config.as_deref()).await,
            Command::Config(which) => commands::config::run(which, cli.config.as_deref()),
            Command::Runs(which) => commands::runs::run(which, cli.config.as_deref()).await,
            Command::Kinds(which) => commands::kinds::run(which, cli.config.as_deref()),
            Command::Decide(args) => commands::decide::run(args, cli.config.as_deref()),
            Command::Serve(args) => commands::serve::run(args, cli.config.as_deref()).await,
            Command::Worker(args) => commands::worker::run(args, cli.config.as_deref()).await,
            Command::Mcp(args) => commands::mcp::run(args, cli.config.as_deref()).await,
        }
    });
    runtime.block_on(telemetry.shutdown());
    exit_code(outcome)
}

/// The one place that maps outcomes and errors to exit codes.
fn exit_code(outcome: anyhow::Result<Outcome>) -> ExitCode {
    match outcome {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failed) => ExitCode::from(1),
        Err(e) => {
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
