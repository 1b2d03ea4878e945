//! The commands that keep serving: `mcp`, `serve` and `worker`.

use std::path::PathBuf;

use clap::Args;

use super::FormatArgs;

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
