//! `redraft serve`: the HTTP API, the OpenAI-compatible proxy and the run viewer.

use std::path::Path;

use anyhow::Result;
use redraft::config::Config;
use redraft_server::{Server, shutdown_signal, tokens_from_env};

use super::Outcome;
use crate::args::ServeArgs;

pub async fn run(args: ServeArgs, config_path: Option<&Path>) -> Result<Outcome> {
    let mut config = Config::load(config_path)?;
    if let Some(dir) = args.kinds {
        config.kinds_dir = dir;
    }
    args.formats.apply(&mut config);
    if args.no_worker {
        config.server.max_concurrent_runs = 0;
    }
    let tokens = tokens_from_env(&config.server.tokens_env);
    let server = Server::bind(config, args.addr.as_deref(), tokens).await?;
    eprintln!("redraft: listening on http://{}", server.local_addr()?);
    let executor = server.state().executor();
    match executor.capacity() {
        0 => eprintln!("redraft: accepting runs only (--no-worker): `redraft worker` processes execute them"),
        n => eprintln!("redraft: worker {} executing up to {n} run(s) at once", executor.worker().id()),
    }
    server.run(shutdown_signal()).await?;
    eprintln!("redraft: stopped");
    Ok(Outcome::Success)
}
