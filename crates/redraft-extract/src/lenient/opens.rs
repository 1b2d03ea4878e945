//! What the text of a quoted string leaves open (its quote, brackets, a code fence), which
//! decides whether a delimiter after it is structure or the string's own text.

use super::lex::Quote;

/// What a string read so far leaves open: its quote, and brackets its text has not closed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Opens {
    pub(super) quote: Quote,
    /// Whether the text holds a code fence (```` ``` ````): a snippet whose quotes are text.
    pub(super) code: bool,
    paren: usize,
    square: usize,
    curly: usize,
    /// Whether the last `]` or `}` of the text closed no bracket the text had opened.
    stray: bool,
}

impl Opens {
    pub(super) fn new(quote: Quote) -> Self {
        Opens { quote, code: false, paren: 0, square: 0, curly: 0, stray: false }
    }

    pub(super) fn track(&mut self, c: u8) {
        match c {
            b'(' => self.paren += 1,
            b')' => self.paren = self.paren.saturating_sub(1),
            b'[' => self.square += 1,
            b']' => {
                self.stray = self.square == 0;
                self.square = self.square.saturating_sub(1);
            }
            b'{' => self.curly += 1,
            b'}' => {
                self.stray = self.curly == 0;
                self.curly = self.curly.saturating_sub(1);
            }
            _ => {}
        }
    }

    /// Whether the delimiter `c` that ends the text after this string's text can be structure
    /// the end quote was lost before (`["hello]`), rather than the string's own text cut off:
    /// a bracket the text opens, or closes, is text (`"x [1, 2] {y`, `"[1, {2}]`), and so is
    /// anything inside a bracket it left open.
    pub(super) fn outside(self, c: u8) -> bool {
        match c {
            b'[' | b'{' => false,
            b']' | b'}' => self.stray,
            _ => !self.unclosed(),
        }
    }

    /// Whether `c`, met while reading a string cut off by the end of the text, is the
    /// string's own text: a bracket it opens or closes, or a delimiter inside one it opened.
    pub(super) fn holds(self, c: u8) -> bool {
        match c {
            b'[' | b'{' => true,
            b']' | b'}' => self.open_for(c) > 0,
            _ => self.unclosed(),
        }
    }

    /// Whether a `{` or `[` is still open.
    pub(super) fn unclosed(self) -> bool {
        self.square > 0 || self.curly > 0
    }

    pub(super) fn open_for(self, close: u8) -> usize {
        match close {
            b')' => self.paren,
            b']' => self.square,
            _ => self.curly,
        }
    }
}
