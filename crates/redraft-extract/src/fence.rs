//! Markdown code fences (```` ```json … ``` ````, bare ```` ``` ````, inline or unclosed).
//!
//! Fences inside a JSON string are not fences: once a `{` or `[` opens, double-quoted strings
//! are tracked until the brackets close again, so `{"a": "```x```"}` holds no fence. The same
//! holds inside a block: a block whose content is a JSON value closes at the first fence
//! outside its strings, so `"code": "```python\nprint(1)\n```"` does not cut it short.

use std::ops::Range;

/// Content ranges of the first `limit` fenced blocks in `text`, in order. The language tag
/// after the opening fence is not part of the content; an unclosed fence runs to the end.
pub(crate) fn blocks(text: &str, limit: usize) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    if !b.contains(&b'`') {
        return Vec::new();
    }
    let mut found = Vec::new();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut i = 0;
    while i < b.len() && found.len() < limit {
        let c = b.get(i).copied().unwrap_or(0);
        if in_string {
            match c {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match c {
            b'`' if b.get(i..i + 3) == Some(b"```") => {
                let open_end = i + run(b, i);
                let mut start = open_end;
                while b.get(start).is_some_and(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'+' | b'.'))
                {
                    start += 1;
                }
                let close = close_at(text, start);
                found.push(start..close);
                i = close + run(b, close);
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' if depth > 0 => in_string = true,
            _ => {}
        }
        i += 1;
    }
    found
}

/// Where the block whose content starts at `start` closes (the end of the text when it does
/// not). Content that is a JSON value (it starts with `{` or `[`) closes at the first fence
/// outside its strings (`"` or `'` quoted, tracked while its brackets are open). When the value
/// is left open, the first fence standing on a line of its own closes it, else a fence ending
/// the text; failing both, the block runs to the end (the answer was cut off). Other content
/// closes at the first fence.
fn close_at(text: &str, start: usize) -> usize {
    let b = text.as_bytes();
    let first = || text.get(start..).and_then(|rest| rest.find("```")).map_or(b.len(), |at| start + at);
    let value = start + b.get(start..).map_or(0, |rest| rest.iter().take_while(|c| c.is_ascii_whitespace()).count());
    if !matches!(b.get(value), Some(b'{' | b'[')) {
        return first();
    }
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    // the last byte outside strings that is not whitespace
    let mut last = 0u8;
    let mut i = value;
    while let Some(&c) = b.get(i) {
        match quote {
            Some(q) => match c {
                b'\\' => i += 1,
                _ if c == q => quote = None,
                _ => {}
            },
            None => match c {
                b'`' if b.get(i..i + 3) == Some(b"```") => return i,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => depth = depth.saturating_sub(1),
                b'"' if depth > 0 => quote = Some(c),
                // a single quote opens a string only where a value or key begins (`it's` does not)
                b'\'' if depth > 0 && matches!(last, b'{' | b'[' | b',' | b':') => quote = Some(c),
                _ => {}
            },
        }
        if !c.is_ascii_whitespace() {
            last = c;
        }
        i += 1;
    }
    if quote.is_none() && depth == 0 {
        return b.len();
    }
    // the value was left open: cut off (then no fence closes it), or damaged so that a quote
    // is unpaired (then a fence on a line of its own, or one ending the text, does)
    own_line_fence(b, start).or_else(|| trailing_fence(text, start)).unwrap_or(b.len())
}

/// A fence at or after `from` that only whitespace follows.
fn trailing_fence(text: &str, from: usize) -> Option<usize> {
    let body = text.get(from..)?.trim_end();
    let at = body.rfind("```")?;
    (at + 3 == body.len()).then_some(from + at)
}

/// The first fence at or after `from` that stands on a line of its own (only spaces around it).
fn own_line_fence(b: &[u8], from: usize) -> Option<usize> {
    let mut line = from;
    while line < b.len() {
        let end = b.get(line..).and_then(|rest| rest.iter().position(|&c| c == b'\n')).map_or(b.len(), |n| line + n);
        let text = b.get(line..end).unwrap_or_default();
        let lead = text.iter().take_while(|c| matches!(c, b' ' | b'\t')).count();
        let body = text.get(lead..).unwrap_or_default();
        let ticks = body.iter().take_while(|&&c| c == b'`').count();
        if ticks >= 3 && body.get(ticks..).is_some_and(|rest| rest.iter().all(u8::is_ascii_whitespace)) {
            return Some(line + lead);
        }
        line = end + 1;
    }
    None
}

/// Length of the run of backticks at `i`.
fn run(b: &[u8], i: usize) -> usize {
    b.get(i..).map_or(0, |rest| rest.iter().take_while(|&&c| c == b'`').count())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expect: &[&str]) {
        let got: Vec<&str> = blocks(text, 8).into_iter().filter_map(|r| text.get(r)).collect();
        assert_eq!(got, expect, "{text:?}");
    }

    #[test]
    fn fences() {
        check("Here:\n```json\n{\"a\":1}\n```\nbye", &["\n{\"a\":1}\n"]);
        check("```\n[1]\n```", &["\n[1]\n"]);
        check("lorem ```json {\"k\":1} ``` ipsum ```json [1] ``` 42", &[" {\"k\":1} ", " [1] "]);
        check("````{ \"key\": \"value\" }```", &["{ \"key\": \"value\" }"]);
        check("```python\nx = 1", &["\nx = 1"]);
        check("{\"a\": \"```{}```\"}", &[]);
        check("[```json\n{\"a\":\"b\"}\n```]", &["\n{\"a\":\"b\"}\n"]);
        check("no fences here", &[]);
    }

    #[test]
    fn fences_inside_strings_of_a_block_do_not_close_it() {
        let code = "{\"code\": \"```python\\nprint(1)\\n```\", \"n\": 2}";
        check(&format!("```json\n{code}\n```"), &[&format!("\n{code}\n")]);
        check(&format!("Use this:\n```json\n{code}\n```\nbye ```[1]```"), &[&format!("\n{code}\n"), "[1]"]);
        check("```\n[\"```\", \"a ``` b\"]\n```", &["\n[\"```\", \"a ``` b\"]\n"]);
        check("```json\n{'md': '```x```'}\n```", &["\n{'md': '```x```'}\n"]);
        // raw line breaks in the string, as models write them
        let raw = "{\"code\": \"```python\nprint(1)\n```\"}";
        check(&format!("```json\n{raw}\n```"), &[&format!("\n{raw}\n")]);
        // no closing fence: the block runs to the end
        check(&format!("```json\n{code}"), &[&format!("\n{code}")]);
        // a string left open: the fence on a line of its own closes the block, else one ending
        // the text; else the answer was cut off inside the string
        check("```json\n{\"a\": \"x ``` y}\n```\nsay \"hi", &["\n{\"a\": \"x ``` y}\n"]);
        check("```json {\"a\": \"x ``` y} ```", &[" {\"a\": \"x ``` y} "]);
        let cut = "{\"code\": \"```sh\\nls\\n```\", \"note\": \"cu";
        check(&format!("```json\n{cut}"), &[&format!("\n{cut}")]);
        // an apostrophe in a word opens no string
        check("```json\n{b: it's} ``` x", &["\n{b: it's} "]);
        // prose in a block closes at its first fence, as before
        check("```text\nsay \"```\" twice\n```", &["\nsay \"", ""]);
    }
}
