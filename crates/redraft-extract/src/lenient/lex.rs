//! Byte-level character classes and side-effect-free lookahead for the lenient parser.

/// How far lookahead helpers scan before giving up, so every lookahead is O(1).
const LOOKAHEAD: usize = 256;

/// A quote character the lenient parser accepts around strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Quote {
    /// `"`, the only JSON quote.
    Double,
    /// `'`.
    Single,
    /// `“` or `”`.
    DoubleLike,
    /// `‘`, `’`, `` ` `` or `´`.
    SingleLike,
}

impl Quote {
    /// Whether a string opened by `self` may be closed by `close`.
    pub(super) fn closed_by(self, close: Quote) -> bool {
        match self {
            Quote::Double => close == Quote::Double,
            Quote::Single => close == Quote::Single,
            Quote::DoubleLike => matches!(close, Quote::Double | Quote::DoubleLike),
            Quote::SingleLike => matches!(close, Quote::Single | Quote::SingleLike),
        }
    }
}

/// The quote starting at `i` and its length in bytes.
pub(super) fn quote_at(b: &[u8], i: usize) -> Option<(Quote, usize)> {
    match *b.get(i)? {
        b'"' => Some((Quote::Double, 1)),
        b'\'' => Some((Quote::Single, 1)),
        b'`' => Some((Quote::SingleLike, 1)),
        0xC2 if b.get(i + 1) == Some(&0xB4) => Some((Quote::SingleLike, 2)),
        0xE2 if b.get(i + 1) == Some(&0x80) => match *b.get(i + 2)? {
            0x9C | 0x9D => Some((Quote::DoubleLike, 3)),
            0x98 | 0x99 => Some((Quote::SingleLike, 3)),
            _ => None,
        },
        _ => None,
    }
}

/// JSON whitespace.
pub(super) fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// Length of a Unicode space JSON does not allow (no-break space, em space, BOM, …) at `i`.
pub(super) fn odd_space_len(b: &[u8], i: usize) -> usize {
    match (b.get(i), b.get(i + 1), b.get(i + 2)) {
        (Some(0xC2), Some(0xA0), _) => 2,
        (Some(0xE2), Some(0x80), Some(0x80..=0x8B | 0xAF)) => 3,
        (Some(0xE2), Some(0x81), Some(0x9F)) => 3,
        (Some(0xE3), Some(0x80), Some(0x80)) => 3,
        (Some(0xEF), Some(0xBB), Some(0xBF)) => 3,
        (Some(0xE1), Some(0xA0), Some(0x8E)) => 3,
        _ => 0,
    }
}

/// Characters after which a closing quote is believable: structure, `/`, `+`, newline.
/// Parentheses are not among them: `"six feet (72") tall"` is one string.
pub(super) fn is_delim(c: u8) -> bool {
    matches!(c, b',' | b':' | b'[' | b']' | b'{' | b'}' | b'/' | b'+' | b'\n')
}

/// Characters that may continue an identifier-like token.
pub(super) fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$')
}

/// What kind of comment starts at `i`, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Comment {
    /// `// …` up to the end of the line.
    Line,
    /// `# …` up to the end of the line or a closing `}` or `]` (`{"a": 1 # note }`).
    Hash,
    /// `/* … */`.
    Block,
}

/// The comment starting at `i`. `#` counts only when followed by a space, `#` or a line end,
/// so unquoted values like `#fff` stay values.
pub(super) fn comment_at(b: &[u8], i: usize) -> Option<Comment> {
    match (b.get(i)?, b.get(i + 1)) {
        (b'/', Some(b'/')) => Some(Comment::Line),
        (b'/', Some(b'*')) => Some(Comment::Block),
        (b'#', None | Some(b' ' | b'\t' | b'#' | b'\n' | b'\r')) => Some(Comment::Hash),
        _ => None,
    }
}

/// End of the comment of kind `kind` starting at `i`, clamped to `end`.
pub(super) fn comment_end(b: &[u8], i: usize, end: usize, kind: Comment) -> usize {
    let body = b.get(i..end).unwrap_or_default();
    match kind {
        Comment::Line => body.iter().position(|&c| c == b'\n').map_or(end, |n| i + n),
        Comment::Hash => body.iter().position(|&c| matches!(c, b'\n' | b'}' | b']')).map_or(end, |n| i + n),
        Comment::Block => {
            body.get(2..).and_then(|rest| rest.windows(2).position(|w| w == b"*/")).map_or(end, |n| i + 2 + n + 2)
        }
    }
}

