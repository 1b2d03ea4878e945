//! Issues from a verifier's output: compiler diagnostics (`file:line:col: message`, rustc's
//! `--> file:line:col`, tsc's `file(line,col)`), pytest `FAILED` lines, cargo test panics,
//! Jest-style `Expected:`/`Received:` pairs — else the last lines as one issue. The text taken
//! from the output is bounded ([`MAX_TEXT_CHARS`]), and [`bound_issues`] bounds the text of any
//! list of issues (the feedback uses it with `feedback_max_chars`).

use crate::issue::Issue;

/// Issue code for a failing test.
pub const TEST_FAILED: &str = "test_failed";
/// Issue code for a compiler or linter diagnostic without its own code.
pub const DIAGNOSTIC: &str = "diagnostic";
/// Issue code for output that matched no known format.
pub const EXIT_STATUS: &str = "exit_status";

/// At most this many issues are read from one output.
pub const MAX_ISSUES: usize = 50;

/// At most this many characters of a verifier's output go into the issues read from it (paths,
/// codes and messages together); what does not fit is cut with a marker. The feedback a proposer
/// reads is bounded again, by `feedback_max_chars`.
pub const MAX_TEXT_CHARS: usize = 16_000;

/// Messages cut to fewer characters than this keep only their head.
const MIDDLE_CUT_MIN: usize = 40;

/// Read the issues in a verifier's combined output. When nothing is recognised, the last
/// `tail_lines` non-empty lines become one issue (`exit_status`), so a failure is never silent.
/// At most [`MAX_TEXT_CHARS`] characters of the output are kept in them: an issue past that
/// is cut in the middle, and a note on the last one kept says how many more were cut.
pub fn issues_from_output(output: &str, tail_lines: usize) -> Vec<Issue> {
    let mut issues = read_issues(output, tail_lines);
    let dropped = bound_issues(&mut issues, MAX_TEXT_CHARS);
    if dropped > 0
        && let Some(last) = issues.last_mut()
    {
        last.message.push_str(&format!("\n[... {dropped} more issues cut ...]"));
    }
    issues
}

/// Keeps at most `max_chars` characters of issue text (path, code, message, `expected`,
/// `found` and the hint together), in order. The issue that crosses the limit keeps its path
/// and code when they fit, loses `expected`, `found` and its hint, and has its message cut in the middle with a marker
/// `[... N characters cut ...]` (markers are not counted); the issues after it are dropped.
/// Returns how many were dropped.
pub fn bound_issues(issues: &mut Vec<Issue>, max_chars: usize) -> usize {
    let mut left = max_chars;
    for i in 0..issues.len() {
        let Some(issue) = issues.get_mut(i) else { break };
        let cost = text_chars(issue);
        if cost <= left {
            left -= cost;
            continue;
        }
        if left == 0 {
            let dropped = issues.len() - i;
            issues.truncate(i);
            return dropped;
        }
        issue.expected = None;
        issue.found = None;
        issue.hint = None;
        let (path, code) = (issue.path.chars().count(), issue.code.chars().count());
        if path + code > left {
            let path_room = path.min(left / 2);
            issue.path = cut_middle(&issue.path, path_room);
            issue.code = cut_middle(&issue.code, left - path_room);
            issue.message = cut_middle(&issue.message, 0);
        } else {
            issue.message = cut_middle(&issue.message, left - path - code);
        }
        let dropped = issues.len() - (i + 1);
        issues.truncate(i + 1);
        return dropped;
    }
    0
}

/// The characters of an issue that come from what was checked or from the checker.
fn text_chars(issue: &Issue) -> usize {
    let value_chars = |v: &Option<Box<serde_json::Value>>| v.as_ref().map_or(0, |v| v.to_string().chars().count());
    issue.path.chars().count()
        + issue.code.chars().count()
        + issue.message.chars().count()
        + value_chars(&issue.expected)
        + value_chars(&issue.found)
        + issue.hint.as_ref().map_or(0, |h| h.text.chars().count())
}

