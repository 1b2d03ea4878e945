//! Quoting for `sh`.

/// Quotes `s` as one literal word for a POSIX shell: no expansion, splitting or globbing.
///
/// Words made only of letters, digits and `_-./,:+@%` are returned as they are; anything else is
/// wrapped in single quotes, each `'` written as `'\''`. (A NUL byte cannot be passed to a
/// program at all; spawning a command containing one fails.)
pub fn shell_quote(s: &str) -> String {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"_-./,:+@%".contains(&b);
    if !s.is_empty() && s.bytes().all(plain) {
        return s.to_owned();
    }
    let mut quoted = String::with_capacity(s.len() + 2);
    quoted.push('\'');
    for c in s.chars() {
        if c == '\'' {
            quoted.push_str(r"'\''");
        } else {
            quoted.push(c);
        }
    }
    quoted.push('\'');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_stay_plain_and_the_rest_is_single_quoted() {
        assert_eq!(shell_quote("src/main.rs"), "src/main.rs");
        assert_eq!(shell_quote("-n"), "-n");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("A=b"), "'A=b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$(x)"), "'$(x)'");
    }
}
