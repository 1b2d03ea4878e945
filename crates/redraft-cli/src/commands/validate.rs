//! `redraft validate`: check a document against a JSON Schema.

use std::io::Write;

use std::path::Path;

use anyhow::{Result, anyhow};
use redraft::config::Config;
use redraft::core::extract;
use redraft::core::{Issue, codes};
use redraft::eval::SchemaEvaluator;
use redraft::eval::kind::KindEvaluator;
use serde_json::Value;
use serde_json::json;

use super::Outcome;
use crate::args::ValidateArgs;
use crate::input;

/// Checks a document (with its context) and returns its issues.
type Check = dyn Fn(&Value, &Value) -> Vec<Issue>;

pub fn run(args: ValidateArgs, config_path: Option<&Path>) -> Result<Outcome> {
    let mut config = Config::load(config_path)?;
    args.formats.apply(&mut config);
    let formats = config.formats();
    let check: Box<Check> = match (&args.schema, &args.kind) {
        (Some(path), _) => {
            let evaluator = SchemaEvaluator::from_file(path, formats)?;
            Box::new(move |artifact, _| evaluator.issues(artifact))
        }
        (None, Some(name)) => {
            let kinds = crate::commands::kinds::load(args.kinds.as_ref(), &config)?;
            let evaluator = KindEvaluator::new(kinds.require(name)?, formats)?;
            Box::new(move |artifact, context| evaluator.issues(artifact, context))
        }
        (None, None) => return Err(anyhow!("give `--schema FILE` or `--kind NAME`")),
    };
    let context = Value::Object(args.context.as_deref().map(input::context).transpose()?.unwrap_or_default());
    let text = input::file_or_stdin(args.input.as_deref(), "document")?;
    let issues = match extract::extract(&text) {
        Ok(found) => check(&found.value, &context),
        Err(no) => vec![Issue::new("", codes::INVALID_JSON, no.to_string())],
    };
    let passed = issues.is_empty();
    let mut stdout = crate::redacted::stdout();
    if args.json {
        serde_json::to_writer_pretty(&mut stdout, &json!({"passed": passed, "issues": issues}))?;
        writeln!(stdout)?;
    } else {
        for (n, issue) in issues.iter().enumerate() {
            let place = if issue.path.is_empty() { "(root)" } else { issue.path.as_str() };
            writeln!(stdout, "{}. {place}: {} [{}]", n + 1, issue.message, issue.code)?;
            if let Some(hint) = issue.hint_text() {
                writeln!(stdout, "   hint: {hint}")?;
            }
        }
    }
    stdout.flush()?;
    if passed {
        eprintln!("redraft: valid");
        Ok(Outcome::Success)
    } else {
        eprintln!("redraft: {} issue(s)", issues.len());
        Ok(Outcome::Failed)
    }
}
