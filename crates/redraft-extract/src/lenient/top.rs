//! The top level of a document: a trailing comma, an object closed too early
//! (`{"a": 1}, "b": 2}`), or several values in a row (NDJSON, `1, 2, 3`).

use serde_json::Value;

use super::lex::{member_at, quote_at};
use super::{Ctx, Fail, Parser, combine};
use crate::Repair;

impl Parser<'_> {
    /// After the first top-level value: a trailing comma, an object closed too early
    /// (`{"a": 1}, "b": 2}`), or several values in a row (NDJSON, `1, 2, 3`).
    pub(super) fn top_sequence(&mut self, first: Value) -> Result<Value, Fail> {
        let (mut n, mut c) = self.next_significant(self.pos);
        let comma_at = n;
        let comma = c == Some(b',');
        if comma {
            (n, c) = self.next_significant(n + 1);
        }
        let Some(c) = c else {
            if comma {
                self.note(Repair::TrailingComma);
                self.pos = n;
            }
            return Ok(first);
        };
        if let Value::Object(map) = &first
            && comma
            && (member_at(self.b, n, self.end) || self.key_then_string(n))
        {
            // kept only if the members run up to a closing `}`
            let saved = (self.pos, self.repairs.len(), self.evidence);
            self.note(Repair::MismatchedBracket);
            self.pos = comma_at;
            if let Ok(merged) = self.object_body(map.clone())
                && self.pos > 0
                && self.b.get(self.pos - 1) == Some(&b'}')
            {
                return Ok(merged);
            }
            (self.pos, self.evidence) = (saved.0, saved.2);
            self.repairs.truncate(saved.1);
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
                // a later value must hold JSON-only tokens: `{…} [citation needed]` is prose
                Ok(Some(v)) if self.evidence > before || empty_container(&v) => items.push(v),
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
    pub(super) fn key_then_string(&self, i: usize) -> bool {
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
}

/// Whether `v` is `{}` or `[]`.
fn empty_container(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}
