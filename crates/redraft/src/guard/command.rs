//! `exec_allow`: which `exec:` commands a request from the network may run.
//!
//! The grammar (also in the README and SECURITY.md):
//!
//! - An entry is a command line, split into words by POSIX shell rules (quotes group words).
//! - A requested command is split the same way and compared with each entry **word by word**.
//!   The program must be the same word: `/usr/bin/python3` is not `python3`.
//! - In an entry, the word `*` matches exactly one word of the request, and a final `**`
//!   matches any number of further words (none included). A wildcard matches only a *plain*
//!   word: ASCII letters, digits and `_ . / : @ % + , -`, not starting with `-`, `+` or `@` (so
//!   it never admits an option such as `--rootdir=/`, a `+command` or an `@file` of options),
//!   no `=` anywhere (so never a `NAME=value` assignment, which `make`, `env` and others read as
//!   a variable that may run a program), not an absolute path, no `..` segment. It never
//!   admits the `{artifact}` placeholder: the artifact is written by the model, so an entry
//!   says where it may go by naming `{artifact}` itself (`python3 -m py_compile {artifact}`),
//!   and `pytest -q **` cannot be turned into running the model's code. Wildcards match whole
//!   words only: `test*` in an entry is an error. The program (first word) cannot be a
//!   wildcard.
//! - A request that holds shell syntax — `;` `&` `|` `<` `>` `(` `)`, `$` or a backtick outside
//!   single quotes, an unquoted glob or brace, a leading `~` `#` `!`, `NAME=value` before the
//!   program, a line break or another control character — is refused, unless an entry is the
//!   exact same string (then it runs as written: the operator wrote it).
//! - What runs is the request's words, each quoted for `sh` again, so what the shell executes
//!   is exactly what was compared.

use super::shell::{self, Lexed, ShellSyntax};

/// One `exec_allow` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    /// The entry as written.
    text: String,
    /// Its words; `None` when the entry holds shell syntax and so admits only itself.
    pattern: Option<Vec<Pattern>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Word(String),
    /// `*`: one plain word.
    One,
    /// A final `**`: any number of plain words.
    Rest,
}

/// The parsed `exec_allow` list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandAllowList {
    rules: Vec<Rule>,
}

/// Why an `exec_allow` entry cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the `exec_allow` entry `{entry}` {problem}\nhint: {hint}")]
pub struct BadEntry {
    pub entry: String,
    pub problem: String,
    pub hint: String,
}

/// Why a requested command is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandRefusal {
    /// The command is empty.
    Empty,
    /// The command holds shell syntax and no entry is exactly the same string.
    Syntax(ShellSyntax),
    /// No entry matches its words.
    NoMatch,
}

impl CommandAllowList {
    /// Parse every entry; a malformed one is an error naming it.
    pub fn parse(entries: &[String]) -> Result<Self, BadEntry> {
        let rules = entries.iter().map(|e| Rule::parse(e)).collect::<Result<_, _>>()?;
        Ok(Self { rules })
    }

    /// Whether the list is empty (nothing may run).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The command to run for `requested`, or why it is refused.
    pub fn admit(&self, requested: &str) -> Result<String, CommandRefusal> {
        // An entry written with shell syntax admits exactly itself. (An entry without is only
        // ever matched word by word: its `*` is a wildcard, not a glob for the shell.)
        if let Some(rule) = self.rules.iter().find(|r| r.pattern.is_none() && r.text == requested) {
            return Ok(rule.text.clone());
        }
        let lexed = shell::lex(requested);
        if let Some(found) = lexed.syntax.first() {
            return Err(CommandRefusal::Syntax(found.syntax));
        }
        if lexed.words.is_empty() {
            return Err(CommandRefusal::Empty);
        }
        let words = lexed.texts();
        if self.rules.iter().any(|r| r.matches(&words)) {
            Ok(words.iter().map(|w| shell::quote_word(w)).collect::<Vec<_>>().join(" "))
        } else {
            Err(CommandRefusal::NoMatch)
        }
    }
}

impl Rule {
    fn parse(entry: &str) -> Result<Self, BadEntry> {
        let bad = |problem: &str, hint: &str| BadEntry {
            entry: entry.to_owned(),
            problem: problem.to_owned(),
            hint: hint.to_owned(),
        };
        let Lexed { words, syntax } = shell::lex(entry);
        if words.is_empty() {
            return Err(bad("is empty", "remove it, or write the command it admits"));
        }
        let wildcard = |i: usize| words.get(i).is_some_and(|w| !w.quoted && (w.text == "*" || w.text == "**"));
        let mut exact_only = false;
        for found in &syntax {
            match found.syntax {
                ShellSyntax::Glob('*') if wildcard(found.word) => {}
                ShellSyntax::Glob(_) | ShellSyntax::Brace(_) => {
                    return Err(bad(
                        "has a wildcard inside a word; wildcards match whole words only",
                        "write `*` as a word of its own for one argument, or a final `**` for any number of arguments (e.g. `cargo test **`); quote a character to mean it literally",
                    ));
                }
                ShellSyntax::Unterminated(_) => return Err(bad("has an unterminated quote", "close the quote")),
                _ => exact_only = true,
            }
        }
        if exact_only {
            // Shell syntax: the entry admits a request that is exactly this string.
            return Ok(Self { text: entry.to_owned(), pattern: None });
        }
        if wildcard(0) {
            return Err(bad(
                "starts with a wildcard; the program must be named",
                "write the program as its first word, e.g. `pytest -q *`",
            ));
        }
        let last = words.len() - 1;
        let mut pattern = Vec::with_capacity(words.len());
        for (i, w) in words.iter().enumerate() {
            pattern.push(match w.text.as_str() {
                "*" if wildcard(i) => Pattern::One,
                "**" if wildcard(i) && i == last => Pattern::Rest,
                "**" if wildcard(i) => {
                    return Err(bad("has `**` before its last word", "`**` matches the remaining words; put it last"));
                }
                text => Pattern::Word(text.to_owned()),
            });
        }
        Ok(Self { text: entry.to_owned(), pattern: Some(pattern) })
    }

