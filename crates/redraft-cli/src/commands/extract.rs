//! `redraft extract`: find the JSON value in model output.

use std::io::Write;

use anyhow::Result;
use redraft::core::extract;
use serde_json::json;

use super::Outcome;
use crate::args::ExtractArgs;
use crate::input;

pub fn run(args: ExtractArgs) -> Result<Outcome> {
    let text = input::file_or_stdin(args.input.as_deref(), "input")?;
    let found = match extract::extract(&text) {
        Ok(found) => found,
        Err(no) => {
            eprintln!("redraft: {no}");
            return Ok(Outcome::Failed);
        }
    };
    let value = if args.json {
        json!({"value": found.value, "route": found.route, "repairs": found.repairs})
    } else {
        found.value
    };
    let text = if args.compact { serde_json::to_string(&value)? } else { serde_json::to_string_pretty(&value)? };
    let mut stdout = crate::redacted::stdout();
    writeln!(stdout, "{text}")?;
    stdout.flush()?;
    Ok(Outcome::Success)
}
