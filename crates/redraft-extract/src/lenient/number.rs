//! Numbers: the token is normalised (`.5` → `0.5`, `2.` → `2.0`, `1_000` → `1000`) and then
//! converted by `serde_json`, so valid numbers get exactly the value strict parsing gives.
//! Tokens that only start like a number (`1.1.1`, `10-20`, a UUID) become strings.

use serde_json::Value;

use super::lex;
use super::{Ctx, Fail, Parser};
use crate::Repair;

impl Parser<'_> {
    /// A number, `-Infinity`, or a number-like token kept as a string.
    pub(super) fn number(&mut self, ctx: Ctx) -> Result<Option<Value>, Fail> {
        let start = self.pos;
        let mut i = start;
        let mut norm = String::new();
        let mut fixed = false;
        match self.peek_at(i) {
            Some(b'+') => {
                i += 1;
                fixed = true;
            }
            Some(b'-') => {
                i += 1;
                norm.push('-');
            }
            _ => {}
        }
        if self.src.get(i..self.end).is_some_and(|rest| rest.starts_with("Infinity"))
            && self.peek_at(i + 8).is_none_or(|c| !lex::is_ident(c))
        {
            self.pos = i + 8;
            self.note(Repair::NonFiniteNumber);
            self.evidence += 1;
            return Ok(Some(Value::Null));
        }
        let digits_at = i;
        let int = self.digits(&mut i, &mut norm, &mut fixed);
        let mut dot = false;
        let mut frac = 0;
        if self.peek_at(i) == Some(b'.') && self.peek_at(i + 1) != Some(b'.') {
            dot = true;
            i += 1;
            if int == 0 {
                norm.push('0');
            }
            norm.push('.');
            frac = self.digits(&mut i, &mut norm, &mut fixed);
            if frac == 0 {
                norm.push('0');
            }
            fixed |= int == 0 || frac == 0;
        }
        if int + frac > 0 && matches!(self.peek_at(i), Some(b'e' | b'E')) {
            i += 1;
            norm.push('e');
            if let Some(sign @ (b'+' | b'-')) = self.peek_at(i) {
                norm.push(char::from(sign));
                i += 1;
            }
            if self.digits(&mut i, &mut norm, &mut fixed) == 0 {
                // `2e` cut short
                norm.push('0');
                fixed = true;
            }
        }
        let token_end = i;
        if !self.number_end(i, ctx) {
            if int + frac > 0 && self.peek_at(i) == Some(b'"') && self.number_end(i + 1, ctx) {
                // `12345",`: a stray closing quote after a number
                self.note(Repair::MissingQuote);
                i += 1;
            } else {
                return Ok(self.unquoted(ctx)?.map(|(text, _)| Value::String(text)));
            }
        }
        let raw = self.src.get(start..token_end).unwrap_or_default();
        if int >= 2 && self.b.get(digits_at) == Some(&b'0') {
            // leading zeros may carry meaning (`0789`): keep the text
            self.note(Repair::NumberFormat);
            self.evidence += 1;
            self.pos = i;
            return Ok(Some(Value::String(raw.to_string())));
        }
        if int + frac == 0 {
            // a lone `-` or `.`
            norm = if dot { "0.0" } else { "0" }.to_string();
            fixed = true;
        }
        match serde_json::from_str::<Value>(&norm) {
            Ok(value @ Value::Number(_)) => {
                if fixed {
                    self.note(Repair::NumberFormat);
                }
                self.evidence += 1;
                self.pos = i;
                Ok(Some(value))
            }
            _ => {
                // out of range: keep the text
                self.pos = i;
                self.note(Repair::NumberFormat);
                Ok(Some(Value::String(raw.to_string())))
            }
        }
    }

    /// Digits (with `_` separators between them) from `*i`, appended to `out`; returns how many.
    fn digits(&self, i: &mut usize, out: &mut String, fixed: &mut bool) -> usize {
        let mut n = 0;
        while let Some(c) = self.peek_at(*i) {
            if c.is_ascii_digit() {
                out.push(char::from(c));
                n += 1;
                *i += 1;
            } else if c == b'_' && n > 0 && self.peek_at(*i + 1).is_some_and(|d| d.is_ascii_digit()) {
                *fixed = true;
                *i += 1;
            } else {
                break;
            }
        }
        n
    }

    /// Whether a number may end before byte `i`.
    fn number_end(&self, i: usize, ctx: Ctx) -> bool {
        let Some(c) = self.peek_at(i) else {
            return true;
        };
        lex::is_ws(c)
            || matches!(c, b',' | b']' | b'}' | b')' | b'{' | b'[')
            || (c == b':' && ctx == Ctx::Key)
            || ((c == b'/' || c == b'#') && lex::comment_at(self.b, i).is_some())
            || lex::odd_space_len(self.b, i) > 0
    }
}
