//! Find a JSON value in free-form model text.
//!
//! Routes, tried in order after `<think>…</think>` reasoning is removed: `bare` (the whole
//! text is one JSON document), `fenced` (```` ```json ```` or bare ```` ``` ```` fences), `balanced`
//! (the first balanced `{…}`/`[…]` in prose that parses), then `repaired` (a lenient parse that
//! fixes common damage and records every repair it made). One exception to `balanced`: a value
//! that opens the text and is followed only by more values, some of them damaged
//! (`{"a": 1}[2, True]`), is read with them as one sequence.
//!
//! The key design decision: **strict parsing always comes first, so text that is valid JSON is
//! never changed by a repair.** The lenient parser only runs when no strict route succeeded,
//! and even then, given valid JSON, it returns exactly what `serde_json` returns.
//!
//! Two further rules keep repair honest. Bare prose is not JSON: a refusal such as
//! "I cannot help with that." is [`NoJson`], never a JSON string (only a lone data-like token,
//! such as `0.0.1` or a URL, is read as a string). And a text made only of several JSON values
//! (NDJSON, `{…}, {…}`) becomes one array, recorded as [`Repair::MultipleValues`].
//!
//! Every step is linear in the input: the scanner, fence finder and lenient parser each make
//! one pass, and the number of spans and repair starting points tried is bounded.
//!
//! After extraction, [`coerce`] gives a value the shape its JSON Schema asks for where that is
//! unambiguous (`"€77.08"` where a number is expected is 77.08), recording each change as a
//! [`Coercion`]; a value that fits is never changed.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use coerce::{Coercion, coerce};

mod coerce;
mod fence;
mod lenient;
mod scan;
mod think;

/// How many fenced blocks are looked at.
const MAX_FENCES: usize = 8;
/// How many starting points the lenient parser is tried from.
const MAX_REPAIR_STARTS: usize = 8;

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
    /// A trailing, leading or doubled comma was removed.
    TrailingComma,
    /// A comma between items or members was added.
    MissingComma,
    /// A colon between a key and its value was added.
    MissingColon,
    /// A key had no value (`{"a": }`, or the text ended after its colon: `{"a":`); `null` was
    /// used. A key the text ended before its colon (`{"a": 1, "na` or `{"a": 1, "name"`) is
    /// dropped instead, recorded as [`Repair::TruncatedTail`] alone.
    MissingValue,
    /// Single-quoted strings were read as strings.
    SingleQuotes,
    /// Typographic quotes (“ ” ‘ ’ ` ´) were read as string quotes.
    SmartQuotes,
    /// An object key without quotes was read as a string.
    UnquotedKey,
    /// A value without quotes was read as a string.
    UnquotedString,
    /// A quote inside a string was not escaped (or was doubled); it was kept as text.
    UnescapedQuote,
    /// A string lacked its start or end quote before a delimiter; it was closed there.
    MissingQuote,
    /// An escape that JSON does not define was kept as text (`\d` keeps its backslash) or
    /// resolved (`\'` is a quote, a lone surrogate becomes U+FFFD).
    InvalidEscape,
    /// A raw newline, tab or other control character inside a string was escaped.
    ControlCharacter,
    /// `//`, `/* */` or `#` comments were removed.
    Comment,
    /// Python `True`/`False`/`None` (or `TRUE`, `NULL`, …) became JSON literals.
    PythonLiteral,
    /// JavaScript `undefined` became `null`.
    Undefined,
    /// `NaN` or `Infinity` (which JSON cannot hold) became `null`.
    NonFiniteNumber,
    /// A number was written in a form JSON does not allow (`.5`, `2.`, `1_000`, `+1`, `0789`).
    NumberFormat,
    /// Strings joined with `+` were concatenated.
    Concatenation,
    /// A wrapper call such as JSONP `callback(…)` or MongoDB `ObjectId("…")` was removed.
    FunctionWrapper,
    /// A regular expression literal `/…/` was kept as a string.
    RegexLiteral,
    /// A `...` placeholder was removed.
    Ellipsis,
    /// A Python tuple `(…)` became an array.
    Tuple,
    /// A Python set `{'a', 'b'}` became an array.
    SetLiteral,
    /// A missing, extra or wrong closing bracket was fixed.
    MismatchedBracket,
    /// A stray word between members was dropped.
    StrayText,
    /// A string holding only a ```` ```json ```` block whose quotes were not escaped was read
    /// as the block's value (`{"a": "```json {"b": 1}```"}`).
    FencedString,
    /// Backslash-escaped JSON (`{\"a\": 1}`) was unescaped.
    EscapedJson,
    /// No-break, zero-width or other Unicode spaces outside strings were treated as spaces.
    UnicodeWhitespace,
    /// Several top-level values (NDJSON, `{…}, {…}`) were combined into one array.
    MultipleValues,
    /// The text ended early; open strings, arrays and objects were closed.
    TruncatedTail,
}

