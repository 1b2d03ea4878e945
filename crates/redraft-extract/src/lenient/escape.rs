//! Escape sequences inside quoted strings: JSON's own, `\u` with surrogate pairs, and the
//! ones JSON does not define (kept as text or dropped, and recorded).

use super::{Fail, Parser};
use crate::Repair;

impl Parser<'_> {
    /// Decode the escape sequence at `i` (a backslash) into `out`; returns the next offset.
    pub(super) fn escape(&mut self, i: usize, out: &mut String) -> Result<usize, Fail> {
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
            b'\'' | b'\n' => {
                // `\'` from JavaScript, or a backslash continuing the line
                self.note(Repair::InvalidEscape);
                char::from(n)
            }
            _ if n.is_ascii() => {
                // not a JSON escape (`\d` in a regex, `\l`): keep the backslash as text
                self.note(Repair::InvalidEscape);
                out.push('\\');
                return Ok(i + 1);
            }
            _ => {
                // a backslash before a non-ASCII character (`\„`): drop it
                self.note(Repair::InvalidEscape);
                return Ok(i + 1);
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
}
