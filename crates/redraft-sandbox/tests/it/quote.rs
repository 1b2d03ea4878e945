//! `shell_quote`: any string becomes one literal word for `sh`.

use std::path::Path;

use proptest::prelude::*;
use redraft_sandbox::shell_quote;

use crate::tempdir;

/// What `sh` makes of each quoted string: `printf '%s\0' WORD` for each, split at the NULs.
fn through_sh(strings: &[String], dir: &Path) -> Vec<String> {
    let script: String = strings.iter().map(|s| format!("printf '%s\\0' {}\n", shell_quote(s))).collect();
    let output = std::process::Command::new("sh").arg("-c").arg(&script).current_dir(dir).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    let mut words: Vec<String> = text.split('\0').map(str::to_owned).collect();
    assert_eq!(words.pop().as_deref(), Some(""), "output ends with a NUL");
    words
}

const HOSTILE: &[&str] = &[
    "$(touch pwned)",
    "`touch pwned`",
    "; touch pwned",
    "&& touch pwned",
    "| touch pwned",
    "\ntouch pwned\n",
    "'",
    "''",
    "'\\''",
    "\"",
    "\"$(touch pwned)\"",
    "$HOME",
    "${HOME}",
    "\\",
    "*",
    "?",
    "[a-z]*",
    "~",
    "~root",
    "-n",
    "--",
    "-",
    "",
    " ",
    "\t",
    "a b  c",
    "A=B",
    "#comment",
    "!",
    "{a,b}",
    "> out",
    "< /etc/passwd",
    "héllo wörld ✓ 😀",
    "\u{1b}[31mred",
    "%s %d",
];

#[test]
fn hostile_strings_come_out_of_sh_unchanged_and_run_nothing() {
    let dir = tempdir();
    let strings: Vec<String> = HOSTILE.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(through_sh(&strings, dir.path()), strings);
    // Globs would have matched this file if they had been expanded.
    std::fs::write(dir.path().join("a-file"), "").unwrap();
    assert_eq!(through_sh(&strings, dir.path()), strings);
    assert!(!dir.path().join("pwned").exists());
    assert!(!dir.path().join("out").exists());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_string_comes_out_of_sh_unchanged(
        strings in prop::collection::vec(
            prop_oneof![
                "[ -~\n\t'\"`$\\\\*?;&|<>(){}!#~é😀]{0,24}",
                any::<String>().prop_map(|s| s.replace('\0', "")),
            ],
            1..16,
        )
    ) {
        let dir = tempdir();
        prop_assert_eq!(through_sh(&strings, dir.path()), strings);
        prop_assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "sh created a file");
    }
}
