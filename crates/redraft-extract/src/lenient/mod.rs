//! A lenient JSON parser that repairs common damage and records every repair.
//!
//! One forward pass over the bytes, building a [`Value`] directly. Decisions that need context
//! (is this quote the end of the string?) look ahead a bounded distance; a string is re-read at
//! most once, and a global budget caps re-reading, so the parser stays linear in the input.
//! Given valid JSON it returns exactly what `serde_json` returns and records no repair: numbers
//! are converted by `serde_json` itself, and every repair path starts from a byte that valid
//! JSON cannot contain at that point. As a backstop, a document `serde_json` accepts whole is
//! returned as `serde_json` reads it, before any heuristic runs.

mod array;
mod bare;
mod closing;
mod escape;
mod lex;
mod number;
mod object;
mod opens;
mod string;
mod top;

use serde_json::Value;

use crate::Repair;
use lex::quote_at;
pub(crate) use lex::skip_trivia;

/// Deepest nesting of arrays and objects the parser follows before giving up.
const MAX_DEPTH: usize = 256;

/// Why the lenient parser gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fail {
    /// Byte offset where parsing stopped.
    pub(crate) at: usize,
    /// What was expected there.
    pub(crate) what: &'static str,
}

/// A value read by the lenient parser.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parsed {
    pub(crate) value: Value,
    /// Repairs in order of first occurrence, without duplicates.
    pub(crate) repairs: Vec<Repair>,
    /// Byte offset just past the value.
    pub(crate) end: usize,
    /// Whether only whitespace, comments and stray closing brackets follow the value.
    pub(crate) complete: bool,
    /// Tokens only JSON-like text would hold: quoted strings, numbers, literals, colons.
    pub(crate) evidence: usize,
    /// Whether the value is a string read from bare words, with no such evidence around it.
    pub(crate) bare_words: bool,
}

/// Where a value is being read; decides where unquoted text and damaged strings stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Top,
    Array,
    Value,
    Key,
}

/// Parse one JSON document leniently from `src[start..]`; text after the value is ignored.
pub(crate) fn parse(src: &str, start: usize) -> Result<Parsed, Fail> {
    if let Some(parsed) = strict(src, start) {
        return Ok(parsed);
    }
    parse_invalid(src, start)
}

/// [`parse`] for text the caller has already found not to be valid JSON (`serde_json`
/// rejected `src[start..]`), so the strict attempt is not repeated.
pub(crate) fn parse_invalid(src: &str, start: usize) -> Result<Parsed, Fail> {
    let b = src.as_bytes();
    let s = skip_trivia(b, start, b.len());
    if escaped_document(b, s) {
        let inner = unescape(src.get(s..).unwrap_or_default());
        let mut parsed = parse_plain(&inner, 0)?;
        parsed.repairs.insert(0, Repair::EscapedJson);
        parsed.repairs.dedup();
        parsed.end = src.len();
        return Ok(parsed);
    }
    parse_plain(src, start)
}

/// `src[start..]` read by `serde_json`, when it is one valid JSON document: no heuristic can
/// change valid JSON, whatever it holds.
fn strict(src: &str, start: usize) -> Option<Parsed> {
    let text = src.get(start..)?;
    let value: Value = serde_json::from_str(text).ok()?;
    let end = start + text.trim_end().len();
    Some(Parsed { value, repairs: Vec::new(), end, complete: true, evidence: 1, bare_words: false })
}

/// Whether the document is backslash-escaped JSON such as `{\"key\": \"value\"}`.
fn escaped_document(b: &[u8], s: usize) -> bool {
    let at = match b.get(s) {
        Some(b'{' | b'[') => skip_trivia(b, s + 1, b.len()),
        _ => s,
    };
    b.get(at) == Some(&b'\\') && b.get(at + 1) == Some(&b'"')
}

/// Remove one level of escaping: `\"` becomes `"` and `\\` becomes `\`.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&n) = chars.peek()
            && (n == '"' || n == '\\')
        {
            out.push(n);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}

fn parse_plain(src: &str, start: usize) -> Result<Parsed, Fail> {
    let mut p = Parser::new(src, start);
    p.trim_fence_tail();
    let Some(first) = p.value(Ctx::Top)? else {
        return Err(p.fail("a JSON value"));
    };
    let bare_words = first.is_string() && p.evidence == 0;
    let value = p.top_sequence(first)?;
    let end = p.pos;
    // stray closing brackets after the value, as in `{"a": 1}}`
    let mut i = skip_trivia(p.b, p.pos, p.end);
    while i < p.end && matches!(p.b.get(i), Some(b'}' | b']')) {
        p.note(Repair::MismatchedBracket);
        i = skip_trivia(p.b, i + 1, p.end);
    }
    Ok(Parsed { value, repairs: p.repairs, end, complete: i >= p.end, evidence: p.evidence, bare_words })
}