/// `text` cut to at most `max` of its characters: its head and tail around a marker saying how
/// many characters were cut, or, below a few dozen characters, its head and the marker. Known
/// secrets are taken out first, so that no cut leaves part of one.
pub fn cut_middle(text: &str, max: usize) -> String {
    let text = crate::secrets::redact(text);
    let text = text.as_ref();
    let total = text.chars().count();
    if total <= max {
        return text.to_owned();
    }
    let cut = total - max;
    let byte_at = |n: usize| text.char_indices().nth(n).map_or(text.len(), |(i, _)| i);
    if max < MIDDLE_CUT_MIN {
        return format!("{}[... {cut} characters cut ...]", &text[..byte_at(max)]);
    }
    let head = max / 2;
    let tail_start = byte_at(total - (max - head));
    format!("{}\n[... {cut} characters cut ...]\n{}", &text[..byte_at(head)], &text[tail_start..])
}

fn read_issues(output: &str, tail_lines: usize) -> Vec<Issue> {
    let lines: Vec<&str> = output.lines().collect();
    let mut issues = Vec::new();
    let mut i = 0;
    while i < lines.len() && issues.len() < MAX_ISSUES {
        let line = lines.get(i).copied().unwrap_or_default();
        let consumed = cargo_panic(&lines, i, &mut issues)
            .or_else(|| rustc(&lines, i, &mut issues))
            .or_else(|| pytest(line, &mut issues))
            .or_else(|| jest(&lines, i, &mut issues))
            .or_else(|| unix(line, &mut issues))
            .or_else(|| tsc(line, &mut issues));
        i += consumed.unwrap_or(1).max(1);
    }
    dedup(&mut issues);
    if issues.is_empty() {
        let tail: Vec<&str> = lines.iter().rev().filter(|l| !l.trim().is_empty()).take(tail_lines).copied().collect();
        if !tail.is_empty() {
            let text: Vec<&str> = tail.into_iter().rev().collect();
            issues.push(Issue::new("", EXIT_STATUS, text.join("\n")));
        }
    }
    issues
}

