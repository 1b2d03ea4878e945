//! Whether a quote really closes a string: judged by what follows it (a delimiter, another
//! value, the end), by brackets the string itself opened, and by whether the document plainly
//! goes on afterwards.

use super::lex::{self, Quote, member_at, quote_at};
use super::opens::Opens;
use super::{Ctx, Parser};

impl Parser<'_> {
    /// Whether a closing quote ending at `after` really ends the string. What follows must be
    /// the end, a line break (in a code snippet, one before more structure), a delimiter, a
    /// digit or another quote that can open a string. A closing bracket counts
    /// only if the string did not open it itself (`"the list [1, 2"] more"`) or the document
    /// plainly goes on after it. While the string holds an unclosed `{`/`[` (a snippet of
    /// JSON quoted without escapes), a colon does not end it and a comma only before more
    /// document; inside an object a comma counts only before another member.
    pub(super) fn end_trusted(&self, after: usize, ctx: Ctx, opens: Opens) -> bool {
        let (n, next) = self.next_significant(after);
        if self.b.get(after..n).is_some_and(|gap| gap.contains(&b'\n')) {
            // in a code snippet, a quote ending a line is text unless structure follows
            return !opens.code || matches!(next, None | Some(b'}' | b']' | b',')) || member_at(self.b, n, self.end);
        }
        let Some(c) = next else {
            return true;
        };
        let snippet = opens.unclosed() && ctx != Ctx::Key;
        match c {
            b')' => self.parens > 0 && opens.open_for(b')') == 0,
            b']' | b'}' => opens.open_for(c) == 0 || self.continues_after(n + 1, ctx, opens),
            b',' if ctx == Ctx::Value || snippet => self.comma_continues(n + 1, ctx, opens),
            _ if snippet => false,
            _ if quote_at(self.b, n).is_some() => !self.closing_quote_at(n),
            _ => lex::is_delim(c) || c.is_ascii_digit(),
        }
    }

    /// Whether the quote at `i` can only close a string: a delimiter follows it directly, as in
    /// `"a "b" c" ", "d"` (the quote before `,` ends the text the first one began).
    fn closing_quote_at(&self, i: usize) -> bool {
        let Some((_, len)) = quote_at(self.b, i) else {
            return false;
        };
        let (_, next) = self.next_significant(i + len);
        matches!(next, Some(b',' | b']' | b'}'))
    }

    /// Whether the rest of the line from `i` is blank and the next line holds only a quote
    /// closing `open`, followed by `,`, `}` or `]` (or nothing more): `"a": "text\n"\n",`.
    pub(super) fn lone_quote_line(&self, i: usize, open: Quote) -> bool {
        let mut j = i;
        while self.peek_at(j).is_some_and(|c| matches!(c, b' ' | b'\t' | b'\r')) {
            j += 1;
        }
        if self.peek_at(j) != Some(b'\n') {
            return false;
        }
        while self.peek_at(j).is_some_and(lex::is_ws) {
            j += 1;
        }
        let Some((q, len)) = quote_at(self.b, j) else {
            return false;
        };
        if !open.closed_by(q) {
            return false;
        }
        j += len;
        while self.peek_at(j).is_some_and(|c| matches!(c, b' ' | b'\t' | b'\r')) {
            j += 1;
        }
        matches!(self.peek_at(j), None | Some(b',' | b'}' | b']'))
    }

    /// Whether, after a space, `i` starts an array item that lost its opening quote:
    /// `["a" b", "c"]` or `["a" b]`.
    pub(super) fn unopened_item_at(&self, i: usize) -> bool {
        if !self.peek_at(i).is_some_and(|c| c == b' ' || c == b'\t') {
            return false;
        }
        let limit = self.end.min(i + 256);
        let mut j = i;
        while j < limit && self.b.get(j).is_some_and(|c| !matches!(c, b'"' | b'\n' | b',' | b'[' | b']' | b'{' | b'}'))
        {
            j += 1;
        }
        if j == limit || self.b.get(i..j).is_none_or(|word| word.iter().all(|c| lex::is_ws(*c))) {
            return false;
        }
        if self.peek_at(j) == Some(b'"') {
            j += 1;
        }
        self.next_significant(j).1.is_none_or(|c| c == b',' || c == b']')
    }

    /// Whether the document goes on structurally after offset `i`: the end, a closer, or a
    /// comma before more document.
    fn continues_after(&self, i: usize, ctx: Ctx, opens: Opens) -> bool {
        match self.next_significant(i) {
            (_, None | Some(b']' | b'}' | b')')) => true,
            (n, Some(b',')) => self.comma_continues(n + 1, ctx, opens),
            _ => false,
        }
    }

    /// Whether what follows a comma at `i - 1` is more document rather than more text of the
    /// string: in an object, words running up to a quote that closes like a string end
    /// (`"lorem "ipsum", sic." }`) are the string's own text.
    fn comma_continues(&self, i: usize, ctx: Ctx, opens: Opens) -> bool {
        let (m, d) = self.next_significant(i);
        match d {
            None | Some(b'}' | b']') => true,
            Some(_) if quote_at(self.b, m).is_some() || member_at(self.b, m, self.end) => true,
            // a JSON literal is a value of whatever container encloses the string
            Some(c) if c.is_ascii_alphabetic() && ctx == Ctx::Value && !self.literal_at(m) => {
                !self.string_tail_at(m, opens)
            }
            Some(_) => true,
        }
    }

    /// Whether `true`, `false` or `null` stands at `i` as a whole word.
    fn literal_at(&self, i: usize) -> bool {
        ["true", "false", "null"].iter().any(|word| {
            self.b.get(i..i + word.len()) == Some(word.as_bytes())
                && self.peek_at(i + word.len()).is_none_or(|c| !lex::is_ident(c))
        })
    }

    /// Whether the text from `i` reaches, on the same line (or further, in a code snippet), a
    /// quote that looks like the end of a string: followed by the end, a closer, or a comma and
    /// another member.
    fn string_tail_at(&self, i: usize, opens: Opens) -> bool {
        let open = opens.quote;
        let limit = self.end.min(i + 256);
        let mut j = i;
        while j < limit {
            match self.b.get(j) {
                Some(b'\n') if !opens.code => return false,
                None => return false,
                Some(_) => {
                    if let Some((q, len)) = quote_at(self.b, j)
                        && open.closed_by(q)
                    {
                        return match self.next_significant(j + len) {
                            (_, None | Some(b'}' | b']')) => true,
                            (k, Some(b',')) => {
                                let (m, d) = self.next_significant(k + 1);
                                d.is_none() || quote_at(self.b, m).is_some() || member_at(self.b, m, self.end)
                            }
                            _ => false,
                        };
                    }
                    j += 1;
                }
            }
        }
        false
    }
}