/// Position of the next significant byte at or after `i` (skipping whitespace, odd spaces
/// and comments), without recording anything.
pub(crate) fn skip_trivia(b: &[u8], mut i: usize, end: usize) -> usize {
    while i < end {
        let c = b.get(i).copied().unwrap_or(0);
        if is_ws(c) {
            i += 1;
        } else if let Some(kind) = comment_at(b, i) {
            i = comment_end(b, i, end, kind);
        } else {
            let n = odd_space_len(b, i);
            if n == 0 {
                break;
            }
            i += n;
        }
    }
    i.min(end)
}

/// Position of the last non-whitespace byte before `i`, if any.
pub(super) fn prev_significant(b: &[u8], i: usize) -> Option<(usize, u8)> {
    let mut j = i;
    while j > 0 {
        j -= 1;
        let c = *b.get(j)?;
        if !is_ws(c) {
            return Some((j, c));
        }
    }
    None
}

/// Whether a quoted key (`"name":`) starts at `i`: a quote, its closing quote on the same
/// line, then a colon.
///
/// Not bounded: valid JSON relies on it to recognise the next member after `",`, and each key
/// is scanned a constant number of times.
pub(super) fn quoted_key_at(b: &[u8], i: usize, end: usize) -> bool {
    let Some((open, len)) = quote_at(b, i) else {
        return false;
    };
    let mut j = i + len;
    while j < end {
        match b.get(j) {
            Some(b'\n') | None => return false,
            Some(b'\\') => j += 2,
            Some(_) => {
                if let Some((q, l)) = quote_at(b, j)
                    && open.closed_by(q)
                {
                    let n = skip_trivia(b, j + l, end);
                    return b.get(n) == Some(&b':') && n < end;
                }
                j += 1;
            }
        }
    }
    false
}

/// Whether an object member (`"key":`, `key:` or `key":`) starts at the next significant byte
/// from `i`.
pub(super) fn member_at(b: &[u8], i: usize, end: usize) -> bool {
    let i = skip_trivia(b, i, end);
    if quote_at(b, i).is_some() {
        return quoted_key_at(b, i, end);
    }
    let limit = end.min(i + LOOKAHEAD);
    let mut j = i;
    while j < limit && b.get(j).is_some_and(|&c| is_ident(c) || c == b'-') {
        j += 1;
    }
    if j == i {
        return false;
    }
    if b.get(j) == Some(&b'"') {
        // `b":`, a key that lost its opening quote
        j += 1;
    }
    while j < limit && b.get(j).is_some_and(|&c| c == b' ' || c == b'\t') {
        j += 1;
    }
    j < end && b.get(j) == Some(&b':')
}

/// Whether a quoted string at `i` is complete and followed by `,`, `]`, `}` or the end.
pub(super) fn item_at(b: &[u8], i: usize, end: usize) -> bool {
    let Some((open, len)) = quote_at(b, i) else {
        return false;
    };
    let limit = end.min(i + LOOKAHEAD);
    let mut j = i + len;
    while j < limit {
        match b.get(j) {
            Some(b'\n') | None => return false,
            Some(b'\\') => j += 2,
            Some(_) => {
                if let Some((q, l)) = quote_at(b, j)
                    && open.closed_by(q)
                {
                    let n = skip_trivia(b, j + l, end);
                    return n >= end || matches!(b.get(n), Some(b',' | b']' | b'}'));
                }
                j += 1;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, at: usize, expect: (bool, bool, Option<Quote>)) {
        let b = input.as_bytes();
        let got = (member_at(b, at, b.len()), item_at(b, at, b.len()), quote_at(b, at).map(|q| q.0));
        assert_eq!(got, expect, "{input:?} at {at}");
    }

    #[test]
    fn lookahead() {
        check(r#""key": 1"#, 0, (true, false, Some(Quote::Double)));
        check(r#"key : 1"#, 0, (true, false, None));
        check(r#""a", "b""#, 0, (false, true, Some(Quote::Double)));
        check(r#""a"]"#, 0, (false, true, Some(Quote::Double)));
        check("“a”: 1", 0, (true, false, Some(Quote::DoubleLike)));
        check("‘a’", 0, (false, true, Some(Quote::SingleLike)));
        check("plain words", 0, (false, false, None));
        check("\"open\nnext\": 1", 0, (false, false, Some(Quote::Double)));
    }

    #[test]
    fn trivia() {
        let b = b"  // c\n /* d */ # e\n x";
        assert_eq!(skip_trivia(b, 0, b.len()), b.len() - 1);
        let b = "\u{a0}\u{2003}\u{feff}x".as_bytes();
        assert_eq!(skip_trivia(b, 0, b.len()), b.len() - 1);
        assert_eq!(comment_at(b"#fff", 0), None);
        assert_eq!(comment_at(b"# x", 0), Some(Comment::Hash));
        assert_eq!(comment_end(b"# x } y", 0, 7, Comment::Hash), 4);
        assert_eq!(comment_end(b"/* open", 0, 7, Comment::Block), 7);
    }
}
