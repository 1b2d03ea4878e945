//! Reading a command line the way `sh -c` would, far enough to know whether it is one program
//! with literal arguments — and, if it is, which words it has.
//!
//! This is not a shell. It follows the POSIX quoting rules (single quotes, double quotes,
//! backslash) to split words, and reports everything that would make `sh` do more than run one
//! program: separators, pipes, redirections, subshells, expansions and substitutions, globs,
//! braces, a leading `~`, `#` or `!`, a variable assignment before the program, newlines and
//! other control characters. A caller that finds any of those refuses the command (or accepts
//! it only as an exact, operator-written string).

use std::fmt;

/// The placeholder `exec:` replaces with the artifact file's quoted path.
pub const ARTIFACT: &str = "{artifact}";

/// Something in a command line that `sh -c` would treat as more than a literal word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellSyntax {
    /// `;`, `&` or `|`: another command, in sequence, in the background or in a pipe.
    Separator(char),
    /// `<` or `>`: a redirection.
    Redirection(char),
    /// `(` or `)`: a subshell.
    Subshell(char),
    /// `$` outside single quotes: a variable, `$(…)` or `$((…))`.
    Expansion,
    /// A backtick: a command substitution.
    Backtick,
    /// `*`, `?` or `[` outside quotes: a file name pattern.
    Glob(char),
    /// `{` or `}` outside quotes (other than the `{artifact}` placeholder): brace expansion.
    Brace(char),
    /// `~` starting a word: a home directory.
    Tilde,
    /// `#` starting a word: the rest is a comment.
    Comment,
    /// `!` starting a word: negation (or history expansion in some shells).
    Bang,
    /// `NAME=value` before the program: a variable assignment.
    Assignment,
    /// A line break: another command.
    Newline,
    /// A control character other than a tab.
    Control,
    /// A quote that is never closed.
    Unterminated(char),
}

impl fmt::Display for ShellSyntax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShellSyntax::Separator(c) => write!(f, "`{c}` (it starts another command)"),
            ShellSyntax::Redirection(c) => write!(f, "`{c}` (a redirection)"),
            ShellSyntax::Subshell(c) => write!(f, "`{c}` (a subshell)"),
            ShellSyntax::Expansion => f.write_str("`$` (an expansion or command substitution)"),
            ShellSyntax::Backtick => f.write_str("a backtick (a command substitution)"),
            ShellSyntax::Glob(c) => write!(f, "`{c}` outside quotes (a file name pattern)"),
            ShellSyntax::Brace(c) => write!(f, "`{c}` outside quotes (brace expansion)"),
            ShellSyntax::Tilde => f.write_str("a leading `~` (a home directory)"),
            ShellSyntax::Comment => f.write_str("a leading `#` (a comment)"),
            ShellSyntax::Bang => f.write_str("a leading `!`"),
            ShellSyntax::Assignment => f.write_str("a variable assignment before the program"),
            ShellSyntax::Newline => f.write_str("a line break (it starts another command)"),
            ShellSyntax::Control => f.write_str("a control character"),
            ShellSyntax::Unterminated(q) => write!(f, "an unterminated `{q}` quote"),
        }
    }
}

/// One word of a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The word's text after quote removal.
    pub text: String,
    /// Whether any part of it was quoted or escaped.
    pub quoted: bool,
}

/// Shell syntax found, and the index of the word it was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    pub syntax: ShellSyntax,
    pub word: usize,
}

/// A command line split into words, with every piece of shell syntax found in it. The words
/// are exact only when `syntax` is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lexed {
    pub words: Vec<Word>,
    pub syntax: Vec<Found>,
}

impl Lexed {
    /// The words' texts.
    pub fn texts(&self) -> Vec<&str> {
        self.words.iter().map(|w| w.text.as_str()).collect()
    }
}

