//! Reading `TEXT|@FILE|-` arguments and input files, with errors that name the file.

use std::io::Read;
use std::path::Path;

use anyhow::{Result, anyhow};
use serde_json::Value;

/// `@FILE` reads the file, `-` reads stdin, anything else is the text itself.
pub fn text_or_file(arg: &str, what: &str) -> Result<String> {
    if arg == "-" {
        return stdin(what);
    }
    match arg.strip_prefix('@') {
        Some(path) => read_file(Path::new(path), what),
        None => Ok(arg.to_owned()),
    }
}

/// A file named on the command line, or stdin for `-`/nothing.
pub fn file_or_stdin(arg: Option<&str>, what: &str) -> Result<String> {
    match arg {
        None | Some("-") => stdin(what),
        Some(path) => read_file(Path::new(path), what),
    }
}

fn read_file(path: &Path, what: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| anyhow!("cannot read the {what} file `{}`: {e}", path.display()))
}

fn stdin(what: &str) -> Result<String> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).map_err(|e| anyhow!("cannot read the {what} from stdin: {e}"))?;
    Ok(text)
}

/// `--context`: a JSON object, inline or `@FILE`.
pub fn context(arg: &str) -> Result<serde_json::Map<String, Value>> {
    let text = text_or_file(arg, "context")?;
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        anyhow!("`--context` is not valid JSON: {e}\nhint: pass a JSON object, e.g. --context '{{\"city\": \"Toledo\"}}', or @FILE")
    })?;
    match value {
        Value::Object(object) => Ok(object),
        other => Err(anyhow!(
            "`--context` must be a JSON object, not {}\nhint: wrap it, e.g. {{\"value\": …}}",
            kind(&other)
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
