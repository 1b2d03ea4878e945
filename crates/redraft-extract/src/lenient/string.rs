//! Quoted strings (deciding which quote really ends a string), unquoted text, and
//! regular-expression literals.
//!
//! A quote is trusted as the end of a string only when a delimiter, another value or the end
//! of the text follows it. Otherwise it is an unescaped quote inside the string — unless what
//! precedes it says the real end quote was lost, in which case the string is read once more,
//! stopping at the first delimiter (or at the comma the end quote belonged before).

use serde_json::Value;

use super::lex::{self, Quote, member_at, quote_at};
use super::{Ctx, Fail, Parser};
use crate::Repair;

/// How a reading of a quoted string decides where it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// At a closing quote followed by a delimiter (the first reading).
    Quote,
    /// At the first closing quote or delimiter: the end quote is missing.
    Delim,
    /// At this byte offset: the end quote belonged before a comma there.
    At(usize),
}

/// Outcome of one reading of a quoted string.
enum Scan {
    Done(String),
    /// Read again with this rule; the first reading covered this many bytes.
    Retry(Stop, usize),
}

impl Parser<'_> {
    /// A quoted string, joined with any `+ "…"` concatenated after it.
    pub(super) fn string_value(&mut self, ctx: Ctx) -> Result<Value, Fail> {
        let mut text = self.quoted(ctx)?;
        self.evidence += 1;
        loop {
            let (n, c) = self.next_significant(self.pos);
            if c != Some(b'+') {
                break;
            }
            let (m, _) = self.next_significant(n + 1);
            if m >= self.end || quote_at(self.b, m).is_none() {
                break;
            }
            self.note(Repair::Concatenation);
            self.pos = m;
            let more = self.quoted(ctx)?;
            text.push_str(&more);
        }
        Ok(Value::String(text))
    }

    /// A quoted string starting at the current position.
    pub(super) fn quoted(&mut self, ctx: Ctx) -> Result<String, Fail> {
        let start = self.pos;
        let mark = self.repairs.len();
        let first = if self.reread_budget == 0 { Stop::Delim } else { Stop::Quote };
        match self.scan(start, ctx, first)? {
            Scan::Done(text) => Ok(text),
            Scan::Retry(stop, read) => {
                self.reread_budget = self.reread_budget.saturating_sub(read);
                self.repairs.truncate(mark);
                match self.scan(start, ctx, stop)? {
                    Scan::Done(text) => Ok(text),
                    Scan::Retry(..) => Err(self.fail("a closing quote")),
                }
            }
        }
    }

    fn push_seg(&self, out: &mut String, from: usize, to: usize) {
        if let Some(s) = self.src.get(from..to) {
            out.push_str(s);
        }
    }

    fn scan(&mut self, start: usize, ctx: Ctx, stop: Stop) -> Result<Scan, Fail> {
        let b = self.b;
        let Some((open, qlen)) = quote_at(b, start) else {
            return Err(self.fail("a string"));
        };
        match open {
            Quote::Double => {}
            Quote::Single => self.note(Repair::SingleQuotes),
            Quote::DoubleLike | Quote::SingleLike => self.note(Repair::SmartQuotes),
        }
        let mut i = start + qlen;
        if stop == Stop::Quote
            && let Some((q, l)) = quote_at(b, i)
            && open.closed_by(q)
            && self.next_significant(i + l).1.is_some_and(|c| c.is_ascii_alphanumeric())
        {
            // `""value"`: a doubled opening quote
            self.note(Repair::UnescapedQuote);
            i += l;
        }
        let mut out = String::new();
        let mut seg = i;
        loop {
            if i >= self.end {
                self.push_seg(&mut out, seg, self.end);
                let lost_end = lex::prev_significant(b, self.end)
                    .is_some_and(|(j, c)| j >= start + qlen && lex::is_delim(c));
                if stop == Stop::Quote && lost_end {
                    // `["hello]`: the end quote belongs before the delimiter
                    return Ok(Scan::Retry(Stop::Delim, self.end - start));
                }
                trim_end(&mut out);
                self.note(Repair::TruncatedTail);
                self.pos = self.end;
                return Ok(Scan::Done(out));
            }
            if let Stop::At(k) = stop
                && i >= k
            {
                self.push_seg(&mut out, seg, i);
                trim_end(&mut out);
                self.note(Repair::MissingQuote);
                self.pos = i;
                return Ok(Scan::Done(out));
            }
            let c = b.get(i).copied().unwrap_or(0);
            if let Some((q, ql)) = quote_at(b, i)
                && open.closed_by(q)
            {
                self.push_seg(&mut out, seg, i);
                let after = i + ql;
                if stop != Stop::Quote {
                    self.pos = after;
                    return Ok(Scan::Done(out));
                }
                if let Some((q2, l2)) = quote_at(b, after)
                    && q2 == q
                    && self.peek_at(after + l2).is_some_and(|c| c.is_ascii_alphanumeric())
                {
                    // `'it''s'`: a doubled quote stands for one
                    self.note(Repair::UnescapedQuote);
                    self.push_seg(&mut out, i, after);
                    i = after + l2;
                    seg = i;
                    continue;
                }
                let (n, next) = self.next_significant(after);
                let trusted = next.is_none_or(|c| lex::is_delim(c) || c.is_ascii_digit())
                    || quote_at(b, n).is_some();
                if trusted || (ctx == Ctx::Key && n > after) {
                    self.pos = after;
                    return Ok(Scan::Done(out));
                }
                match lex::prev_significant(b, i) {
                    Some((comma, b',')) => {
                        let starts_next = match ctx {
                            Ctx::Array => lex::item_at(b, i, self.end),
                            Ctx::Top => {
                                lex::item_at(b, i, self.end) || lex::quoted_key_at(b, i, self.end)
                            }
                            Ctx::Value | Ctx::Key => lex::quoted_key_at(b, i, self.end),
                        };
                        if starts_next {
                            // `{"a": "b, "c": 1}`: the end quote belonged before the comma
                            return Ok(Scan::Retry(Stop::At(comma), i - start));
                        }
                    }
                    Some((_, p)) if lex::is_delim(p) => {
                        return Ok(Scan::Retry(Stop::Delim, i - start));
                    }
                    _ => {}
                }
                self.note(Repair::UnescapedQuote);
                self.push_seg(&mut out, i, after);
                i = after;
                seg = i;
                continue;
            }
            if stop == Stop::Delim && self.stops_string(i, c, ctx) {
                self.push_seg(&mut out, seg, i);
                trim_end(&mut out);
                self.note(Repair::MissingQuote);
                self.pos = i;
                return Ok(Scan::Done(out));
            }
            match c {
                b'\\' => {
                    self.push_seg(&mut out, seg, i);
                    i = self.escape(i, &mut out)?;
                    seg = i;
                }
                b'\n' | b'\r' | b'\t' | 0x08 | 0x0C => {
                    self.note(Repair::ControlCharacter);
                    i += 1;
                }
                0x00..=0x1F => {
                    self.pos = i;
                    return Err(self.fail("no raw control characters in a string"));
                }
                _ => i += 1,
            }
        }
    }

    /// Whether byte `c` at `i` ends a string whose end quote is missing.
    fn stops_string(&self, i: usize, c: u8, ctx: Ctx) -> bool {
        match c {
            b',' => {
                if ctx != Ctx::Value {
                    return true;
                }
                // inside an object value a comma ends the string only before another member
                let (n, next) = self.next_significant(i + 1);
                next.is_none_or(|c| c == b'}') || member_at(self.b, n, self.end)
            }
            b'[' | b']' | b'{' | b'}' | b'\n' | b'+' => true,
            b':' => ctx == Ctx::Key,
            b'/' => lex::comment_at(self.b, i).is_some() && !self.after_colon(i),
            _ => false,
        }
    }

    /// Whether the byte before `i` is a colon, as in the `://` of a URL.
    fn after_colon(&self, i: usize) -> bool {
        i > 0 && self.b.get(i - 1) == Some(&b':')
    }

    /// Decode the escape sequence at `i` (a backslash) into `out`; returns the next offset.
    fn escape(&mut self, i: usize, out: &mut String) -> Result<usize, Fail> {
        let Some(n) = self.peek_at(i + 1) else {
            // a lone backslash cut off by the end of the text
            self.note(Repair::TruncatedTail);
            return Ok(self.end);
        };
        let c = match n {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(i, out),
            _ => {
                // not a JSON escape (`\'`, `\a`): keep the character, drop the backslash
                self.note(Repair::InvalidEscape);
                let c = self.src.get(i + 1..).and_then(|s| s.chars().next()).unwrap_or('\\');
                out.push(c);
                return Ok(i + 1 + c.len_utf8());
            }
        };
        out.push(c);
        Ok(i + 2)
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        if at + 4 > self.end {
            return None;
        }
        let digits = self.b.get(at..at + 4)?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    }

    fn unicode_escape(&mut self, i: usize, out: &mut String) -> Result<usize, Fail> {
        let Some(code) = self.hex4(i + 2) else {
            let mut j = i + 2;
            while j < self.end && self.b.get(j).is_some_and(u8::is_ascii_hexdigit) {
                j += 1;
            }
            if j >= self.end {
                // `\u26` cut off by the end of the text: drop it
                self.note(Repair::TruncatedTail);
                return Ok(self.end);
            }
            self.pos = i;
            return Err(self.fail("four hex digits after \\u"));
        };
        if (0xD800..0xDC00).contains(&code)
            && self.b.get(i + 6) == Some(&b'\\')
            && self.b.get(i + 7) == Some(&b'u')
            && let Some(low) = self.hex4(i + 8)
            && (0xDC00..0xE000).contains(&low)
        {
            let c = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            out.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
            return Ok(i + 12);
        }
        match char::from_u32(code) {
            Some(c) => out.push(c),
            None => {
                // a lone surrogate
                self.note(Repair::InvalidEscape);
                out.push(char::REPLACEMENT_CHARACTER);
            }
        }
        Ok(i + 6)
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
                    let prose = next.is_some_and(|c| c.is_ascii_alphabetic()) && !member_at(b, n, self.end);
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
    fn words_then_colon(&self, i: usize) -> bool {
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

/// Drop trailing whitespace, as left before a missing end quote.
fn trim_end(out: &mut String) {
    let len = out.trim_end().len();
    out.truncate(len);
}
