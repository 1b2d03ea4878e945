//! `redraft kinds list|show`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use redraft::config::Config;
use redraft::eval::kind::Kinds;

use super::Outcome;
use crate::args::KindsCommand;

/// The kinds directory: `--kinds`, else the config's `kinds_dir`.
pub fn load(flag: Option<&PathBuf>, config: &Config) -> Result<Kinds> {
    Ok(Kinds::load(flag.map(PathBuf::as_path).unwrap_or(&config.kinds_dir))?)
}

pub fn run(which: KindsCommand, config_path: Option<&Path>) -> Result<Outcome> {
    let config = Config::load(config_path)?;
    let mut stdout = crate::redacted::stdout();
    match which {
        KindsCommand::List { kinds } => {
            let kinds = load(kinds.as_ref(), &config)?;
            for k in kinds.iter() {
                let first = k.description.lines().next().unwrap_or("");
                writeln!(stdout, "{:<16} {} ({} rules)", k.name, first, k.rule_count())?;
            }
        }
        KindsCommand::Show { name, kinds } => {
            let kinds = load(kinds.as_ref(), &config)?;
            let k = kinds.require(&name)?;
            let shown = k.describe();
            serde_json::to_writer_pretty(&mut stdout, &shown)?;
            writeln!(stdout)?;
        }
    }
    stdout.flush()?;
    Ok(Outcome::Success)
}
