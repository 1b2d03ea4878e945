//! A lenient JSON parser that repairs common damage and records every repair.
//!
//! One forward pass over the bytes, building a [`Value`] directly. Decisions that need context
//! (is this quote the end of the string?) look ahead a bounded distance; a string is re-read at
//! most once, and a global budget caps re-reading, so the parser stays linear in the input.
//! Given valid JSON it returns exactly what `serde_json` returns and records no repair: numbers
//! are converted by `serde_json` itself, and every repair path starts from a byte that valid
//! JSON cannot contain at that point.

mod lex;
mod number;
mod string;

use serde_json::{Map, Value};

use crate::Repair;
pub(crate) use lex::skip_trivia;
use lex::{member_at, quote_at};

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
    Ok(Parsed {
        value,
        repairs: p.repairs,
        end,
        complete: i >= p.end,
        evidence: p.evidence,
        bare_words,
    })
}

/// Combine several top-level values into one: empty `{}`/`[]` placeholders beside real
/// values are dropped, a single survivor stands alone, otherwise they become an array.
pub(crate) fn combine(items: Vec<Value>) -> Value {
    let empty = |v: &Value| match v {
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    if items.iter().all(empty) {
        return Value::Array(items);
    }
    let mut kept: Vec<Value> = items.into_iter().filter(|v| !empty(v)).collect();
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
    repairs: Vec<Repair>,
    evidence: usize,
    /// Bytes that may still be re-read when a string is parsed a second time.
    reread_budget: usize,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str, start: usize) -> Self {
        Parser {
            src,
            b: src.as_bytes(),
            pos: start.min(src.len()),
            end: src.len(),
            depth: 0,
            repairs: Vec::new(),
            evidence: 0,
            reread_budget: 2 * src.len() + 4096,
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
            b'\\' if quote_at(self.b, self.pos + 1).is_some() => {
                self.pos += 1;
                self.note(Repair::EscapedJson);
                self.string_value(ctx).map(Some)
            }
            _ if quote_at(self.b, self.pos).is_some() => self.string_value(ctx).map(Some),
            _ => self.word(ctx),
        }
    }

    /// After the first top-level value: a trailing comma, an object closed too early
    /// (`{"a": 1}, "b": 2}`), or several values in a row (NDJSON, `1, 2, 3`).
    fn top_sequence(&mut self, first: Value) -> Result<Value, Fail> {
        let (mut n, mut c) = self.next_significant(self.pos);
        let comma = c == Some(b',');
        if comma {
            (n, c) = self.next_significant(n + 1);
        }
        let Some(c) = c else {
            if comma {
                self.note(Repair::TrailingComma);
            }
            return Ok(first);
        };
        if let Value::Object(map) = &first
            && comma
            && (member_at(self.b, n, self.end) || self.key_then_string(n))
        {
            self.note(Repair::MismatchedBracket);
            self.pos = n;
            return self.object_body(map.clone());
        }
        let strong = matches!(c, b'{' | b'[' | b'"' | b'-' | b'0'..=b'9');
        let newline = self.b.get(self.pos..n).is_some_and(|gap| gap.contains(&b'\n'));
        let bracket = matches!(c, b'{' | b'[') && matches!(first, Value::Object(_) | Value::Array(_));
        if !strong || !(comma || newline || bracket) {
            return Ok(first);
        }
        let saved = (self.pos, self.repairs.len(), self.evidence);
        let mut items = vec![first];
        loop {
            self.pos = n;
            let before = self.evidence;
            match self.value(Ctx::Top) {
                Ok(Some(v)) if !(v.is_string() && self.evidence == before) => items.push(v),
                _ => {
                    (self.pos, self.evidence) = (saved.0, saved.2);
                    self.repairs.truncate(saved.1);
                    return Ok(items.swap_remove(0));
                }
            }
            let (m, c) = self.next_significant(self.pos);
            let (m, c, comma) = if c == Some(b',') {
                let (k, d) = self.next_significant(m + 1);
                (k, d, true)
            } else {
                (m, c, false)
            };
            match c {
                None => {
                    if comma {
                        self.pos = m;
                    }
                    break;
                }
                Some(b'{' | b'[' | b'"' | b'-' | b'0'..=b'9') => n = m,
                Some(_) => break,
            }
        }
        self.note(Repair::MultipleValues);
        Ok(combine(items))
    }

    /// Whether a quoted string at `i` is followed directly by another quoted string, as in
    /// `"key" "value"` (a member missing its colon).
    fn key_then_string(&self, i: usize) -> bool {
        let Some((open, len)) = quote_at(self.b, i) else {
            return false;
        };
        let mut j = i + len;
        while j < self.end.min(i + 256) {
            if let Some((q, l)) = quote_at(self.b, j)
                && open.closed_by(q)
            {
                let (n, _) = self.next_significant(j + l);
                return n > j + l && quote_at(self.b, n).is_some();
            }
            j += 1;
        }
        false
    }

    fn object(&mut self) -> Result<Value, Fail> {
        self.enter()?;
        self.pos += 1;
        let value = self.object_body(Map::new());
        self.depth -= 1;
        value
    }

    /// Members of an object whose `{` was already read, added to `map`.
    fn object_body(&mut self, mut map: Map<String, Value>) -> Result<Value, Fail> {
        let mut first = map.is_empty();
        let mut comma = false;
        let mut last_key: Option<String> = None;
        loop {
            self.skip_ws();
            let Some(c) = self.peek() else {
                self.note(Repair::TruncatedTail);
                break;
            };
            match c {
                b'}' => {
                    self.pos += 1;
                    if comma {
                        self.note(Repair::TrailingComma);
                    }
                    break;
                }
                b']' | b')' | b'{' => {
                    // the object was not closed; the enclosing value takes this byte
                    self.note(Repair::MismatchedBracket);
                    break;
                }
                b',' => {
                    self.pos += 1;
                    if first || comma {
                        self.note(Repair::TrailingComma);
                    }
                    comma = true;
                    continue;
                }
                b'[' => {
                    // `"a": ["x"], ["y"]`: a second array continuing the previous member's
                    if let Some(key) = &last_key
                        && map.get(key).is_some_and(Value::is_array)
                        && let Value::Array(more) = self.array()?
                        && let Some(Value::Array(prev)) = map.get_mut(key)
                    {
                        prev.extend(more);
                        self.note(Repair::MismatchedBracket);
                        comma = false;
                        continue;
                    }
                    return Err(self.fail("an object key"));
                }
                b':' => {
                    let (n, next) = self.next_significant(self.pos + 1);
                    if next == Some(b'}') {
                        self.note(Repair::StrayText);
                        self.pos = n;
                        continue;
                    }
                    return Err(self.fail("an object key"));
                }
                _ => {}
            }
            if self.ellipsis() {
                continue;
            }
            if !first && !comma {
                self.note(Repair::MissingComma);
            }
            let quoted = quote_at(self.b, self.pos).is_some()
                || (c == b'\\' && quote_at(self.b, self.pos + 1).is_some());
            let Some(key) = self.key()? else {
                return Err(self.fail("an object key"));
            };
            self.skip_ws();
            match self.peek() {
                Some(b':') => {
                    self.pos += 1;
                    self.evidence += 1;
                }
                None => {
                    // a dangling key at the end of the text is dropped
                    self.note(Repair::TruncatedTail);
                    break;
                }
                Some(b',') if quoted && first => return self.set_literal(key),
                Some(b'}' | b']' | b')' | b',') => return Err(self.fail("a value for the key")),
                Some(_) => {
                    if !quoted && member_at(self.b, self.pos, self.end) {
                        // a stray word before the next member: `{"a": 1, COMMENT "b": 2}`
                        self.note(Repair::StrayText);
                        comma = true;
                        continue;
                    }
                    self.note(Repair::MissingColon);
                }
            }
            self.skip_ws();
            let value = match self.peek() {
                None => {
                    self.note(Repair::TruncatedTail);
                    break;
                }
                Some(b',' | b'}') => {
                    self.note(Repair::MissingValue);
                    Value::Null
                }
                Some(_) => match self.value(Ctx::Value)? {
                    Some(v) => v,
                    None => {
                        self.note(Repair::MissingValue);
                        Value::Null
                    }
                },
            };
            map.insert(key.clone(), value);
            last_key = Some(key);
            first = false;
            comma = false;
        }
        Ok(Value::Object(map))
    }

    /// An object key: quoted, or bare (`key`, `2`).
    fn key(&mut self) -> Result<Option<String>, Fail> {
        if self.peek() == Some(b'\\') && quote_at(self.b, self.pos + 1).is_some() {
            self.pos += 1;
            self.note(Repair::EscapedJson);
        }
        if quote_at(self.b, self.pos).is_some() {
            return self.quoted(Ctx::Key).map(Some);
        }
        Ok(self.unquoted(Ctx::Key)?.map(|(text, _)| text))
    }

    /// A Python set `{'a', 'b'}` whose first item was read as `first`; becomes an array.
    fn set_literal(&mut self, first: String) -> Result<Value, Fail> {
        let (mut items, _, closed) = self.items(b'}', vec![Value::String(first)])?;
        if !closed {
            return Err(self.fail("a closing `}`"));
        }
        self.note(Repair::SetLiteral);
        items.shrink_to_fit();
        Ok(Value::Array(items))
    }

    fn array(&mut self) -> Result<Value, Fail> {
        self.enter()?;
        self.pos += 1;
        let items = self.items(b']', Vec::new());
        self.depth -= 1;
        items.map(|(items, _, _)| Value::Array(items))
    }

    /// A Python tuple `(1, 2)` becomes an array; `(x)` is just `x`.
    fn tuple(&mut self) -> Result<Value, Fail> {
        self.enter()?;
        self.pos += 1;
        let items = self.items(b')', Vec::new());
        self.depth -= 1;
        let (mut items, comma, _) = items?;
        self.note(Repair::Tuple);
        if items.len() == 1
            && !comma
            && let Some(only) = items.pop()
        {
            return Ok(only);
        }
        Ok(Value::Array(items))
    }

    /// Items up to `close`, after the opening bracket. Returns the items, whether a comma was
    /// seen, and whether the closing bracket was found.
    fn items(&mut self, close: u8, mut items: Vec<Value>) -> Result<(Vec<Value>, bool, bool), Fail> {
        let mut first = items.is_empty();
        let mut comma = false;
        let mut saw_comma = false;
        loop {
            self.skip_ws();
            let Some(c) = self.peek() else {
                self.note(Repair::TruncatedTail);
                return Ok((items, saw_comma, false));
            };
            if c == close {
                self.pos += 1;
                if comma && !first {
                    self.note(Repair::TrailingComma);
                }
                return Ok((items, saw_comma, true));
            }
            match c {
                b'}' | b']' | b')' => {
                    self.note(Repair::MismatchedBracket);
                    let (n, next) = self.next_significant(self.pos + 1);
                    if c == b'}' && next == Some(b',') {
                        if member_at(self.b, n + 1, self.end) {
                            // `["a", "b"}, "key": …`: the `}` was meant to close the array
                            self.pos += 1;
                            return Ok((items, saw_comma, true));
                        }
                        // `[{"a": 1}}, {"a": 2}]`: a stray `}`
                        self.pos += 1;
                        continue;
                    }
                    if c != b'}' {
                        // `[1, 2)`: the wrong closing bracket still closes
                        self.pos += 1;
                    }
                    return Ok((items, saw_comma, true));
                }
                b',' => {
                    self.pos += 1;
                    saw_comma = true;
                    if first || comma {
                        self.note(Repair::TrailingComma);
                    }
                    comma = true;
                    continue;
                }
                _ => {}
            }
            if self.ellipsis() {
                continue;
            }
            if !first && !comma {
                self.note(Repair::MissingComma);
            }
            let Some(item) = self.value(Ctx::Array)? else {
                return Err(self.fail("an array item"));
            };
            let item = match item {
                Value::String(key) if self.next_significant(self.pos).1 == Some(b':') => {
                    self.implicit_object(key)?
                }
                other => other,
            };
            items.push(item);
            first = false;
            comma = false;
        }
    }

    /// `["key": "value"]`: a member inside an array opens an object that lost its `{`.
    fn implicit_object(&mut self, key: String) -> Result<Value, Fail> {
        self.enter()?;
        self.note(Repair::MismatchedBracket);
        self.pos = self.next_significant(self.pos).0 + 1;
        self.evidence += 1;
        let value = self.value(Ctx::Value)?.unwrap_or(Value::Null);
        let mut map = Map::new();
        map.insert(key, value);
        let object = self.object_body(map);
        self.depth -= 1;
        object
    }

    /// Skip a `...` placeholder (and a comma after it) inside an array or object.
    fn ellipsis(&mut self) -> bool {
        let rest = self.b.get(self.pos..self.end).unwrap_or_default();
        let len = if rest.starts_with(b"...") {
            3
        } else if rest.starts_with("…".as_bytes()) {
            "…".len()
        } else {
            return false;
        };
        self.pos += len;
        self.note(Repair::Ellipsis);
        self.skip_ws();
        if self.peek() == Some(b',') {
            self.pos += 1;
        }
        true
    }

    /// Identifiers: literals (`true`, `True`, `undefined`, `NaN`), wrapper calls
    /// (`callback(…)`, `ObjectId("…")`), or the start of an unquoted string.
    fn word(&mut self, ctx: Ctx) -> Result<Option<Value>, Fail> {
        let start = self.pos;
        let mut j = start;
        while j < self.end && self.b.get(j).is_some_and(|&c| lex::is_ident(c)) {
            j += 1;
        }
        let ident = self.src.get(start..j).unwrap_or_default();
        if !ident.is_empty() {
            let boundary = self.peek_at(j).is_none_or(|c| {
                lex::is_ws(c) || lex::is_delim(c) || c == b';' || quote_at(self.b, j).is_some()
            });
            if boundary && let Some(v) = self.literal(ident) {
                self.pos = j;
                self.evidence += 1;
                return Ok(Some(v));
            }
            if j >= self.end && ctx != Ctx::Top {
                // a literal cut off by the end of the text: `{"done": fals`
                for (word, v) in [("true", Value::Bool(true)), ("false", Value::Bool(false)), ("null", Value::Null)] {
                    if word.starts_with(ident) {
                        self.note(Repair::TruncatedTail);
                        self.pos = j;
                        self.evidence += 1;
                        return Ok(Some(v));
                    }
                }
            }
            let mut k = j;
            if ctx == Ctx::Top {
                k = skip_trivia(self.b, j, self.end);
            }
            if self.peek_at(k) == Some(b'(') {
                self.note(Repair::FunctionWrapper);
                self.pos = k + 1;
                let inner = self.value(Ctx::Top)?.unwrap_or(Value::Null);
                self.skip_ws();
                if self.peek() == Some(b')') {
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b';') {
                        self.pos += 1;
                    }
                }
                return Ok(Some(inner));
            }
        }
        Ok(self.unquoted(ctx)?.map(|(text, _)| Value::String(text)))
    }

    /// The value of a literal word, noting any repair it needs.
    fn literal(&mut self, word: &str) -> Option<Value> {
        let (value, repair) = match word {
            "true" => (Value::Bool(true), None),
            "false" => (Value::Bool(false), None),
            "null" => (Value::Null, None),
            "True" | "TRUE" => (Value::Bool(true), Some(Repair::PythonLiteral)),
            "False" | "FALSE" => (Value::Bool(false), Some(Repair::PythonLiteral)),
            "None" | "NULL" | "Null" => (Value::Null, Some(Repair::PythonLiteral)),
            "undefined" => (Value::Null, Some(Repair::Undefined)),
            "NaN" | "Infinity" => (Value::Null, Some(Repair::NonFiniteNumber)),
            _ => return None,
        };
        if let Some(repair) = repair {
            self.note(repair);
        }
        Some(value)
    }
}

#[cfg(test)]
mod tests;
