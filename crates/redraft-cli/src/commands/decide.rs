//! `redraft decide`: proceed, retry or escalate, from one iteration's results.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use redraft::config::Config;
use redraft::core::decide::{IterationCheck, PriorCheck, decide, summarize};
use serde_json::{Value, json};

use super::Outcome;
use crate::args::{DecideArgs, Format};
use crate::input;

pub fn run(args: DecideArgs, config_path: Option<&Path>) -> Result<Outcome> {
    let config = Config::load(config_path)?;
    let text = input::file_or_stdin(args.input.as_deref(), "iteration check")?;
    let input_format = if text.trim_start().starts_with('{') { Format::Json } else { Format::Yaml };
    let mut check = parse(&text, input_format)?;

    let store = args.store.then(|| store_path(&check.task_id));
    if let Some(path) = &store {
        let mut prior = read_store(path)?;
        prior.retain(|p| {
            p.iteration < check.current_iteration && !check.history.iter().any(|h| h.iteration == p.iteration)
        });
        check.history.extend(prior);
        check.history.sort_by_key(|p| p.iteration);
    }
    let decision = decide(&check, &config.decide);
    if let Some(path) = &store {
        append_store(path, &check)?;
    }

    let out = json!({ "decision": decision });
    let text = match args.format.unwrap_or(input_format) {
        Format::Json => serde_json::to_string_pretty(&out)? + "\n",
        Format::Yaml => serde_yaml_ng::to_string(&out).map_err(|e| anyhow!("cannot write YAML: {e}"))?,
    };
    let mut stdout = crate::redacted::stdout();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(Outcome::Success)
}

/// Read an `iteration_check` (wrapped in that key or not), naming what is wrong.
fn parse(text: &str, format: Format) -> Result<IterationCheck> {
    let value: Value = match format {
        Format::Json => {
            serde_json::from_str(text).map_err(|e| anyhow!("the iteration check is not valid JSON: {e}"))?
        }
        Format::Yaml => {
            serde_yaml_ng::from_str(text).map_err(|e| anyhow!("the iteration check is not valid YAML: {e}"))?
        }
    };
    let inner = match value {
        Value::Object(mut map) if map.contains_key("iteration_check") => {
            map.remove("iteration_check").unwrap_or_default()
        }
        other => other,
    };
    serde_json::from_value(inner).map_err(|e| {
        anyhow!(
            "the iteration check is invalid: {e}\nhint: it needs task_id, current_iteration, max_iterations, test_result {{status: pass|fail, output}} and optionally review_result {{status: approve|reject|pending, feedback}}"
        )
    })
}

fn store_path(task_id: &str) -> PathBuf {
    let safe: String = task_id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' })
        .collect();
    Path::new(".redraft").join("decide").join(format!("{safe}.jsonl"))
}

fn read_store(path: &Path) -> Result<Vec<PriorCheck>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(anyhow!("cannot read the decide store `{}`: {e}", path.display())),
    };
    let mut prior: Vec<PriorCheck> = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let p: PriorCheck = serde_json::from_str(line)
            .map_err(|e| anyhow!("line {} of the decide store `{}` is damaged: {e}", n + 1, path.display()))?;
        // A later record of the same iteration replaces the earlier one.
        prior.retain(|q| q.iteration != p.iteration);
        prior.push(p);
    }
    Ok(prior)
}

fn append_store(path: &Path, check: &IterationCheck) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| anyhow!("cannot create `{}`: {e}", dir.display()))?;
    }
    let record = PriorCheck {
        iteration: check.current_iteration,
        summary: Some(summarize(Some(&check.test_result), Some(&check.review_result))),
        test_result: Some(check.test_result.clone()),
        review_result: Some(check.review_result.clone()),
    };
    let mut line = serde_json::to_string(&record)?;
    line.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| anyhow!("cannot open the decide store `{}`: {e}", path.display()))?;
    file.write_all(line.as_bytes()).map_err(|e| anyhow!("cannot write the decide store `{}`: {e}", path.display()))?;
    Ok(())
}
