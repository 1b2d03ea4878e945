//! Bare words: literals (`true`, `True`, `undefined`, `NaN`), wrapper calls (`callback(…)`,
//! `ObjectId("…")`), unquoted text and regular-expression literals.

use serde_json::Value;

use super::lex::{self, Quote, member_at, quote_at};
use super::{Ctx, Fail, Parser, skip_trivia};
use crate::Repair;

impl Parser<'_> {
    /// Identifiers: literals (`true`, `True`, `undefined`, `NaN`), wrapper calls
    /// (`callback(…)`, `ObjectId("…")`), or the start of an unquoted string.
    pub(super) fn word(&mut self, ctx: Ctx) -> Result<Option<Value>, Fail> {
        let start = self.pos;
        let mut j = start;
        while j < self.end && self.b.get(j).is_some_and(|&c| lex::is_ident(c)) {
            j += 1;
        }
        let ident = self.src.get(start..j).unwrap_or_default();
        if !ident.is_empty() {
            let boundary = self.peek_at(j).is_none_or(|c| {
                lex::is_ws(c) || lex::is_delim(c) || matches!(c, b';' | b')') || quote_at(self.b, j).is_some()
            });
            if boundary && let Some(v) = self.literal(ident, ctx) {
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
            if self.peek_at(k) == Some(b'(')
                && let Some(inner) = self.wrapper(ident, k, ctx)?
            {
                return Ok(Some(inner));
            }
        }
        Ok(self.unquoted(ctx)?.map(|(text, _)| Value::String(text)))
    }

    /// The value inside a wrapper call whose `(` is at `open`: a MongoDB type
    /// (`ObjectId("…")`, `NumberLong(2)`), or a JSONP callback around a document
    /// (`callback({…})`, or `callback(2);` as the whole text). Other calls, such as code
    /// (`print('hi')`), are not wrappers; the parser is left where it was.
    fn wrapper(&mut self, name: &str, open: usize, ctx: Ctx) -> Result<Option<Value>, Fail> {
        const MONGO: [&str; 10] = [
            "ObjectId",
            "ISODate",
            "Date",
            "NumberLong",
            "NumberInt",
            "NumberDecimal",
            "NumberDouble",
            "Timestamp",
            "UUID",
            "BinData",
        ];
        let saved = (self.pos, self.repairs.len(), self.evidence);
        self.note(Repair::FunctionWrapper);
        self.pos = open + 1;
        self.parens += 1;
        let inner = self.value(Ctx::Top);
        self.parens -= 1;
        let inner = inner?.unwrap_or(Value::Null);
        self.skip_ws();
        let closed = self.peek() == Some(b')');
        if closed {
            self.pos += 1;
        }
        let mut semicolon = false;
        if closed && ctx == Ctx::Top {
            let (n, next) = self.next_significant(self.pos);
            if next == Some(b';') {
                self.pos = n + 1;
                semicolon = true;
            }
        }
        let document = matches!(inner, Value::Object(_) | Value::Array(_));
        if MONGO.contains(&name) || document || semicolon {
            return Ok(Some(inner));
        }
        (self.pos, self.evidence) = (saved.0, saved.2);
        self.repairs.truncate(saved.1);
        Ok(None)
    }

    /// The value of a literal word, noting any repair it needs. Other spellings (`TRUE`,
    /// `Null`) count only inside a document, where they cannot be a word of prose.
    pub(super) fn literal(&mut self, word: &str, ctx: Ctx) -> Option<Value> {
        let nested = ctx != Ctx::Top;
        let (value, repair) = match word {
            "true" => (Value::Bool(true), None),
            "false" => (Value::Bool(false), None),
            "null" => (Value::Null, None),
            "True" => (Value::Bool(true), Some(Repair::PythonLiteral)),
            "False" => (Value::Bool(false), Some(Repair::PythonLiteral)),
            "None" => (Value::Null, Some(Repair::PythonLiteral)),
            "TRUE" if nested => (Value::Bool(true), Some(Repair::PythonLiteral)),
            "FALSE" if nested => (Value::Bool(false), Some(Repair::PythonLiteral)),
            "NULL" | "Null" if nested => (Value::Null, Some(Repair::PythonLiteral)),
            "undefined" => (Value::Null, Some(Repair::Undefined)),
            "NaN" | "Infinity" => (Value::Null, Some(Repair::NonFiniteNumber)),
            _ => return None,
        };
        if let Some(repair) = repair {
            self.note(repair);
        }
        Some(value)
    }

    /// Text without quotes, up to where the context says it ends. Returns the trimmed text and
    /// whether a stray closing quote (`abc"`) was consumed, or `None` if there is no text.
    pub(super) fn unquoted(&mut self, ctx: Ctx) -> Result<Option<(String, bool)>, Fail> {
        let b = self.b;
        let start = self.pos;
        let mut i = start;
        let mut nest = 0usize;
        let mut closing = 0usize;
        while i < self.end {
            let c = b.get(i).copied().unwrap_or(0);
            match c {
                b'\n' | b'\r' => break,
                b',' => {
                    if ctx != Ctx::Value {
                        break;
                    }
                    // `{"a": one, two, three}` keeps going; `{a: one, b: two}` stops
                    let (n, next) = self.next_significant(i + 1);
                    // … unless the words run up to a quoted key: `{"a": x y, stray words "b": 1}`
                    let prose = next.is_some_and(|c| c.is_ascii_alphabetic())
                        && !member_at(b, n, self.end)
                        && self.words_then_key(n).is_none();
                    if !prose {
                        break;
                    }
                }
                b'}' | b']' | b')' => {
                    if nest == 0 {
                        break;
                    }
                    nest -= 1;
                }
                b'{' | b'[' | b'(' => nest += 1,
                b':' if ctx == Ctx::Key => break,
                b' ' | b'\t' if ctx == Ctx::Key && !self.words_then_colon(i) => break,
                b'/' if lex::comment_at(b, i).is_some() && !self.after_colon(i) => break,
                b'#' if lex::comment_at(b, i).is_some()
                    && i > start
                    && b.get(i - 1).is_some_and(|&p| lex::is_ws(p)) =>
                {
                    break;
                }
                _ => {
                    if let Some((q, len)) = quote_at(b, i)
                        && matches!(q, Quote::Double | Quote::DoubleLike)
                    {
                        if ctx == Ctx::Key || !lex::quoted_key_at(b, i, self.end) {
                            // `abc"`: the missing start quote's end quote
                            closing = len;
                        }
                        break;
                    }
                }
            }
            i += 1;
        }
        let text = self.src.get(start..i).unwrap_or_default().trim_end();
        if text.is_empty() {
            return Ok(None);
        }
        let text = text.to_string();
        self.pos = i + closing;
        self.note(if ctx == Ctx::Key { Repair::UnquotedKey } else { Repair::UnquotedString });
        if closing > 0 {
            self.note(Repair::MissingQuote);
        }
        Ok(Some((text, closing > 0)))
    }

    /// Whether words and spaces from `i` run up to a colon on this line: a bare key with
    /// spaces, as in `{first name: "Ada"}`.
    pub(super) fn words_then_colon(&self, i: usize) -> bool {
        let limit = self.end.min(i + 64);
        let mut j = i;
        while j < limit {
            match self.b.get(j) {
                Some(b':') => return true,
                Some(&c) if lex::is_ident(c) || c == b' ' || c == b'-' => j += 1,
                _ => return false,
            }
        }
        false
    }

    /// Where a quoted key (`"b":`) starts after words on the same line from `i`, with no
    /// structure between: the words are stray text before the next member.
    pub(super) fn words_then_key(&self, i: usize) -> Option<usize> {
        let limit = self.end.min(i + 256);
        let mut j = i;
        while j < limit {
            if quote_at(self.b, j).is_some() {
                return lex::quoted_key_at(self.b, j, self.end).then_some(j);
            }
            match self.b.get(j) {
                Some(b'\n' | b'{' | b'}' | b'[' | b']' | b',' | b':') | None => return None,
                Some(_) => j += 1,
            }
        }
        None
    }

    /// A JavaScript regular expression literal `/…/flags`, kept as a string.
    pub(super) fn regex(&mut self, ctx: Ctx) -> Result<Option<Value>, Fail> {
        let start = self.pos;
        let mut i = start + 1;
        let mut closed = false;
        while i < self.end {
            match self.b.get(i) {
                Some(b'\\') => i += 2,
                Some(b'/') => {
                    closed = i > start + 1;
                    break;
                }
                Some(b'\n') | None => break,
                Some(_) => i += 1,
            }
        }
        if !closed {
            return Ok(self.unquoted(ctx)?.map(|(text, _)| Value::String(text)));
        }
        i += 1;
        while self.peek_at(i).is_some_and(|c| c.is_ascii_alphabetic()) {
            i += 1;
        }
        let text = self.src.get(start..i).unwrap_or_default().to_string();
        self.pos = i;
        self.evidence += 1;
        self.note(Repair::RegexLiteral);
        Ok(Some(Value::String(text)))
    }
}
