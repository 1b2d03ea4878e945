//! How a path of the workspace is shown to people. Names are kept and compared as bytes
//! everywhere; only what is printed is text. A name that is UTF-8 without control characters is
//! shown as it is; any other is quoted, as git quotes it: in double quotes, with `\"`, `\\`,
//! `\n`, `\t` and `\xNN` for the bytes that are not UTF-8 or are control characters, so two
//! names never look alike.

use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `path` for people, quoted when it must be.
pub fn shown(path: &Path) -> String {
    prefixed("", path)
}

/// `prefix` and `path` for people (`a/` and `b/` in a diff's headers), quoted together when the
/// path must be.
pub fn prefixed(prefix: &str, path: &Path) -> String {
    let bytes = path.as_os_str().as_bytes();
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.chars().any(char::is_control) => format!("{prefix}{text}"),
        _ => {
            let mut out = String::from("\"");
            out.push_str(prefix);
            for chunk in bytes.utf8_chunks() {
                for c in chunk.valid().chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        '\t' => out.push_str("\\t"),
                        c if c.is_control() && (c as u32) < 0x100 => {
                            let _ = write!(out, "\\x{:02x}", c as u32);
                        }
                        c if c.is_control() => {
                            let _ = write!(out, "\\u{{{:x}}}", c as u32);
                        }
                        c => out.push(c),
                    }
                }
                for b in chunk.invalid() {
                    let _ = write!(out, "\\x{b:02x}");
                }
            }
            out.push('"');
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    #[test]
    fn plain_names_as_they_are_others_quoted() {
        let check = |bytes: &[u8], want: &str| assert_eq!(shown(Path::new(OsStr::from_bytes(bytes))), want);
        check(b"tests/check.sh", "tests/check.sh");
        check("tests/extra-é.sh".as_bytes(), "tests/extra-é.sh");
        check(b"tests/a \"b\"\\c", "tests/a \"b\"\\c");
        check(b"tests/extra-\xff.sh", "\"tests/extra-\\xff.sh\"");
        check(b"tests/two\nlines", "\"tests/two\\nlines\"");
        check(b"tests/\x1b[31mred\\\"", "\"tests/\\x1b[31mred\\\\\\\"\"");
        assert_eq!(prefixed("a/", Path::new(OsStr::from_bytes(b"x\xfe"))), "\"a/x\\xfe\"");
        assert_eq!(prefixed("a/", Path::new("x")), "a/x");
    }
}
