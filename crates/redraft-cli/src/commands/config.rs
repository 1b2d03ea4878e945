//! `redraft config default|show`.

use std::io::Write;
use std::path::Path;

use anyhow::{Result, anyhow};
use redraft::config::{Config, DEFAULT_CONFIG};

use super::Outcome;
use crate::args::ConfigCommand;

pub fn run(which: ConfigCommand, config_path: Option<&Path>) -> Result<Outcome> {
    let text = match which {
        ConfigCommand::Default => DEFAULT_CONFIG.to_owned(),
        ConfigCommand::Show => {
            let config = Config::load(config_path)?;
            toml::to_string_pretty(&config).map_err(|e| anyhow!("cannot print the configuration: {e}"))?
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(Outcome::Success)
}