/// Combine several top-level values into one: empty `{}`/`[]` placeholders beside real
/// values are dropped, a single survivor stands alone, otherwise they become an array.
/// When all are empty, those of another kind than the first are dropped (`[]{}` is `[]`,
/// `{}\n{}` is `[{}, {}]`).
pub(crate) fn combine(items: Vec<Value>) -> Value {
    let empty = |v: &Value| match v {
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    let mut kept: Vec<Value> = if items.iter().all(empty) {
        let first_is_array = items.first().is_some_and(Value::is_array);
        items.into_iter().filter(|v| v.is_array() == first_is_array).collect()
    } else {
        items.into_iter().filter(|v| !empty(v)).collect()
    };
    if kept.len() == 1
        && let Some(only) = kept.pop()
    {
        return only;
    }
    Value::Array(kept)
}

/// Parser state over one source text.
struct Parser<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
    /// Effective end of input (a trailing code fence is cut off).
    end: usize,
    depth: usize,
    /// How many tuples or wrapper calls `(…)` are open.
    parens: usize,
    repairs: Vec<Repair>,
    evidence: usize,
    /// Bytes that may still be re-read when a string is parsed a second time.
    reread_budget: usize,
    /// Whether the last quoted string read was cut off by the end of the text.
    string_cut: bool,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str, start: usize) -> Self {
        Parser {
            src,
            b: src.as_bytes(),
            pos: start.min(src.len()),
            end: src.len(),
            depth: 0,
            parens: 0,
            repairs: Vec::new(),
            evidence: 0,
            reread_budget: 2 * src.len() + 4096,
            string_cut: false,
        }
    }

    fn note(&mut self, repair: Repair) {
        if !self.repairs.contains(&repair) {
            self.repairs.push(repair);
        }
    }

    fn fail(&self, what: &'static str) -> Fail {
        Fail { at: self.pos, what }
    }

    fn peek(&self) -> Option<u8> {
        if self.pos < self.end { self.b.get(self.pos).copied() } else { None }
    }

    fn peek_at(&self, i: usize) -> Option<u8> {
        if i < self.end { self.b.get(i).copied() } else { None }
    }

    /// The next significant byte after `i` and its position.
    fn next_significant(&self, i: usize) -> (usize, Option<u8>) {
        let n = skip_trivia(self.b, i, self.end);
        (n, self.peek_at(n))
    }

    /// Drop a trailing code fence (```` ``` ````) left after the value.
    fn trim_fence_tail(&mut self) {
        let body = self.src.get(self.pos..self.end).unwrap_or_default().trim_end();
        let cut = body.trim_end_matches('`');
        if body.len() - cut.len() >= 3 {
            self.end = self.pos + cut.len();
        }
    }

    /// Skip whitespace and comments, noting comments and odd Unicode spaces.
    fn skip_ws(&mut self) {
        while self.pos < self.end {
            let c = self.b.get(self.pos).copied().unwrap_or(0);
            if lex::is_ws(c) {
                self.pos += 1;
            } else if let Some(kind) = lex::comment_at(self.b, self.pos) {
                self.note(Repair::Comment);
                self.pos = lex::comment_end(self.b, self.pos, self.end, kind);
            } else {
                let n = lex::odd_space_len(self.b, self.pos);
                if n == 0 {
                    break;
                }
                self.note(Repair::UnicodeWhitespace);
                self.pos += n;
            }
        }
    }

    fn enter(&mut self) -> Result<(), Fail> {
        if self.depth >= MAX_DEPTH {
            return Err(self.fail("less deeply nested values"));
        }
        self.depth += 1;
        Ok(())
    }

    /// Read one value, or `None` when no value starts here.
    fn value(&mut self, ctx: Ctx) -> Result<Option<Value>, Fail> {
        self.skip_ws();
        let Some(c) = self.peek() else {
            return Ok(None);
        };
        match c {
            b'{' => self.object().map(Some),
            b'[' => self.array().map(Some),
            b'(' => self.tuple().map(Some),
            b'-' | b'+' | b'.' | b'0'..=b'9' => self.number(ctx),
            b',' | b':' | b'}' | b']' | b')' => Ok(None),
            b'/' => self.regex(ctx),
            // a code fence is not a value
            b'`' if self.b.get(self.pos..self.pos + 3) == Some(b"```") => Ok(None),
            b'\\' if quote_at(self.b, self.pos + 1).is_some() => {
                self.pos += 1;
                self.note(Repair::EscapedJson);
                self.string_value(ctx).map(Some)
            }
            _ if quote_at(self.b, self.pos).is_some() => self.string_value(ctx).map(Some),
            _ => self.word(ctx),
        }
    }
}

#[cfg(test)]
mod tests;
