//! Why a kind (or the kinds directory) cannot be used.

use std::fmt;
use std::path::{Path, PathBuf};

/// A kind cannot be loaded, or a kind name is unknown. Every error names the file, with its
/// line where there is one, and says how to fix it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KindError {
    /// The kinds directory does not exist (or is not a directory).
    #[error(
        "the kinds directory `{}` does not exist\nhint: pass `--kinds DIR` or set `kinds_dir` in the config (default `./kinds`)",
        dir.display()
    )]
    MissingDir { dir: PathBuf },

    /// A file cannot be read.
    #[error("cannot read `{}`: {source}{}", path.display(), hint_line(hint))]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
        hint: Option<&'static str>,
    },

    /// `kind.toml` is not valid TOML or has an unknown or missing key.
    #[error(
        "{}: {message}\nhint: kind.toml takes `description`, `prompt`, `[tables.NAME]` (`file`, `key`), `[[rules]]` (`code`, `each`, `when`, `check`, `found`, `expected`, `path`, `message`, `severity`) and `[llm_check]` (`criterion`)",
        Loc(path, *line, *column)
    )]
    Toml { path: PathBuf, line: Option<usize>, column: Option<usize>, message: String },

    /// `schema.json` or `example.json` is not valid JSON.
    #[error("{}: not valid JSON: {message}", Loc(path, Some(*line), Some(*column)))]
    Json { path: PathBuf, line: usize, column: usize, message: String },

    /// `schema.json` is not a valid JSON Schema.
    #[error("`{}` is not a valid JSON Schema: {message}", path.display())]
    Schema { path: PathBuf, message: String },

    /// `example.json` does not match the kind's schema.
    #[error(
        "`{}` does not match the kind's schema: {problems}\nhint: fix the example (it is shown to the model) or the schema",
        path.display()
    )]
    Example { path: PathBuf, problems: String },

    /// A reference table cannot be loaded.
    #[error("{}: table `{table}`: {message}{}", Loc(path, *line, None), hint_line(hint))]
    Table { path: PathBuf, line: Option<usize>, table: String, message: String, hint: Option<String> },

    /// A rule does not compile: bad CEL, a bad template, an unknown name.
    #[error("{}: rule `{code}`: `{field}` {message}{}", Loc(path, Some(*line), None), hint_line(hint))]
    Rule { path: PathBuf, line: usize, code: String, field: &'static str, message: String, hint: Option<String> },

    /// Anything else wrong in a kind's files.
    #[error("{}: {message}{}", Loc(path, *line, None), hint_line(hint))]
    Invalid { path: PathBuf, line: Option<usize>, message: String, hint: Option<String> },

    /// No kind has this name.
    #[error(
        "unknown kind `{name}`; the kinds in `{}` are: {}\nhint: a kind is a directory `NAME/` holding `kind.toml` and `schema.json`",
        dir.display(),
        if available.is_empty() { "(none)".to_owned() } else { available.join(", ") }
    )]
    Unknown { name: String, dir: PathBuf, available: Vec<String> },
}

fn hint_line<S: AsRef<str>>(hint: &Option<S>) -> String {
    hint.as_ref().map(|h| format!("\nhint: {}", h.as_ref())).unwrap_or_default()
}

/// `path[:line[:column]]`.
struct Loc<'a>(&'a Path, Option<usize>, Option<usize>);

impl fmt::Display for Loc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.display())?;
        if let Some(line) = self.1 {
            write!(f, ":{line}")?;
            if let Some(column) = self.2 {
                write!(f, ":{column}")?;
            }
        }
        Ok(())
    }
}

/// The 1-based line and column of byte `offset` in `text`.
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}
