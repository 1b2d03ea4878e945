//! `redraft worker`: execute queued runs from the store, on this machine, beside any number of
//! other workers and servers sharing the same database.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use redraft::config::Config;
use redraft::guard::{Face, Guard};
use redraft::queue::{Executor, LogHooks, SetupParts, Worker};
use redraft_server::shutdown_signal;

use super::Outcome;
use crate::args::WorkerArgs;

pub async fn run(args: WorkerArgs, config_path: Option<&Path>) -> Result<Outcome> {
    let mut config = Config::load(config_path)?;
    if let Some(dir) = args.kinds {
        config.kinds_dir = dir;
    }
    args.formats.apply(&mut config);
    let mut slots = args.concurrency.map_or(config.server.max_concurrent_runs, |n| n as usize).max(1);
    if let Some(limit) = redraft::limits::open_files()
        && let Err(fit) = redraft::limits::fit_slots(slots, redraft::limits::shared_files(limit))
    {
        eprintln!(
            "redraft: warning: {slots} runs at once need more open files than the limit of {limit}: executing {fit} (raise `ulimit -n` for more)"
        );
        slots = fit;
    }
    // Queued runs came from the network: they are set up under the same allow-lists as the
    // server that accepted them (`[server] exec_allow`, `http_allow`, …), checked again here.
    let guard = Arc::new(Guard::network(Face::Http, &config.server)?);
    let kinds = if config.kinds_dir.is_dir() {
        Some(Arc::new(redraft::eval::kind::Kinds::load(&config.kinds_dir)?))
    } else {
        None
    };
    let store = redraft::store::open(&config).await?;
    let worker = Worker::start(store, &config.queue);
    let grace = config.server.grace_period;
    let workdir = std::env::current_dir().map_err(|e| anyhow::anyhow!("cannot read the current directory: {e}"))?;
    let ceilings = config.server.ceilings.clone();
    let parts = SetupParts { config: Arc::new(config), workdir, guard, ceilings, kinds };
    let executor = Executor::new(worker.clone(), parts, Arc::new(LogHooks), slots);
    eprintln!("redraft: worker {} executing up to {slots} run(s) at once", worker.id());
    let claiming = tokio::spawn(executor.clone().claim_loop());
    shutdown_signal().await;
    eprintln!(
        "redraft: stopping: no new runs; {} run(s) executing have {} to finish",
        executor.executing(),
        redraft::core::duration::format(grace)
    );
    let released = executor.stop(grace).await;
    claiming.abort();
    if released > 0 {
        eprintln!("redraft: {released} unfinished run(s) went back to the queue");
    }
    eprintln!("redraft: stopped");
    Ok(Outcome::Success)
}
