//! Objects: members, keys, and the repairs around them (missing colons and commas, stray
//! words and quotes, dangling keys, Python sets, objects that lost their braces).

use serde_json::{Map, Value};

use super::lex::{self, member_at, quote_at};
use super::{Ctx, Fail, Parser};
use crate::Repair;

impl Parser<'_> {
    pub(super) fn object(&mut self) -> Result<Value, Fail> {
        self.enter()?;
        self.pos += 1;
        let value = self.object_body(Map::new());
        self.depth -= 1;
        value
    }

    /// Members of an object whose `{` was already read, added to `map`.
    pub(super) fn object_body(&mut self, mut map: Map<String, Value>) -> Result<Value, Fail> {
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
                    // `"a": ["x"], ["y"]`: a second array continuing the previous member's, or
                    // more rows of a table whose `]` came too early
                    if let Some(key) = &last_key
                        && map.get(key).is_some_and(Value::is_array)
                        && let Value::Array(more) = self.array()?
                        && let Some(Value::Array(prev)) = map.get_mut(key)
                    {
                        continue_rows(prev, more);
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
            if let Some(after_comma) = self.ellipsis() {
                comma = after_comma;
                continue;
            }
            if self.stray_quote_line() {
                continue;
            }
            let (mark, key_start) = (self.repairs.len(), self.pos);
            if !first && !comma {
                self.note(Repair::MissingComma);
            }
            let quoted =
                quote_at(self.b, self.pos).is_some() || (c == b'\\' && quote_at(self.b, self.pos + 1).is_some());
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
                    // the text ended before the key's colon: the key is dropped, whether it was
                    // cut off part-way (`{"id": 2, "na`) or whole (`{"id": 2, "name"`), since
                    // nothing says a value was meant for it (after a colon, `null` is used)
                    self.repairs.truncate(mark);
                    self.note(Repair::TruncatedTail);
                    break;
                }
                Some(b',') if quoted && first => return self.set_literal(key),
                Some(b'}' | b']' | b')') if !quoted => {
                    // a stray word before the end: `{"a": "x" AAAA }`
                    self.note(Repair::StrayText);
                    continue;
                }
                Some(b'}' | b']' | b')' | b',') => return Err(self.fail("a value for the key")),
                Some(c) => {
                    if !quoted && let Some(next_key) = self.words_then_key(self.pos) {
                        // stray words before the next member: `{"a": 1, more words "b": 2}`
                        self.note(Repair::StrayText);
                        self.pos = next_key;
                        comma = true;
                        continue;
                    }
                    if !quoted && member_at(self.b, self.pos, self.end) {
                        // a stray word before the next member: `{"a": 1, COMMENT "b": 2}`
                        self.note(Repair::StrayText);
                        comma = true;
                        continue;
                    }
                    if !quoted && c.is_ascii_alphabetic() && self.is_prose_word(self.pos) {
                        // words after the last member, `{"ok": true and more`: the object
                        // was never closed and prose follows
                        self.repairs.truncate(mark);
                        self.pos = key_start;
                        self.note(Repair::MismatchedBracket);
                        break;
                    }
                    self.note(Repair::MissingColon);
                }
            }
            self.skip_ws();
            let value = match self.peek() {
                None => {
                    // `{"a":` cut off before the value
                    self.note(Repair::TruncatedTail);
                    self.note(Repair::MissingValue);
                    map.insert(key, Value::Null);
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
    pub(super) fn key(&mut self) -> Result<Option<String>, Fail> {
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
    pub(super) fn set_literal(&mut self, first: String) -> Result<Value, Fail> {
        let (mut items, _, closed) = self.items(b'}', vec![Value::String(first)])?;
        if !closed {
            return Err(self.fail("a closing `}`"));
        }
        self.note(Repair::SetLiteral);
        items.shrink_to_fit();
        Ok(Value::Array(items))
    }

    /// `["key": "value"]`: a member inside an array opens an object that lost its `{`.
    pub(super) fn implicit_object(&mut self, key: String) -> Result<Value, Fail> {
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

    /// Whether a plain word (not a literal) starts at `i`.
    pub(super) fn is_prose_word(&self, i: usize) -> bool {
        let mut j = i;
        while self.peek_at(j).is_some_and(lex::is_ident) {
            j += 1;
        }
        let word = self.src.get(i..j).unwrap_or_default();
        !word.is_empty()
            && !matches!(word, "true" | "false" | "null" | "True" | "False" | "None" | "undefined" | "NaN" | "Infinity")
    }

    /// Skip a quote standing alone where a key belongs, with only `,` or closers after it on
    /// its line (`"hello\n"\n",`).
    pub(super) fn stray_quote_line(&mut self) -> bool {
        if self.peek() != Some(b'"') {
            return false;
        }
        let mut j = self.pos + 1;
        while let Some(c) = self.peek_at(j) {
            match c {
                b'\n' => break,
                b' ' | b'\t' | b'\r' | b',' | b'}' | b']' => j += 1,
                _ => return false,
            }
        }
        self.note(Repair::StrayText);
        self.pos += 1;
        true
    }
}

/// Add the items of `more`, an array found where a key belongs, to `prev`, the array before
/// it. In a table of rows of one length, bare items at the end of `prev` are rows that lost
/// their brackets (`[["a", "b"], "c", "d"], ["e", "f"]`) and are grouped again.
fn continue_rows(prev: &mut Vec<Value>, more: Vec<Value>) {
    let mut lengths = prev.iter().filter_map(Value::as_array).map(Vec::len);
    let row_len = lengths.next().filter(|&n| n > 0 && lengths.all(|m| m == n));
    let Some(row_len) = row_len else {
        match <[Value; 1]>::try_from(more) {
            Ok([Value::Array(inner)]) => prev.extend(inner),
            Ok([other]) => prev.push(other),
            Err(more) => prev.extend(more),
        }
        return;
    };
    let bare = prev.iter().rev().take_while(|v| !v.is_array()).count();
    if bare > 0 && bare % row_len == 0 {
        let tail = prev.split_off(prev.len() - bare);
        let mut tail = tail.into_iter();
        loop {
            let row: Vec<Value> = tail.by_ref().take(row_len).collect();
            if row.is_empty() {
                break;
            }
            prev.push(Value::Array(row));
        }
    }
    if more.iter().all(Value::is_array) {
        prev.extend(more);
    } else {
        prev.push(Value::Array(more));
    }
}
