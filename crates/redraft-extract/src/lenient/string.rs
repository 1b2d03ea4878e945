//! Quoted strings: quotes of every kind, escapes (decoded in `escape`), and reading a damaged
//! string again.
//!
//! A quote is trusted as the end of a string only when what follows says so (see `closing`).
//! Otherwise it is an unescaped quote inside the string — unless what precedes it says the
//! real end quote was lost, in which case the string is read once more, stopping at the first
//! delimiter (or at the comma the end quote belonged before). A string is read at most twice,
//! and a budget for the whole text caps the re-reading.

use serde_json::Value;

use super::lex::{self, Quote, member_at, quote_at};
use super::opens::Opens;
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
    /// At the first delimiter, keeping quotes as text: the text ended without an end quote.
    Lost,
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
        if ctx == Ctx::Value
            && let Some(value) = self.fenced_value()
        {
            self.evidence += 1;
            return Ok(value);
        }
        let mut text = self.quoted(ctx)?;
        self.evidence += 1;
        loop {
            let (n, c) = self.next_significant(self.pos);
            if c != Some(b'+') {
                break;
            }
            let (m, _) = self.next_significant(n + 1);
            if m >= self.end || quote_at(self.b, m).is_none() {
                // `"hello" +` with nothing to join: drop the `+`
                self.note(Repair::Concatenation);
                self.pos = n + 1;
                break;
            }
            self.note(Repair::Concatenation);
            self.pos = m;
            let more = self.quoted(ctx)?;
            text.push_str(&more);
        }
        Ok(Value::String(text))
    }

    /// A string that holds only a fenced JSON block whose quotes were not escaped,
    /// `"```json {"a": 1}```"`: the block's value. The block must be valid JSON with a quote in
    /// it (so the string could not have been read as text) and the end quote must follow the
    /// closing fence.
    fn fenced_value(&mut self) -> Option<Value> {
        const OPEN: &[u8] = b"```json";
        let (quote, qlen) = quote_at(self.b, self.pos)?;
        let from = self.pos + qlen + OPEN.len();
        if self.b.get(self.pos + qlen..from) != Some(OPEN) {
            return None;
        }
        let rest = self.b.get(from..self.end)?;
        let close = from + rest.windows(3).position(|w| w == b"```")?;
        let content = self.src.get(from..close)?;
        if !content.contains('"') {
            return None;
        }
        let value: Value = serde_json::from_str(content).ok()?;
        let (at, _) = self.next_significant(close + 3);
        let (end_quote, len) = quote_at(self.b, at)?;
        if !quote.closed_by(end_quote) || !self.end_trusted(at + len, Ctx::Value, Opens::new(quote)) {
            return None;
        }
        self.note(Repair::FencedString);
        self.pos = at + len;
        Some(value)
    }

    /// A quoted string starting at the current position.
    pub(super) fn quoted(&mut self, ctx: Ctx) -> Result<String, Fail> {
        let start = self.pos;
        let mark = self.repairs.len();
        self.string_cut = false;
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
        let mut doubled = false;
        if stop == Stop::Quote
            && let Some((q, l)) = quote_at(b, i)
            && open.closed_by(q)
            && self.next_significant(i + l).1.is_some_and(|c| c.is_ascii_alphanumeric())
        {
            // `""value""`: doubled quotes around the text
            self.note(Repair::UnescapedQuote);
            i += l;
            doubled = true;
        }
        let mut out = String::new();
        let mut seg = i;
        // `out[raw_from..]` was copied from the source without escapes
        let mut raw_from = 0;
        let mut opens = Opens::new(open);
        // quotes judged to sit inside the text
        let mut inner = 0usize;
        // where the last of them was: lengths of `out` and of the repairs before it, and the
        // offset after it
        let mut last_inner = (0usize, 0usize, 0usize);
        loop {
            if i >= self.end {
                if stop == Stop::Quote && ctx == Ctx::Value && inner % 2 == 1 {
                    // `"a": "x" tail` at the end of the text: the unpaired quote was the end
                    // quote, and what follows it is stray text
                    let (out_len, repairs_len, after) = last_inner;
                    out.truncate(out_len);
                    finish(&mut out, raw_from.min(out_len));
                    self.repairs.truncate(repairs_len);
                    self.note(Repair::StrayText);
                    self.pos = after;
                    return Ok(Scan::Done(out));
                }
                self.push_seg(&mut out, seg, self.end);
                let lost_end = lex::prev_significant(b, self.end)
                    .is_some_and(|(j, c)| j >= start + qlen && lex::is_delim(c) && opens.outside(c));
                if stop == Stop::Quote && lost_end {
                    // `["hello]`: the end quote belongs before the delimiter; quotes met on the
                    // way stay text if they pair up (`"a "b" c}`), else the first one ends it
                    let retry = if inner.is_multiple_of(2) { Stop::Lost } else { Stop::Delim };
                    return Ok(Scan::Retry(retry, self.end - start));
                }
                trim_end(&mut out);
                self.note(Repair::TruncatedTail);
                self.string_cut = true;
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
                let after = i + ql;
                match stop {
                    Stop::Delim => {
                        self.push_seg(&mut out, seg, i);
                        self.pos = after;
                        return Ok(Scan::Done(out));
                    }
                    Stop::Lost | Stop::At(_) => {
                        // quotes already judged to sit inside the text stay text
                        self.note(Repair::UnescapedQuote);
                        i = after;
                        continue;
                    }
                    Stop::Quote => {}
                }
                self.push_seg(&mut out, seg, i);
                if let Some((q2, l2)) = quote_at(b, after)
                    && q2 == q
                {
                    let after2 = after + l2;
                    if matches!(q, Quote::Single | Quote::SingleLike)
                        && self.peek_at(after2).is_some_and(|c| c.is_ascii_alphanumeric())
                    {
                        // `'it''s'`: a doubled quote stands for one
                        self.note(Repair::UnescapedQuote);
                        self.push_seg(&mut out, i, after);
                        i = after2;
                        seg = i;
                        continue;
                    }
                    if self.end_trusted(after2, ctx, opens) {
                        // `"72""`: a quote, then the end quote (or `""word""` closing)
                        self.note(Repair::UnescapedQuote);
                        if !doubled {
                            self.push_seg(&mut out, i, after);
                        }
                        finish(&mut out, raw_from);
                        self.pos = after2;
                        return Ok(Scan::Done(out));
                    }
                }
                if ctx == Ctx::Value && opens.code && self.lone_quote_line(after, open) {
                    // a code snippet ending in a quote: `"```{}```\n"\n",`, where the end quote
                    // stands alone on the next line
                    inner += 1;
                    last_inner = (out.len(), self.repairs.len(), after);
                    self.note(Repair::UnescapedQuote);
                    self.push_seg(&mut out, i, after);
                    i = after;
                    seg = i;
                    continue;
                }
                let key_gap = ctx == Ctx::Key && self.next_significant(after).0 > after;
                let next_item = ctx == Ctx::Array && inner == 0 && self.unopened_item_at(after);
                if key_gap || next_item || self.end_trusted(after, ctx, opens) {
                    finish(&mut out, raw_from);
                    self.pos = after;
                    return Ok(Scan::Done(out));
                }
                match lex::prev_significant(b, i) {
                    Some((comma, b',')) => {
                        let starts_next = match ctx {
                            Ctx::Array => lex::item_at(b, i, self.end),
                            Ctx::Top => lex::item_at(b, i, self.end) || lex::quoted_key_at(b, i, self.end),
                            Ctx::Value | Ctx::Key => lex::quoted_key_at(b, i, self.end),
                        };
                        if starts_next {
                            // `{"a": "b, "c": 1}`: the end quote belonged before the comma
                            return Ok(Scan::Retry(Stop::At(comma), i - start));
                        }
                    }
                    // inside a `{…}` or `[…]` the string holds itself, delimiters are its text;
                    // so is a code snippet, and a `}` in an object value (`"x} "y" z}`)
                    Some((_, p))
                        if lex::is_delim(p) && !opens.unclosed() && !opens.code && (p != b'}' || ctx != Ctx::Value) =>
                    {
                        return Ok(Scan::Retry(Stop::Delim, i - start));
                    }
                    _ => {}
                }
                inner += 1;
                last_inner = (out.len(), self.repairs.len(), after);
                self.note(Repair::UnescapedQuote);
                self.push_seg(&mut out, i, after);
                i = after;
                seg = i;
                continue;
            }
            // read again after the text ended without an end quote, the string's own brackets
            // are text (`["a [1, 2] b]`)
            let own = stop == Stop::Lost && opens.holds(c);
            if matches!(stop, Stop::Delim | Stop::Lost) && !own && self.stops_string(i, c, ctx) {
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
                    raw_from = out.len();
                }
                b'\n' | b'\r' | b'\t' | 0x08 | 0x0C => {
                    self.note(Repair::ControlCharacter);
                    i += 1;
                }
                0x00..=0x1F => {
                    self.pos = i;
                    return Err(self.fail("no raw control characters in a string"));
                }
                _ => {
                    opens.track(c);
                    opens.code |= c == b'`' && b.get(i..i + 3) == Some(b"```");
                    i += 1;
                }
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
            // inside an object value a `}` ends the string only before more structure
            b'}' if ctx == Ctx::Value => {
                let (n, next) = self.next_significant(i + 1);
                matches!(next, None | Some(b',' | b'}' | b']')) || member_at(self.b, n, self.end)
            }
            b'[' | b']' | b'{' | b'}' | b'\n' | b'+' => true,
            b':' => ctx == Ctx::Key,
            b'/' => lex::comment_at(self.b, i).is_some() && !self.after_colon(i),
            _ => false,
        }
    }

    /// Whether the byte before `i` is a colon, as in the `://` of a URL.
    pub(super) fn after_colon(&self, i: usize) -> bool {
        i > 0 && self.b.get(i - 1) == Some(&b':')
    }
}

/// Drop raw trailing whitespace that holds a line break (`"text\n"` laid out over lines).
fn finish(out: &mut String, raw_from: usize) {
    let tail = out.get(raw_from..).unwrap_or_default();
    let kept = tail.trim_end_matches([' ', '\t', '\n', '\r']).len();
    if tail.get(kept..).is_some_and(|gap| gap.contains('\n')) {
        out.truncate(raw_from + kept);
    }
}

/// Drop trailing whitespace, as left before a missing end quote.
fn trim_end(out: &mut String) {
    let len = out.trim_end().len();
    out.truncate(len);
}
