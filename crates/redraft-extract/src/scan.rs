//! The balanced scanner: bracketed spans in prose that may hold a JSON value.
//!
//! The scanner tracks double-quoted strings and escapes, so brackets inside strings do not
//! count. A span that balances but does not parse is skipped whole (values nested in it are
//! fragments of a damaged document, not answers); a span that never balances ends the search,
//! since everything after it lies inside it. Both become starting points for repair.

use std::ops::Range;

use serde_json::Value;

use crate::lenient::{combine, skip_trivia};

/// How many bracketed spans are tried before giving up, to bound the work on long prose.
const MAX_SPANS: usize = 32;

/// What the scan found in the text.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Scan {
    /// The first span that parses strictly.
    pub(crate) found: Option<(Value, Range<usize>)>,
    /// Starts of spans that did not parse, in order: where repair should begin.
    pub(crate) damaged: Vec<usize>,
}

/// End (exclusive) of the bracketed value starting at `start`, if its brackets balance.
pub(crate) fn balanced(b: &[u8], start: usize) -> Option<usize> {
    let mut stack = Closers::default();
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in b.iter().enumerate().skip(start) {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'{' => stack.push(b'}'),
            b'[' => stack.push(b']'),
            b'}' | b']' => {
                if stack.pop() != Some(c) {
                    return None;
                }
                if stack.is_empty() {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The closing brackets expected, innermost last: the first 32 without allocating (this runs
/// on every candidate span), deeper ones on the heap.
#[derive(Default)]
struct Closers {
    inline: [u8; 32],
    len: usize,
    spill: Vec<u8>,
}

impl Closers {
    fn push(&mut self, c: u8) {
        match self.inline.get_mut(self.len) {
            Some(slot) => *slot = c,
            None => self.spill.push(c),
        }
        self.len += 1;
    }

    fn pop(&mut self) -> Option<u8> {
        self.len = self.len.checked_sub(1)?;
        if self.len >= self.inline.len() { self.spill.pop() } else { self.inline.get(self.len).copied() }
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }
}

fn next_bracket(b: &[u8], from: usize) -> Option<usize> {
    b.get(from..)?.iter().position(|&c| c == b'{' || c == b'[').map(|at| from + at)
}

/// Scan `text` for the first bracketed span that parses strictly. Spans in `known_bad` (text
/// already found not to parse) are not parsed again.
///
/// A span at the very start of the text followed by JSON debris (`,`, `}`, `]`, `:` or `"`,
/// as in `{"a": 1}, "b": 2}`) is the head of a damaged document, not an answer: it is left to
/// repair.
pub(crate) fn spans(text: &str, known_bad: &[Range<usize>]) -> Scan {
    let b = text.as_bytes();
    let mut scan = Scan::default();
    let mut pos = 0;
    for tried in 0..MAX_SPANS {
        let Some(start) = next_bracket(b, pos) else {
            break;
        };
        let Some(end) = balanced(b, start) else {
            scan.damaged.push(start);
            break;
        };
        let parsed = if known_bad.contains(&(start..end)) {
            None
        } else {
            text.get(start..end).and_then(|s| serde_json::from_str::<Value>(s).ok())
        };
        if let Some(value) = parsed {
            let at_start = tried == 0 && text.get(..start).is_some_and(|p| p.trim().is_empty());
            let next = b.get(skip_trivia(b, end, b.len())).copied();
            if at_start && matches!(next, Some(b',' | b'}' | b']' | b':' | b'"')) {
                scan.damaged.push(start);
                break;
            }
            scan.found = Some((value, start..end));
            break;
        }
        scan.damaged.push(start);
        pos = end;
    }
    scan
}

/// A text made only of bracketed JSON values one after another (separated by whitespace,
/// commas or comments), as in NDJSON: the values combined, and the span they cover.
pub(crate) fn sequence(text: &str) -> Option<(Value, Range<usize>)> {
    let b = text.as_bytes();
    let first = skip_trivia(b, 0, b.len());
    let mut i = first;
    let mut items = Vec::new();
    let mut last = first;
    while i < b.len() {
        if !matches!(b.get(i), Some(b'{' | b'[')) {
            return None;
        }
        let end = balanced(b, i)?;
        let mut next = skip_trivia(b, end, b.len());
        if b.get(next) == Some(&b',') {
            next = skip_trivia(b, next + 1, b.len());
        }
        if items.is_empty() && !matches!(b.get(next), Some(b'{' | b'[')) {
            // a single value: not a sequence (checked before parsing anything)
            return None;
        }
        items.push(serde_json::from_str::<Value>(text.get(i..end)?).ok()?);
        last = end;
        i = next;
    }
    if items.len() < 2 {
        return None;
    }
    Some((combine(items), first..last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_balance_past_the_inline_stack() {
        for depth in [1, 31, 32, 33, 200] {
            let text = format!("x {}{}{} y", "[".repeat(depth), "{\"a\": 1}", "]".repeat(depth));
            assert_eq!(balanced(text.as_bytes(), 2), Some(text.len() - 2), "depth {depth}");
            let wrong = format!("{}}}", "[".repeat(depth));
            assert_eq!(balanced(wrong.as_bytes(), 0), None, "a mismatched closer at depth {depth}");
        }
    }

    /// `expect`: the strict value found (as JSON text) and the damaged starts.
    fn check(text: &str, expect: (Option<&str>, &[usize])) {
        let scan = spans(text, &[]);
        let found = scan.found.map(|(v, r)| {
            assert!(text.get(r).is_some());
            v.to_string()
        });
        assert_eq!((found.as_deref(), scan.damaged.as_slice()), expect, "{text:?}");
    }

    #[test]
    fn spans_in_prose() {
        check(r#"Here: {"a": 1} ok"#, (Some(r#"{"a":1}"#), &[]));
        check(r#"x {"code":"fn x() { }"} y"#, (Some(r#"{"code":"fn x() { }"}"#), &[]));
        check(r#"use {name} then {"a": 1}"#, (Some(r#"{"a":1}"#), &[4]));
        check(r#"{"a": {"b": 1},}"#, (None, &[0]));
        check(r#"{"items":[{"id":1},{"id":2,"na"#, (None, &[0]));
        check(r#"{"a": 1}, "b": 2}"#, (None, &[0]));
        check(r#"[{"a":1}},{"a":2}]"#, (None, &[0]));
        check("no brackets", (None, &[]));
    }

    #[test]
    fn sequences() {
        let seq = |t: &str| sequence(t).map(|(v, r)| (v.to_string(), r));
        assert_eq!(seq("{\"a\":1}\n{\"b\":2}"), Some((r#"[{"a":1},{"b":2}]"#.into(), 0..15)));
        assert_eq!(seq("/* 1 */ {}, {}"), Some(("[{},{}]".into(), 8..14)));
        assert_eq!(seq("[]{\"k\":1}"), Some((r#"{"k":1}"#.into(), 0..9)));
        assert_eq!(seq("{\"a\":1}"), None);
        assert_eq!(seq("{\"a\":1} and {\"b\":2}"), None);
    }
}
