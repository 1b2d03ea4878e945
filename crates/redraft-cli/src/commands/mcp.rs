//! `redraft mcp`: the MCP tools over stdio. stdout is the protocol channel: nothing else may
//! be written to it (logs go to stderr).

use std::path::Path;

use anyhow::{Result, anyhow};
use redraft::config::Config;
use redraft_mcp::McpSetup;

use super::Outcome;
use crate::args::McpArgs;

pub async fn run(args: McpArgs, config_path: Option<&Path>) -> Result<Outcome> {
    let mut config = Config::load(config_path)?;
    if let Some(dir) = args.kinds {
        config.kinds_dir = dir;
    }
    args.formats.apply(&mut config);
    let workdir = std::env::current_dir().map_err(|e| anyhow!("cannot read the current directory: {e}"))?;
    let mut setup = McpSetup::new(config, workdir)?;
    setup.store = if args.no_store { None } else { Some(redraft::store::open(&setup.config).await?) };
    tracing::info!(kinds_dir = %setup.config.kinds_dir.display(), "serving MCP on stdio");
    redraft_mcp::serve_stdio(setup).await?;
    Ok(Outcome::Success)
}