    fn matches(&self, words: &[&str]) -> bool {
        let Some(pattern) = &self.pattern else { return false };
        let mut rest = words;
        for p in pattern {
            match p {
                Pattern::Word(w) => match rest.split_first() {
                    Some((first, tail)) if first == w => rest = tail,
                    _ => return false,
                },
                Pattern::One => match rest.split_first() {
                    Some((first, tail)) if plain(first) => rest = tail,
                    _ => return false,
                },
                Pattern::Rest => return rest.iter().all(|w| plain(w)),
            }
        }
        rest.is_empty()
    }
}

/// A word a wildcard may match: ASCII letters, digits and `_ . / : @ % + , -` — not an option
/// (`-x`, `+x`), not a file of options (`@file`), not an assignment (no `=`), not an absolute
/// path, no `..` segment, not the `{artifact}` placeholder (the braces are not plain).
fn plain(word: &str) -> bool {
    !word.is_empty()
        && word.chars().all(|c| c.is_ascii_alphanumeric() || "_./:@%+,-".contains(c))
        && !word.starts_with(['-', '+', '@', '/'])
        && !word.split('/').any(|segment| segment == "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> CommandAllowList {
        CommandAllowList::parse(&entries.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn entries_match_word_by_word() {
        let l = list(&[
            "python3 -m py_compile *",
            "python3 -m py_compile {artifact}",
            "pytest -q **",
            "cargo test",
            "check --strict {artifact}",
        ]);
        assert_eq!(l.admit("python3 -m py_compile x.py"), Ok("python3 -m py_compile x.py".into()));
        assert_eq!(l.admit("python3  -m 'py_compile' {artifact}"), Ok("python3 -m py_compile {artifact}".into()));
        assert_eq!(l.admit("pytest -q"), Ok("pytest -q".into()));
        assert_eq!(l.admit("pytest -q tests/a.py tests/b.py::t"), Ok("pytest -q tests/a.py tests/b.py::t".into()));
        assert_eq!(l.admit("cargo test"), Ok("cargo test".into()));
        assert_eq!(l.admit("pytest -q tests/a+b.py node@18"), Ok("pytest -q tests/a+b.py node@18".into()));
        assert_eq!(l.admit("check --strict {artifact}"), Ok("check --strict {artifact}".into()));
        for refused in [
            "python3 -m py_compile",
            "python3 -m py_compile a b",
            "python3 -m py_compile --help",
            "python3 -m py_compile /etc/passwd",
            "python3 -m py_compile ../secret.py",
            "/usr/bin/python3 -m py_compile x.py",
            "pytest -q --rootdir=/ x",
            "pytest -q -p evil",
            "pytest -q x=1",
            "pytest -q @options",
            "pytest -q +x",
            "cargo test --workspace",
            "cargo testx",
            "check --strict {artifact} --fix",
            // The model's artifact goes only where an entry names `{artifact}`.
            "pytest -q {artifact}",
            "pytest -q tests {artifact}",
        ] {
            assert_eq!(l.admit(refused), Err(CommandRefusal::NoMatch), "{refused}");
        }
    }

    #[test]
    fn shell_syntax_only_with_an_identical_entry() {
        let l = list(&["pytest -q **", "python3 -m py_compile \"$ARTIFACT\""]);
        assert_eq!(l.admit("python3 -m py_compile \"$ARTIFACT\""), Ok("python3 -m py_compile \"$ARTIFACT\"".into()));
        assert_eq!(
            l.admit("python3 -m py_compile  \"$ARTIFACT\""),
            Err(CommandRefusal::Syntax(ShellSyntax::Expansion))
        );
        assert_eq!(l.admit("pytest -q; id"), Err(CommandRefusal::Syntax(ShellSyntax::Separator(';'))));
        assert_eq!(l.admit("pytest -q x\nid"), Err(CommandRefusal::Syntax(ShellSyntax::Newline)));
        assert_eq!(l.admit("pytest -q $(id)"), Err(CommandRefusal::Syntax(ShellSyntax::Expansion)));
        assert_eq!(l.admit("pytest -q 'a;b'"), Err(CommandRefusal::NoMatch));
        // A request that spells a wildcard entry is a glob for the shell, not the entry.
        assert_eq!(l.admit("pytest -q **"), Err(CommandRefusal::Syntax(ShellSyntax::Glob('*'))));
        assert_eq!(l.admit("  "), Err(CommandRefusal::Empty));
    }

    #[test]
    fn bad_entries_are_named() {
        let err = |e: &str| CommandAllowList::parse(&[e.to_owned()]).unwrap_err().to_string();
        assert!(err("cargo test*").contains("whole words only"), "{}", err("cargo test*"));
        assert!(err("* -q").contains("program must be named"));
        assert!(err("pytest ** x").contains("put it last"));
        assert!(err("").contains("is empty"));
        assert!(err("pytest 'x").contains("unterminated"));
        // A quoted star is a literal word.
        let l = list(&["grep -c '*' {artifact}"]);
        assert_eq!(l.admit("grep -c '*' {artifact}"), Ok("grep -c '*' {artifact}".into()));
        assert_eq!(l.admit("grep -c x {artifact}"), Err(CommandRefusal::NoMatch));
    }
}