/// A JSON value found in raw text.
#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    /// The value found.
    pub value: Value,
    /// The route that found it.
    pub route: Route,
    /// Repairs applied, in order of first occurrence, without duplicates. Empty unless
    /// `route == Route::Repaired`.
    pub repairs: Vec<Repair>,
    /// Byte range in the input that the value was read from.
    pub span: Range<usize>,
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
    /// The text was empty or only whitespace.
    #[error("the answer was empty; answer with a JSON value")]
    Empty,
    /// The text held no JSON value (prose, a refusal, or damage beyond repair).
    #[error("no JSON value was found in the answer; answer with only the JSON value")]
    NotFound,
    /// The text held only `<think>` reasoning, or reasoning that was never closed.
    #[error(
        "the answer held only reasoning (a <think> block) and no JSON value; finish reasoning, then answer with only the JSON value"
    )]
    ReasoningOnly,
}

/// Find a JSON value in `raw`.
pub fn extract(raw: &str) -> Result<Extraction, NoJson> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(NoJson::Empty);
    }
    if let Some(value) = strict(trimmed) {
        let start = raw.len() - raw.trim_start().len();
        return Ok(found(value, Route::Bare, start..start + trimmed.len()));
    }
    let visible = think::strip(raw);
    if visible.unfinished {
        return Err(NoJson::ReasoningOnly);
    }
    if visible.text.trim().is_empty() {
        return Err(if visible.had_reasoning { NoJson::ReasoningOnly } else { NoJson::Empty });
    }
    let mut extraction = search(&visible.text, !visible.had_reasoning)?;
    let Range { start, end } = extraction.span;
    let raw_end = if end > start { visible.raw_offset(end - 1) + 1 } else { visible.raw_offset(end) };
    extraction.span = visible.raw_offset(start)..raw_end;
    Ok(extraction)
}

/// Parse `text` as one JSON document with the lenient parser alone: no route search and no
/// refusal check. Text after the value is ignored. Valid JSON comes back unchanged with no
/// repairs.
pub fn repair(text: &str) -> Option<(Value, Vec<Repair>)> {
    lenient::parse(text, 0).ok().map(|parsed| (parsed.value, parsed.repairs))
}

fn strict(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok()
}

fn found(value: Value, route: Route, span: Range<usize>) -> Extraction {
    Extraction { value, route, repairs: Vec::new(), span }
}

