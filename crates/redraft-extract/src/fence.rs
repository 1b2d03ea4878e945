//! Markdown code fences (```` ```json … ``` ````, bare ```` ``` ````, inline or unclosed).
//!
//! Fences inside a JSON string are not fences: once a `{` or `[` opens, double-quoted strings
//! are tracked until the brackets close again, so `{"a": "```x```"}` holds no fence.

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
                let close = text.get(start..).and_then(|rest| rest.find("```")).map_or(b.len(), |at| start + at);
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
}