fn dedup(issues: &mut Vec<Issue>) {
    let mut seen: Vec<(String, String)> = Vec::new();
    issues.retain(|i| {
        let key = (i.path.clone(), i.message.clone());
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
}

/// `path:line:col: message` or `path:line: message` (gcc, clang, eslint unix, go, rustc
/// `--error-format=short`, mypy, flake8).
fn unix(line: &str, issues: &mut Vec<Issue>) -> Option<usize> {
    let (location, message) = split_location(line.trim_start())?;
    let (code, message) = severity_code(message);
    issues.push(Issue::new(location, code, message));
    Some(1)
}

fn split_location(line: &str) -> Option<(String, &str)> {
    let mut parts = line.splitn(4, ':');
    let path = parts.next()?;
    if path.is_empty() || path.contains(' ') || !path.contains(['.', '/']) {
        return None;
    }
    let row = parts.next()?;
    if row.is_empty() || !row.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let third = parts.next()?;
    match parts.next() {
        Some(rest) if !third.is_empty() && third.bytes().all(|b| b.is_ascii_digit()) => {
            let message = rest.trim();
            (!message.is_empty()).then(|| (format!("{path}:{row}:{third}"), message))
        }
        _ => {
            // `path:line: message` (the message may itself contain colons)
            let start = path.len() + 1 + row.len() + 1;
            let message = line.get(start..)?.trim();
            (!message.is_empty() && line.get(start - 1..start) == Some(":")).then(|| (format!("{path}:{row}"), message))
        }
    }
}

/// `error TS2322: Type …` → (`TS2322`, `Type …`); `error: msg` → (`diagnostic`, `msg`).
fn severity_code(message: &str) -> (String, String) {
    for severity in ["error", "warning", "fatal error"] {
        if let Some(rest) = message.strip_prefix(severity) {
            let rest = rest.trim_start();
            if let Some(rest) = rest.strip_prefix(':') {
                return (DIAGNOSTIC.to_owned(), rest.trim().to_owned());
            }
            if let Some((code, msg)) = rest.split_once(':')
                && !code.is_empty()
                && !code.contains(' ')
            {
                return (code.trim_matches(|c| c == '[' || c == ']').to_owned(), msg.trim().to_owned());
            }
        }
    }
    (DIAGNOSTIC.to_owned(), message.to_owned())
}

/// tsc's `src/a.ts(3,7): error TS2322: Type …`.
fn tsc(line: &str, issues: &mut Vec<Issue>) -> Option<usize> {
    let line = line.trim_start();
    let open = line.find('(')?;
    let close = line[open..].find("):")? + open;
    let (row, col) = line.get(open + 1..close)?.split_once(',')?;
    if row.parse::<u32>().is_err() || col.parse::<u32>().is_err() || line[..open].contains(' ') {
        return None;
    }
    let (code, message) = severity_code(line.get(close + 2..)?.trim());
    issues.push(Issue::new(format!("{}:{row}:{col}", &line[..open]), code, message));
    Some(1)
}

/// rustc's human format: `error[E0308]: mismatched types` followed by `  --> src/x.rs:2:5`.
fn rustc(lines: &[&str], i: usize, issues: &mut Vec<Issue>) -> Option<usize> {
    let line = lines.get(i)?;
    let (code, message) = if let Some(rest) = line.strip_prefix("error[") {
        let (code, msg) = rest.split_once("]:")?;
        (code.to_owned(), msg.trim())
    } else if let Some(msg) = line.strip_prefix("error: ") {
        (DIAGNOSTIC.to_owned(), msg.trim())
    } else {
        return None;
    };
    let arrow = lines.get(i + 1)?.trim_start().strip_prefix("--> ")?;
    issues.push(Issue::new(arrow.trim(), code, message));
    Some(2)
}

/// pytest's short summary: `FAILED tests/test_a.py::test_b - AssertionError: assert 1 == 2`.
fn pytest(line: &str, issues: &mut Vec<Issue>) -> Option<usize> {
    let rest = line.trim_start().strip_prefix("FAILED ")?;
    let (test, message) = match rest.split_once(" - ") {
        Some((t, m)) => (t.trim(), m.trim()),
        None => (rest.trim(), "failed"),
    };
    if !test.contains("::") {
        return None;
    }
    issues.push(Issue::new(test, TEST_FAILED, message));
    Some(1)
}

/// cargo test: `---- name stdout ----`, then `thread 'name' panicked at file:line:col:` and
/// the panic message (with `left:`/`right:` for assertions).
fn cargo_panic(lines: &[&str], i: usize, issues: &mut Vec<Issue>) -> Option<usize> {
    let line = lines.get(i)?.trim();
    let (name, start) = if let Some(name) = line.strip_prefix("---- ").and_then(|l| l.strip_suffix(" stdout ----")) {
        (name.to_owned(), i + 1)
    } else if is_panic_line(line) {
        (line.strip_prefix("thread '")?.split('\'').next()?.to_owned(), i)
    } else {
        return None;
    };
    let mut j = start;
    let mut location = String::new();
    let mut message: Vec<String> = Vec::new();
    while let Some(l) = lines.get(j) {
        let t = l.trim();
        // A block ends where the next one begins, so that no line is read again by every
        // header before it: output made of panic lines is read in one pass.
        if j > i && (t.starts_with("---- ") || t == "failures:" || t.starts_with("test result:"))
            || j > start && is_panic_line(t)
        {
            break;
        }
        if let Some(at) = t.split("' panicked at ").nth(1) {
            let at = at.trim_end_matches(':');
            // Rust ≥ 1.73: `panicked at src/lib.rs:10:5:` and the message on the next lines.
            match at.split_once(":\n") {
                _ if at.contains(' ') => {
                    // older form: `panicked at 'msg', src/lib.rs:10:5`
                    if let Some((msg, loc)) = at.rsplit_once(", ") {
                        message.push(msg.trim_matches('\'').to_owned());
                        location = loc.to_owned();
                    }
                }
                _ => location = at.to_owned(),
            }
        } else if !t.is_empty() && !t.starts_with("note:") && !t.starts_with("stack backtrace") {
            if t.starts_with("thread '") {
                // a panic line without a recognisable location
            } else if message.len() < 6 {
                message.push(t.to_owned());
            }
        }
        j += 1;
    }
    if location.is_empty() && message.is_empty() {
        return None;
    }
    let text = if message.is_empty() { "panicked".to_owned() } else { message.join(" ") };
    issues.push(Issue::new(
        if location.is_empty() { name.clone() } else { location },
        TEST_FAILED,
        format!("{name}: {text}"),
    ));
    Some(j - i)
}

/// `thread 'name' panicked at …`: where a panic is reported.
fn is_panic_line(line: &str) -> bool {
    line.starts_with("thread '") && line.contains("' panicked at ")
}

/// Jest/Vitest: `FAIL path` followed (within a block) by `Expected: …` and `Received: …`.
fn jest(lines: &[&str], i: usize, issues: &mut Vec<Issue>) -> Option<usize> {
    let file = lines.get(i)?.trim().strip_prefix("FAIL ")?.trim();
    let mut j = i + 1;
    let mut expected = None;
    let mut received = None;
    let mut first = None;
    while let Some(l) = lines.get(j) {
        let t = l.trim();
        if t.starts_with("FAIL ") || t.starts_with("PASS ") {
            break;
        }
        if let Some(e) = t.strip_prefix("Expected:") {
            expected = Some(e.trim().to_owned());
        } else if let Some(r) = t.strip_prefix("Received:") {
            received = Some(r.trim().to_owned());
        } else if first.is_none() && !t.is_empty() {
            first = Some(t.trim_start_matches('●').trim().to_owned());
        }
        j += 1;
    }
    let message = match (&expected, &received) {
        (Some(e), Some(r)) => format!("expected {e}, received {r}"),
        (Some(e), None) => format!("expected {e}"),
        _ => first.unwrap_or_else(|| "failed".to_owned()),
    };
    let mut issue = Issue::new(file, TEST_FAILED, message);
    issue.expected = expected.map(|e| Box::new(serde_json::Value::String(e)));
    issue.found = received.map(|r| Box::new(serde_json::Value::String(r)));
    issues.push(issue);
    Some(j - i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(output: &str, expect: &[(&str, &str, &str)]) {
        let got: Vec<(String, String, String)> =
            issues_from_output(output, 20).into_iter().map(|i| (i.path, i.code, i.message)).collect();
        let expect: Vec<(String, String, String)> =
            expect.iter().map(|(p, c, m)| (p.to_string(), c.to_string(), m.to_string())).collect();
        assert_eq!(got, expect, "\n{output}");
    }

    #[test]
    fn compiler_and_linter_diagnostics() {
        check(
            "src/main.c:3:5: error: 'x' undeclared (first use in this function)\nsrc/main.c:9: warning: unused variable",
            &[
                ("src/main.c:3:5", DIAGNOSTIC, "'x' undeclared (first use in this function)"),
                ("src/main.c:9", DIAGNOSTIC, "unused variable"),
            ],
        );
        check(
            "src/app.ts(12,7): error TS2322: Type 'string' is not assignable to type 'number'.",
            &[("src/app.ts:12:7", "TS2322", "Type 'string' is not assignable to type 'number'.")],
        );
        check(
            "error[E0308]: mismatched types\n  --> src/lib.rs:4:18\n   |\n4  |     let x: u32 = \"a\";\n",
            &[("src/lib.rs:4:18", "E0308", "mismatched types")],
        );
        check(
            "/tmp/p/index.js:2:11: Unexpected token [Error/no-unexpected]",
            &[("/tmp/p/index.js:2:11", DIAGNOSTIC, "Unexpected token [Error/no-unexpected]")],
        );
    }

    #[test]
    fn pytest_failures() {
        check(
            "=========================== short test summary info ============================\nFAILED tests/test_calc.py::test_add - assert 3 == 4\nFAILED tests/test_calc.py::test_div - ZeroDivisionError: division by zero\n========================= 2 failed, 3 passed in 0.05s =========================",
            &[
                ("tests/test_calc.py::test_add", TEST_FAILED, "assert 3 == 4"),
                ("tests/test_calc.py::test_div", TEST_FAILED, "ZeroDivisionError: division by zero"),
            ],
        );
    }

    #[test]
    fn cargo_test_panics() {
        let out = "running 2 tests\ntest tests::adds ... FAILED\n\nfailures:\n\n---- tests::adds stdout ----\n\nthread 'tests::adds' panicked at src/lib.rs:10:9:\nassertion `left == right` failed\n  left: 3\n right: 4\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\n\nfailures:\n    tests::adds\n\ntest result: FAILED. 1 passed; 1 failed";
        check(
            out,
            &[("src/lib.rs:10:9", TEST_FAILED, "tests::adds: assertion `left == right` failed left: 3 right: 4")],
        );
    }

    #[test]
    fn each_panic_is_read_apart_and_output_of_panic_lines_is_read_once() {
        check(
            "thread 'a' panicked at src/a.rs:1:2:\nboom a\nthread 'b' panicked at src/b.rs:3:4:\nboom b",
            &[("src/a.rs:1:2", TEST_FAILED, "a: boom a"), ("src/b.rs:3:4", TEST_FAILED, "b: boom b")],
        );
        // Panic lines without a location: each ends where the next begins (read through to the
        // end of the output from each of them, 1 MiB of them took minutes).
        let out = "thread 'a' panicked at somewhere else\n".repeat(40_000);
        let issues = issues_from_output(&out, 2);
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].code, EXIT_STATUS);
    }

    #[test]
    fn jest_expected_received() {
        let out = "FAIL src/auth/login.test.ts\n  ● login › returns a token\n    Expected: token to contain userId\n    Received: undefined\n";
        let issues = issues_from_output(out, 20);
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].path, "src/auth/login.test.ts");
        assert_eq!(issues[0].message, "expected token to contain userId, received undefined");
        assert_eq!(issues[0].found.as_deref(), Some(&serde_json::json!("undefined")));
    }

    #[test]
    fn anything_else_is_the_tail() {
        let out = (1..=30).map(|n| format!("line {n}")).collect::<Vec<_>>().join("\n");
        let issues = issues_from_output(&out, 20);
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].code, EXIT_STATUS);
        assert!(issues[0].message.starts_with("line 11\n") && issues[0].message.ends_with("line 30"));
        assert!(issues_from_output("", 20).is_empty());
        // Prose with colons is not a diagnostic.
        check("Note: this is fine: really", &[("", EXIT_STATUS, "Note: this is fine: really")]);
        check("http://example.com:8080: refused", &[("", EXIT_STATUS, "http://example.com:8080: refused")]);
    }

    #[test]
    fn a_huge_output_gives_bounded_issues_that_keep_the_end() {
        // One endless line, then a summary: the tail issue keeps the summary.
        let out = format!("{}\nsummary: 3 failed", "x".repeat(1 << 20));
        let issues = issues_from_output(&out, 20);
        assert_eq!(issues.len(), 1);
        let message = &issues[0].message;
        assert!(message.chars().filter(|&c| c == 'x').count() <= MAX_TEXT_CHARS, "{}", message.len());
        assert!(message.ends_with("\nsummary: 3 failed"), "{}", &message[message.len() - 40..]);
        assert!(
            message.contains(&format!(
                "[... {} characters cut ...]",
                (1 << 20) + 18 - (MAX_TEXT_CHARS - EXIT_STATUS.len())
            ))
        );

        // Many long diagnostics: the text is bounded and the cut is said.
        let out: Vec<String> = (1..=40).map(|n| format!("src/a.c:{n}:1: error: {}", "y".repeat(1000))).collect();
        let out = out.join("\n");
        let issues = issues_from_output(&out, 20);
        let kept: usize = issues.iter().map(|i| i.path.len() + i.code.len() + i.message.matches('y').count()).sum();
        assert!(kept <= MAX_TEXT_CHARS, "{kept}");
        assert!(issues.len() < 40);
        assert!(issues.last().unwrap().message.ends_with("more issues cut ...]"), "{:?}", issues.last());
    }

    #[test]
    fn bounding_keeps_whole_issues_cuts_the_one_that_crosses_and_drops_the_rest() {
        let mut issues = vec![
            Issue::new("/a", "type", "0123456789"),
            Issue::new("/b", "rule:x", "a message that is far too long to fit in what is left of the budget"),
            Issue::new("/c", "type", "dropped"),
        ];
        issues[1].found = Some(Box::new(serde_json::json!("found")));
        let dropped = bound_issues(&mut issues, 16 + 8 + 10);
        assert_eq!(dropped, 1);
        assert_eq!(issues.len(), 2);
        assert_eq!(issues[0].message, "0123456789");
        assert_eq!((issues[1].path.as_str(), issues[1].code.as_str()), ("/b", "rule:x"));
        assert_eq!(issues[1].message, "a message [... 57 characters cut ...]");
        assert_eq!(issues[1].found, None);

        let mut nothing_left = vec![Issue::new("", "c", "1234"), Issue::new("", "c", "more")];
        assert_eq!(bound_issues(&mut nothing_left, 5), 1);
        assert_eq!(nothing_left.len(), 1);
    }

    #[test]
    fn middle_cuts_keep_head_and_tail_and_count_characters() {
        let text = format!("{}{}", "é".repeat(50), "z".repeat(50));
        let cut = cut_middle(&text, 40);
        assert_eq!(cut, format!("{}\n[... 60 characters cut ...]\n{}", "é".repeat(20), "z".repeat(20)));
        assert_eq!(cut_middle("short", 40), "short");
        assert_eq!(cut_middle("abcdef", 2), "ab[... 4 characters cut ...]");
    }
}
