//! `redraft runs list|show|resume|answer|abort`: the recorded audit trail, and the runs
//! waiting for a person.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use redraft::SpecSetup;
use redraft::config::Config;
use redraft::core::{RunFilter, RunState};
use redraft::queue::Worker;
use redraft::recorder::{self, Start};

use super::Outcome;
use crate::args::{Progress, RunsCommand};
use crate::output::report;

pub async fn run(which: RunsCommand, config_path: Option<&Path>) -> Result<Outcome> {
    let config = Config::load(config_path)?;
    let store = redraft::store::open(&config).await?;
    let mut stdout = crate::redacted::stdout();
    match which {
        RunsCommand::List { status, model, kind, search, limit, json } => {
            let state =
                status.as_deref().map(str::parse::<RunState>).transpose().map_err(|e| anyhow!("`--status`: {e}"))?;
            let filter = RunFilter { state, model, kind, text: search, limit: Some(limit), offset: None };
            let runs = store.list(&filter).await?;
            if json {
                serde_json::to_writer_pretty(&mut stdout, &runs)?;
                writeln!(stdout)?;
            } else {
                for r in runs {
                    let halted = r.halted_because.map(|h| h.to_string()).unwrap_or_else(|| "-".into());
                    let score = r.best_score.map(|s| format!("{s:.2}")).unwrap_or_else(|| "-".into());
                    writeln!(
                        stdout,
                        "{}  {:<9}  {:<14}  {} attempt(s)  best {}  {}",
                        r.run_id,
                        r.state.as_str(),
                        halted,
                        r.iterations,
                        score,
                        r.model.unwrap_or_default()
                    )?;
                }
            }
            Ok(Outcome::Success)
        }
        RunsCommand::Show { run_id, json } => {
            let stored = store.run(&run_id).await?.ok_or_else(|| {
                anyhow!("run `{run_id}` is not in the store\nhint: `redraft runs list` shows the recorded runs")
            })?;
            if json {
                let shown = match &stored.result {
                    Some(result) => serde_json::to_value(result)?,
                    None => serde_json::json!({
                        "run_id": stored.run_id, "state": stored.state, "spec": stored.spec, "history": stored.attempts,
                    }),
                };
                serde_json::to_writer_pretty(&mut stdout, &shown)?;
                writeln!(stdout)?;
            } else {
                writeln!(
                    stdout,
                    "run {}: {} ({} attempt(s))",
                    stored.run_id,
                    stored.state.as_str(),
                    stored.attempts.len()
                )?;
                for a in &stored.attempts {
                    let first = a.issues.first().map(|i| format!(" — {} {}", i.path, i.code)).unwrap_or_default();
                    writeln!(stdout, "  {}: {} score {:.2}{first}", a.iteration, a.status.as_str(), a.score.get())?;
                }
                if let Some(result) = &stored.result {
                    writeln!(stdout, "halted because {}", result.halted_because)?;
                    if let Some(artifact) = &result.artifact {
                        writeln!(stdout, "artifact: {artifact}")?;
                    }
                }
            }
            Ok(Outcome::Success)
        }
        RunsCommand::Resume { run_id, json, kinds, force } => {
            drop(stdout);
            let (setup, how) = continue_here(&config, kinds.as_ref())?;
            let worker = Worker::start(store, &config.queue);
            let result = recorder::resume(&run_id, &setup, &worker, how, force).await?;
            report(&result, json, false).map_err(super::after_run)
        }
        RunsCommand::Answer { run_id, answer, max_iterations, json, kinds } => {
            drop(stdout);
            let (setup, how) = continue_here(&config, kinds.as_ref())?;
            let worker = Worker::start(store, &config.queue);
            let result = recorder::answer(&run_id, &answer, max_iterations, &setup, &worker, how).await?;
            report(&result, json, false).map_err(super::after_run)
        }
        RunsCommand::Abort { run_id, json } => {
            let result = store.abort_run(&run_id).await?;
            if json {
                serde_json::to_writer_pretty(&mut stdout, &result)?;
                writeln!(stdout)?;
            }
            eprintln!("redraft: run {run_id} aborted: it failed (halted because {})", result.halted_because);
            Ok(Outcome::Success)
        }
    }
}

/// How a stored run continues in this process: set up here (with the kinds in `kinds`, else
/// the config's), with a progress line per attempt when stderr is a terminal.
fn continue_here<'a>(config: &'a Config, kinds: Option<&std::path::PathBuf>) -> Result<(SpecSetup<'a>, Start)> {
    let cwd = std::env::current_dir().map_err(|e| anyhow!("cannot read the current directory: {e}"))?;
    let mut setup = SpecSetup::local(config, cwd);
    if let Some(dir) = kinds {
        setup.kinds = Some(Arc::new(crate::commands::kinds::load(Some(dir), config)?));
    }
    let observers = super::progress_lines(Progress::Auto, config.policy.max_iterations).into_iter().collect();
    Ok((setup, Start { observers, cancel: super::cancel_on_ctrl_c(), ..Start::default() }))
}
