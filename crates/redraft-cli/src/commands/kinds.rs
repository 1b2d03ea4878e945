//! `redraft kinds list|show`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use redraft::config::Config;
use redraft::eval::kind::Kinds;
use serde_json::json;

use super::Outcome;
use crate::args::KindsCommand;

/// The kinds directory: `--kinds`, else the config's `kinds_dir`.
pub fn load(flag: Option<&PathBuf>, config: &Config) -> Result<Kinds> {
    Ok(Kinds::load(flag.map(PathBuf::as_path).unwrap_or(&config.kinds_dir))?)
}

pub fn run(which: KindsCommand, config_path: Option<&Path>) -> Result<Outcome> {
    let config = Config::load(config_path)?;
    let mut stdout = std::io::stdout().lock();
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
            let tables: Vec<_> =
                k.table_names().into_iter().map(|t| json!({"name": t, "rows": k.table_rows(t)})).collect();
            let shown = json!({
                "name": k.name,
                "description": k.description,
                "prompt": k.prompt,
                "schema": k.schema,
                "example": k.example,
                "rules": k.rule_codes(),
                "tables": tables,
                "llm_check": k.llm_check.as_ref().map(|c| json!({"criterion": k.rubric(), "custom": c.criterion.is_some()})),
            });
            serde_json::to_writer_pretty(&mut stdout, &shown)?;
            writeln!(stdout)?;
        }
    }
    stdout.flush()?;
    Ok(Outcome::Success)
}