/// Split `line` into words by POSIX quoting rules and report the shell syntax in it.
pub fn lex(line: &str) -> Lexed {
    let mut out = Lexed::default();
    let mut word = String::new();
    let mut quoted = false;
    let mut in_word = false;
    let mut chars = line.char_indices().peekable();
    let found = |out: &mut Lexed, syntax: ShellSyntax| {
        let word = out.words.len();
        out.syntax.push(Found { syntax, word });
    };
    while let Some((at, c)) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    out.words.push(Word { text: std::mem::take(&mut word), quoted });
                    in_word = false;
                    quoted = false;
                }
                continue;
            }
            '\n' | '\r' => found(&mut out, ShellSyntax::Newline),
            '\'' => {
                quoted = true;
                let mut closed = false;
                for (_, q) in chars.by_ref() {
                    if q == '\'' {
                        closed = true;
                        break;
                    }
                    control(&mut out, q);
                    word.push(q);
                }
                if !closed {
                    found(&mut out, ShellSyntax::Unterminated('\''));
                }
            }
            '"' => {
                quoted = true;
                let mut closed = false;
                while let Some((_, q)) = chars.next() {
                    match q {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '\\' => match chars.peek().map(|&(_, n)| n) {
                            Some(n @ ('$' | '`' | '"' | '\\')) => {
                                chars.next();
                                word.push(n);
                            }
                            Some('\n') => {
                                chars.next();
                                found(&mut out, ShellSyntax::Newline);
                            }
                            _ => word.push('\\'),
                        },
                        '$' => {
                            found(&mut out, ShellSyntax::Expansion);
                            word.push(q);
                        }
                        '`' => {
                            found(&mut out, ShellSyntax::Backtick);
                            word.push(q);
                        }
                        other => {
                            control(&mut out, other);
                            word.push(other);
                        }
                    }
                }
                if !closed {
                    found(&mut out, ShellSyntax::Unterminated('"'));
                }
            }
            '\\' => {
                quoted = true;
                match chars.next() {
                    Some((_, '\n')) => found(&mut out, ShellSyntax::Newline),
                    Some((_, n)) => {
                        control(&mut out, n);
                        word.push(n);
                    }
                    // A trailing backslash is kept as it is.
                    None => word.push('\\'),
                }
            }
            ';' | '&' | '|' => found(&mut out, ShellSyntax::Separator(c)),
            '<' | '>' => found(&mut out, ShellSyntax::Redirection(c)),
            '(' | ')' => found(&mut out, ShellSyntax::Subshell(c)),
            '$' => found(&mut out, ShellSyntax::Expansion),
            '`' => found(&mut out, ShellSyntax::Backtick),
            '*' | '?' | '[' => found(&mut out, ShellSyntax::Glob(c)),
            '{' if line[at..].starts_with(ARTIFACT) => {
                for _ in 1..ARTIFACT.len() {
                    chars.next();
                }
                word.push_str(ARTIFACT);
                in_word = true;
                continue;
            }
            '{' | '}' => found(&mut out, ShellSyntax::Brace(c)),
            '~' if !in_word => found(&mut out, ShellSyntax::Tilde),
            '#' if !in_word => found(&mut out, ShellSyntax::Comment),
            '!' if !in_word => found(&mut out, ShellSyntax::Bang),
            other => control(&mut out, other),
        }
        // Whatever was found, the character belongs to the current word (the words only
        // matter when nothing was found).
        if !matches!(c, '\'' | '"' | '\\') {
            word.push(c);
        }
        in_word = true;
    }
    if in_word {
        out.words.push(Word { text: word, quoted });
    }
    if out.words.first().is_some_and(|w| is_assignment(&w.text)) {
        out.syntax.push(Found { syntax: ShellSyntax::Assignment, word: 0 });
    }
    out
}

fn control(out: &mut Lexed, c: char) {
    if c == '\n' || c == '\r' {
        let word = out.words.len();
        out.syntax.push(Found { syntax: ShellSyntax::Newline, word });
    } else if c.is_control() && c != '\t' {
        let word = out.words.len();
        out.syntax.push(Found { syntax: ShellSyntax::Control, word });
    }
}

/// `NAME=…` with a shell variable name before the `=`.
fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else { return false };
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One word quoted for `sh` so that it is read back as exactly `text`, with every
/// `{artifact}` placeholder left outside the quotes (`exec:` replaces it with the quoted path).
pub fn quote_word(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split(ARTIFACT).enumerate() {
        if i > 0 {
            out.push_str(ARTIFACT);
        }
        if !part.is_empty() {
            out.push_str(&quote(part));
        }
    }
    if out.is_empty() { "''".to_owned() } else { out }
}

