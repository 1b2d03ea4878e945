//! Evaluator directives (`schema:PATH`, `kind:NAME`, `exec:CMD`, …), parsed once at the edge:
//! a request's directive is read into a [`Directive`] when the request is deserialized, and
//! written back as the same text (`Display`), so what is stored reads back as what was parsed.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One evaluator, as named on a command line, in an HTTP request or an MCP call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Directive {
    /// `schema:PATH` — a JSON Schema file.
    Schema(String),
    /// `kind:NAME` (alias `validate:NAME`) — a registered kind.
    Kind(String),
    /// `exec:CMD` — a shell command judges the artifact.
    Exec(String),
    /// `http:URL` (or a bare `http://`/`https://` URL) — an HTTP validator.
    Http(String),
    /// `score:CRITERION` — an LLM judge.
    Score(String),
    /// `llm:NAME` — a kind checked by an LLM validator.
    Llm(String),
}

/// A directive could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not an evaluator directive: {reason}\nhint: write `schema:PATH`, `kind:NAME`, `exec:CMD`, `http:URL`, `score:CRITERION` or `llm:NAME`"
)]
pub struct DirectiveError {
    pub text: String,
    pub reason: &'static str,
}

impl Directive {
    /// The directive's prefix word (`schema`, `kind`, …).
    pub fn word(&self) -> &'static str {
        match self {
            Directive::Schema(_) => "schema",
            Directive::Kind(_) => "kind",
            Directive::Exec(_) => "exec",
            Directive::Http(_) => "http",
            Directive::Score(_) => "score",
            Directive::Llm(_) => "llm",
        }
    }
}

impl fmt::Display for Directive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let arg = match self {
            Directive::Schema(a)
            | Directive::Kind(a)
            | Directive::Exec(a)
            | Directive::Http(a)
            | Directive::Score(a)
            | Directive::Llm(a) => a,
        };
        write!(f, "{}:{arg}", self.word())
    }
}

impl Serialize for Directive {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Directive {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for Directive {
    type Err = DirectiveError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |reason| DirectiveError { text: text.to_owned(), reason };
        if text.starts_with("http://") || text.starts_with("https://") {
            return Ok(Directive::Http(text.to_owned()));
        }
        let (word, arg) = text.split_once(':').ok_or_else(|| err("it has no `word:` prefix"))?;
        let arg = arg.trim();
        if arg.is_empty() {
            return Err(err("nothing follows the `:`"));
        }
        let arg = arg.to_owned();
        match word.trim() {
            "schema" => Ok(Directive::Schema(arg)),
            "kind" | "validate" => Ok(Directive::Kind(arg)),
            "exec" => Ok(Directive::Exec(arg)),
            "http" => Ok(Directive::Http(if arg.starts_with("//") { format!("http:{arg}") } else { arg })),
            "score" => Ok(Directive::Score(arg)),
            "llm" => Ok(Directive::Llm(arg)),
            _ => Err(err("the prefix is unknown")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        let ok = |s: &str, d: Directive| assert_eq!(s.parse::<Directive>(), Ok(d), "{s}");
        ok("schema:person.json", Directive::Schema("person.json".into()));
        ok("kind:fill", Directive::Kind("fill".into()));
        ok("validate:fill", Directive::Kind("fill".into()));
        ok("exec:cargo test -q", Directive::Exec("cargo test -q".into()));
        ok("http://127.0.0.1:9/check", Directive::Http("http://127.0.0.1:9/check".into()));
        ok("http:https://v.example/check", Directive::Http("https://v.example/check".into()));
        ok("score:is it polite?", Directive::Score("is it polite?".into()));
        ok("llm:email", Directive::Llm("email".into()));
        // What is written reads back as the same directive.
        for text in ["schema:a b.json", "kind:fill", "exec:pytest -q 'x y'", "http://h:1/c", "score:ok?", "llm:e"] {
            let d: Directive = text.parse().unwrap();
            assert_eq!(d.to_string().parse::<Directive>(), Ok(d.clone()), "{text}");
            let json = serde_json::to_value(&d).unwrap();
            assert_eq!(serde_json::from_value::<Directive>(json).unwrap(), d);
        }
        for bad in ["", "schema:", "person.json", "sql:select"] {
            let err = bad.parse::<Directive>().unwrap_err().to_string();
            assert!(err.contains("hint:"), "{err}");
        }
    }
}
