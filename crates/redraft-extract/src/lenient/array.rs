//! Arrays and Python tuples: items, stray and mismatched closing brackets, `...` placeholders.

use serde_json::Value;

use super::lex::member_at;
use super::{Ctx, Fail, Parser};
use crate::Repair;

impl Parser<'_> {
    pub(super) fn array(&mut self) -> Result<Value, Fail> {
        self.enter()?;
        self.pos += 1;
        let items = self.items(b']', Vec::new());
        self.depth -= 1;
        items.map(|(items, _, _)| Value::Array(items))
    }

    /// A Python tuple `(1, 2)` becomes an array; `(x)` is just `x`.
    pub(super) fn tuple(&mut self) -> Result<Value, Fail> {
        self.enter()?;
        self.pos += 1;
        self.parens += 1;
        let items = self.items(b')', Vec::new());
        self.parens -= 1;
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
    pub(super) fn items(&mut self, close: u8, mut items: Vec<Value>) -> Result<(Vec<Value>, bool, bool), Fail> {
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
                        if items.last().is_some_and(Value::is_object) {
                            // `[{"a": 1}}, {"a": 2}]`: a stray `}`
                            self.pos += 1;
                            continue;
                        }
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
            if let Some(after_comma) = self.ellipsis() {
                comma = after_comma;
                continue;
            }
            if !first && !comma {
                self.note(Repair::MissingComma);
            }
            let item_start = self.pos;
            let Some(item) = self.value(Ctx::Array)? else {
                return Err(self.fail("an array item"));
            };
            if self.pos >= self.end
                && item.as_str() == Some("")
                && self.src.get(item_start..self.end).is_some_and(|t| t.trim().chars().count() == 1)
            {
                // `["`: a string cut off before it held anything
                return Ok((items, saw_comma, false));
            }
            let item = match item {
                Value::String(key) if self.next_significant(self.pos).1 == Some(b':') => self.implicit_object(key)?,
                other => other,
            };
            items.push(item);
            first = false;
            comma = false;
        }
    }

    /// Skip a `...` placeholder (and a comma after it) inside an array or object; returns
    /// whether a comma was skipped.
    pub(super) fn ellipsis(&mut self) -> Option<bool> {
        let rest = self.b.get(self.pos..self.end).unwrap_or_default();
        let len = if rest.starts_with(b"...") {
            3
        } else if rest.starts_with("…".as_bytes()) {
            "…".len()
        } else {
            return None;
        };
        self.pos += len;
        self.note(Repair::Ellipsis);
        self.skip_ws();
        let comma = self.peek() == Some(b',');
        if comma {
            self.pos += 1;
        }
        Some(comma)
    }
}
