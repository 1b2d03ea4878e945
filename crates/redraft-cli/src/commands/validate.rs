//! `redraft validate`: check a document against a JSON Schema.

use std::io::Write;

use anyhow::Result;
use redraft::core::extract;
use redraft::core::{Issue, codes};
use redraft::eval::SchemaEvaluator;
use serde_json::json;

use super::Outcome;
use crate::args::ValidateArgs;
use crate::input;

pub fn run(args: ValidateArgs) -> Result<Outcome> {
    let evaluator = SchemaEvaluator::from_file(&args.schema)?;
    let text = input::file_or_stdin(args.input.as_deref(), "document")?;
    let issues = match extract::extract(&text) {
        Ok(found) => evaluator.issues(&found.value),
        Err(no) => vec![Issue::new("", codes::INVALID_JSON, no.to_string())],
    };
    let passed = issues.is_empty();
    let mut stdout = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut stdout, &json!({"passed": passed, "issues": issues}))?;
        writeln!(stdout)?;
    } else {
        for (n, issue) in issues.iter().enumerate() {
            let place = if issue.path.is_empty() { "(root)" } else { issue.path.as_str() };
            writeln!(stdout, "{}. {place}: {} [{}]", n + 1, issue.message, issue.code)?;
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