fn quote(text: &str) -> String {
    let plain = text.chars().all(|c| c.is_ascii_alphanumeric() || "_./:@%+,=-".contains(c));
    if plain && !text.starts_with(['~', '#', '!']) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        let lexed = lex(line);
        assert!(lexed.syntax.is_empty(), "{line:?}: {:?}", lexed.syntax);
        lexed.words.into_iter().map(|w| w.text).collect()
    }

    fn syntax(line: &str) -> Vec<ShellSyntax> {
        lex(line).syntax.into_iter().map(|f| f.syntax).collect()
    }

    #[test]
    fn splits_words_by_posix_quoting() {
        assert_eq!(words("python3  -m\tpy_compile x.py"), ["python3", "-m", "py_compile", "x.py"]);
        assert_eq!(words(r#"pytest -k 'a or b' "c d" e\ f"#), ["pytest", "-k", "a or b", "c d", "e f"]);
        assert_eq!(words(r#"echo "a\"b" 'it'\''s' "\\x""#), ["echo", "a\"b", "it's", "\\x"]);
        assert_eq!(words("pytest -q {artifact}"), ["pytest", "-q", "{artifact}"]);
        assert_eq!(words("check --file={artifact} ''"), ["check", "--file={artifact}", ""]);
        assert_eq!(words("echo '$HOME' '`x`' ';'"), ["echo", "$HOME", "`x`", ";"]);
        assert_eq!(words("a#b c~ d!"), ["a#b", "c~", "d!"]);
    }

    #[test]
    fn finds_every_kind_of_shell_syntax() {
        use ShellSyntax::*;
        assert_eq!(syntax("a; b"), [Separator(';')]);
        assert_eq!(syntax("a && b || c"), [Separator('&'), Separator('&'), Separator('|'), Separator('|')]);
        assert_eq!(syntax("a >x <y"), [Redirection('>'), Redirection('<')]);
        assert_eq!(syntax("(a)"), [Subshell('('), Subshell(')')]);
        assert_eq!(syntax("a $(id)"), [Expansion, Subshell('('), Subshell(')')]);
        assert_eq!(syntax("a \"$(id)\""), [Expansion]);
        assert_eq!(syntax("a `id`"), [Backtick, Backtick]);
        assert_eq!(syntax("a \"`id`\""), [Backtick, Backtick]);
        assert_eq!(syntax("a $HOME ${X}"), [Expansion, Expansion, Brace('{'), Brace('}')]);
        assert_eq!(syntax("a *.py x? [ab]"), [Glob('*'), Glob('?'), Glob('[')]);
        assert_eq!(syntax("a {b,c}"), [Brace('{'), Brace('}')]);
        assert_eq!(syntax("a ~/x"), [Tilde]);
        assert_eq!(syntax("a #c"), [Comment]);
        assert_eq!(syntax("! a"), [Bang]);
        assert_eq!(syntax("FOO=1 a"), [Assignment]);
        assert_eq!(syntax("a\nb"), [Newline]);
        assert_eq!(syntax("a\\\nb"), [Newline]);
        assert_eq!(syntax("a 'x\ny'"), [Newline]);
        assert_eq!(syntax("a \"x\ry\""), [Newline]);
        assert_eq!(syntax("a \u{0}b"), [Control]);
        assert_eq!(syntax("a \u{1b}[31m"), [Control, Glob('[')]);
        assert_eq!(syntax("a 'b"), [Unterminated('\'')]);
        assert_eq!(syntax("a \"b"), [Unterminated('"')]);
        assert!(syntax("a 'FOO=1'").is_empty());
    }

    #[test]
    fn quoted_words_read_back_the_same() {
        for text in [
            "plain",
            "a b",
            "it's",
            "$(id)",
            "`x`",
            "a;b",
            "~x",
            "#c",
            "",
            "é",
            "--x=y",
            "{artifact}",
            "-f={artifact}.bak",
        ] {
            let quoted = quote_word(text);
            let back = lex(&quoted);
            assert!(back.syntax.is_empty(), "{text:?} → {quoted}: {:?}", back.syntax);
            assert_eq!(back.texts(), [text], "{text:?} → {quoted}");
        }
        assert_eq!(quote_word("{artifact}"), "{artifact}");
        assert_eq!(quote_word("--file={artifact}"), "--file={artifact}");
        assert_eq!(quote_word("a b{artifact}"), "'a b'{artifact}");
    }
}