/// Try the routes on text with reasoning removed; `checked` says the whole text is already
/// known not to parse strictly.
fn search(text: &str, checked: bool) -> Result<Extraction, NoJson> {
    let lead = text.len() - text.trim_start().len();
    let trimmed = text.trim();
    if !checked && let Some(value) = strict(trimmed) {
        return Ok(found(value, Route::Bare, lead..lead + trimmed.len()));
    }
    let fences = fence::blocks(text, MAX_FENCES);
    let mut known_bad = Vec::with_capacity(fences.len() + 1);
    known_bad.push(lead..lead + trimmed.len());
    for block in &fences {
        let inner = text.get(block.clone()).unwrap_or_default();
        let content = inner.trim();
        let start = block.start + (inner.len() - inner.trim_start().len());
        if let Some(value) = strict(content) {
            return Ok(found(value, Route::Fenced, start..start + content.len()));
        }
        known_bad.push(start..start + content.len());
    }
    if let Some((value, span)) = scan::sequence(text) {
        return Ok(Extraction { value, route: Route::Repaired, repairs: vec![Repair::MultipleValues], span });
    }
    let spans = scan::spans(text, &known_bad);
    if let Some((value, span)) = spans.found {
        return Ok(damaged_sequence(text, &span).unwrap_or_else(|| found(value, Route::Balanced, span)));
    }
    // starting points for repair: fenced contents, the whole text, damaged spans
    let mut starts: Vec<(usize, usize, bool)> = Vec::new();
    for block in &fences {
        let inner = text.get(block.clone()).unwrap_or_default();
        if !inner.trim().is_empty() {
            starts.push((block.start + (inner.len() - inner.trim_start().len()), block.end, false));
        }
    }
    if !matches!(text.as_bytes().get(lead), Some(b'{' | b'[')) {
        starts.push((lead, text.len(), false));
    }
    for &start in &spans.damaged {
        let prose_before = text.get(..start).is_some_and(|before| !before.trim().is_empty());
        starts.push((start, text.len(), prose_before));
    }
    starts.dedup_by_key(|s| s.0);
    for (start, end, prose_before) in starts.into_iter().take(MAX_REPAIR_STARTS) {
        let slice = text.get(..end).unwrap_or_default();
        let tail = slice.get(start..).map_or(0, |s| s.trim_end().len());
        let parsed = if known_bad.contains(&(start..start + tail)) {
            lenient::parse_invalid(slice, start)
        } else {
            lenient::parse(slice, start)
        };
        if let Ok(parsed) = parsed
            && acceptable(&parsed, slice, start, prose_before)
        {
            let read = slice.get(start..parsed.end).map_or(0, |s| s.trim_end().len());
            return Ok(Extraction {
                value: parsed.value,
                route: Route::Repaired,
                repairs: parsed.repairs,
                span: start..start + read,
            });
        }
    }
    Err(NoJson::NotFound)
}

/// A value at the start of the text followed only by more values, some of them damaged
/// (`{"a": 1}[1, 2, True]`): the values combined, as [`Repair::MultipleValues`].
fn damaged_sequence(text: &str, span: &Range<usize>) -> Option<Extraction> {
    let b = text.as_bytes();
    let at_start = text.get(..span.start).is_some_and(|before| before.trim().is_empty());
    let next = b.get(lenient::skip_trivia(b, span.end, b.len()));
    if !at_start || !matches!(next, Some(b'{' | b'[')) {
        return None;
    }
    let parsed = lenient::parse(text, span.start).ok()?;
    if !parsed.complete || !parsed.repairs.contains(&Repair::MultipleValues) {
        return None;
    }
    let read = text.get(span.start..parsed.end).map_or(0, |s| s.trim_end().len());
    Some(Extraction {
        value: parsed.value,
        route: Route::Repaired,
        repairs: parsed.repairs,
        span: span.start..span.start + read,
    })
}

/// Whether a lenient parse is an answer rather than prose read as JSON.
///
/// Bare words become a string only when the whole candidate is one data-like token; scalars
/// must fill the candidate; a container next to prose that holds only bare words (or nothing,
/// cut off) must also hold some JSON-only token (a quoted string, number, literal or colon),
/// so `I can't do [that].` is not `["that"]`.
fn acceptable(parsed: &lenient::Parsed, text: &str, start: usize, prose_before: bool) -> bool {
    if parsed.bare_words {
        let token = text.get(start..).unwrap_or_default().trim();
        return parsed.complete && lone_token(token);
    }
    match &parsed.value {
        // bare words in brackets next to prose (`[citation needed] I can't`) are prose too
        Value::Object(_) | Value::Array(_) => {
            let weak = parsed.evidence == 0
                && parsed
                    .repairs
                    .iter()
                    .any(|r| matches!(r, Repair::UnquotedString | Repair::UnquotedKey | Repair::TruncatedTail));
            !weak || (!prose_before && parsed.complete)
        }
        // a lone quote character is not an empty string
        Value::String(s) if s.is_empty() => {
            parsed.complete && text.get(start..).is_some_and(|t| t.trim().chars().count() > 1)
        }
        _ => parsed.complete,
    }
}

/// A single token that reads as data, not as a word of prose: it starts like a JSON or
/// Python literal, holds a digit or `_`, or is a URL.
fn lone_token(token: &str) -> bool {
    const LITERALS: [&str; 6] = ["true", "false", "null", "True", "False", "None"];
    !token.is_empty()
        && token.len() <= 256
        && !token.chars().any(char::is_whitespace)
        && (LITERALS.iter().any(|lit| token.starts_with(lit))
            || token.bytes().any(|c| c.is_ascii_digit() || c == b'_')
            || token.contains("://"))
}
