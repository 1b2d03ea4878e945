//! `redraft config default|show [--origins]`.

use std::io::Write;
use std::path::Path;

use anyhow::{Result, anyhow};
use redraft::config::{Config, DEFAULT_CONFIG, Loaded};

use super::Outcome;
use crate::args::ConfigCommand;

pub fn run(which: ConfigCommand, config_path: Option<&Path>) -> Result<Outcome> {
    let text = match which {
        ConfigCommand::Default => DEFAULT_CONFIG.to_owned(),
        ConfigCommand::Show { origins: false } => {
            let config = Config::load(config_path)?;
            toml::to_string_pretty(&config).map_err(|e| anyhow!("cannot print the configuration: {e}"))?
        }
        ConfigCommand::Show { origins: true } => origins(&Config::load_layers(config_path)?)?,
    };
    let mut stdout = crate::redacted::stdout();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(Outcome::Success)
}

/// `key = value  # origin`, a line for each value a file or a variable set (the others are the
/// defaults, which `redraft config default` shows).
fn origins(loaded: &Loaded) -> Result<String> {
    let value = toml::Value::try_from(&loaded.config).map_err(|e| anyhow!("cannot print the configuration: {e}"))?;
    let mut text = String::new();
    for (key, layer) in &loaded.origins {
        // The dotted key read as TOML gives its path (`models."a/b".x` is three keys).
        let path = format!("{key} = 0").parse::<toml::Table>().ok().map(|t| key_path(&t)).unwrap_or_default();
        let found = path.iter().try_fold(&value, |v, part| v.get(part));
        let shown = found.map(|v| v.to_string()).unwrap_or_else(|| "(unset)".to_owned());
        text.push_str(&format!("{key} = {shown}  # {layer}\n"));
    }
    if text.is_empty() {
        text.push_str("# no file or REDRAFT_* variable sets anything here: every value is the default\n");
    }
    Ok(text)
}

/// The keys from the top of `table` (one key per level) down to its only value.
fn key_path(table: &toml::Table) -> Vec<String> {
    let mut path = Vec::new();
    let mut at = table;
    while let Some((key, value)) = at.iter().next() {
        path.push(key.clone());
        match value {
            toml::Value::Table(inner) => at = inner,
            _ => break,
        }
    }
    path
}
