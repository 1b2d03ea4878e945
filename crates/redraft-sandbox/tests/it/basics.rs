//! Exit codes, streams, stdin, env, workdir, output caps, and errors before anything runs.

use std::time::Duration;

use redraft_sandbox::{Command, SandboxError, run};

use crate::tempdir;

#[tokio::test]
async fn exit_code_and_separate_streams() {
    let dir = tempdir();
    let output = run(&Command::shell("echo out; echo err >&2; exit 3", dir.path())).await.unwrap();
    assert_eq!((output.status, output.signal), (Some(3), None));
    assert_eq!((output.stdout.as_str(), output.stderr.as_str()), ("out\n", "err\n"));
    assert!(!output.success() && !output.timed_out);
    assert!(!output.stdout_truncated && !output.stderr_truncated);
    assert_eq!(output.combined(), "out\nerr\n");

    let output = run(&Command::shell("printf ok", dir.path())).await.unwrap();
    assert!(output.success());
}

#[tokio::test]
async fn combined_separates_stdout_without_a_final_newline() {
    let dir = tempdir();
    let output = run(&Command::shell("printf out; printf err >&2", dir.path())).await.unwrap();
    assert_eq!(output.combined(), "out\nerr");
}

#[tokio::test]
async fn death_by_signal_is_reported_as_a_signal() {
    let dir = tempdir();
    let output = run(&Command::shell("kill -USR1 $$", dir.path())).await.unwrap();
    assert_eq!((output.status, output.signal), (None, Some(10)));
    assert!(!output.success() && !output.timed_out);
}

#[tokio::test]
async fn stdin_is_delivered_then_closed() {
    let dir = tempdir();
    let output = run(&Command::shell("cat", dir.path()).stdin("hello\nworld")).await.unwrap();
    assert_eq!(output.stdout, "hello\nworld");

    // More than a pipe buffer, written while the output is being read.
    let big = vec![b'x'; 1_000_000];
    let output = run(&Command::shell("wc -c", dir.path()).stdin(big.clone())).await.unwrap();
    assert_eq!(output.stdout.trim(), "1000000");

    // A command that never reads its stdin is fine.
    let output = run(&Command::shell("exit 0", dir.path()).stdin(big)).await.unwrap();
    assert!(output.success(), "{output:?}");
}

#[tokio::test]
async fn no_stdin_is_dev_null() {
    let dir = tempdir();
    let output = run(&Command::shell("cat; echo end", dir.path()).timeout(Duration::from_secs(10))).await.unwrap();
    assert_eq!(output.stdout, "end\n");
    assert!(!output.timed_out);
}

#[tokio::test]
async fn env_is_set_and_workdir_honoured() {
    let dir = tempdir();
    let cmd = Command::shell(r#"printf '%s|%s' "$GREETING" "$(pwd -P)""#, dir.path()).env("GREETING", "hi there");
    let output = run(&cmd).await.unwrap();
    let real = dir.path().canonicalize().unwrap();
    assert_eq!(output.stdout, format!("hi there|{}", real.display()));
}

#[tokio::test]
async fn argv_runs_without_a_shell() {
    let dir = tempdir();
    let cmd = Command::argv(["printf", "%s|", "a b", "$(touch pwned)", "*", "'"], dir.path());
    let output = run(&cmd).await.unwrap();
    assert_eq!(output.stdout, "a b|$(touch pwned)|*|'|");
    assert!(!dir.path().join("pwned").exists());
}

/// The kept text of a stream that was cut: (head, bytes cut, tail).
fn split_at_marker(text: &str) -> (&str, u64, &str) {
    let (head, rest) = text.split_once("\n[... ").expect("a cut marker");
    let (cut, tail) = rest.split_once(" bytes cut ...]\n").expect("a cut marker");
    (head, cut.parse().unwrap(), tail)
}

#[tokio::test]
async fn output_beyond_the_cap_is_cut_in_the_middle_and_flagged_without_blocking_the_command() {
    let dir = tempdir();
    let cmd = Command::shell("yes | head -c 3000000; echo done >&2", dir.path()).timeout(Duration::from_secs(20));
    let output = run(&cmd).await.unwrap();
    assert!(output.success() && !output.timed_out, "{:?}", (output.status, output.signal, &output.stderr));
    // The short stream is kept whole; the long one gets the rest of the cap.
    assert_eq!((output.stderr.as_str(), output.stderr_truncated), ("done\n", false));
    assert!(output.stdout_truncated);
    assert!(output.stdout.len() + output.stderr.len() <= 1 << 20, "{}", output.stdout.len());
    assert!(output.stdout.len() > (1 << 20) - 100, "the cap is used: {}", output.stdout.len());
    let (head, cut, tail) = split_at_marker(&output.stdout);
    assert!(
        head.starts_with("y\ny\n") && tail.ends_with("y\ny\n"),
        "{:?} … {:?}",
        &head[..10],
        &tail[tail.len() - 10..]
    );
    assert!(head.bytes().chain(tail.bytes()).all(|b| b == b'y' || b == b'\n'));
    assert_eq!(head.len() as u64 + cut + tail.len() as u64, 3_000_000);
}

#[tokio::test]
async fn one_cap_covers_stdout_and_stderr_together() {
    let dir = tempdir();
    let script = "head -c 3000000 /dev/zero | tr '\\0' o; head -c 3000000 /dev/zero | tr '\\0' e >&2";
    let output = run(&Command::shell(script, dir.path()).output_cap(1000)).await.unwrap();
    assert!(output.success(), "{:?}", (output.status, output.signal));
    assert!(output.stdout_truncated && output.stderr_truncated);
    assert!(
        output.stdout.len() <= 500 && output.stderr.len() <= 500,
        "{} + {}",
        output.stdout.len(),
        output.stderr.len()
    );
    for (text, c) in [(&output.stdout, 'o'), (&output.stderr, 'e')] {
        let (head, cut, tail) = split_at_marker(text);
        assert!(head.chars().chain(tail.chars()).all(|x| x == c) && !head.is_empty() && !tail.is_empty(), "{text:?}");
        assert_eq!(head.len() as u64 + cut + tail.len() as u64, 3_000_000);
    }
    // Exactly at the cap is not cut.
    let output = run(&Command::shell("printf 12345; printf 67890 >&2", dir.path()).output_cap(10)).await.unwrap();
    assert_eq!((output.stdout.as_str(), output.stderr.as_str()), ("12345", "67890"));
    assert!(!output.stdout_truncated && !output.stderr_truncated);
}

#[tokio::test]
async fn a_gibibyte_of_output_is_captured_within_the_default_cap_with_its_end() {
    let dir = tempdir();
    let script = "head -c 1073741824 /dev/zero | tr '\\0' x; echo; echo 'FAILED tests/test_a.py::test_b - assert 1 == 2'; head -c 5000000 /dev/zero | tr '\\0' y >&2";
    let output = run(&Command::shell(script, dir.path()).timeout(Duration::from_secs(300))).await.unwrap();
    assert!(output.success() && !output.timed_out, "{:?}", (output.status, output.signal, output.duration));
    assert!(output.stdout_truncated && output.stderr_truncated);
    let kept = output.stdout.len() + output.stderr.len();
    println!("captured {kept} bytes of 1078741874 ({} stdout, {} stderr)", output.stdout.len(), output.stderr.len());
    assert!(kept <= 1 << 20, "{kept}");
    assert!(
        output.stdout.ends_with("\nFAILED tests/test_a.py::test_b - assert 1 == 2\n"),
        "the summary at the end is kept"
    );
    let (_, cut, _) = split_at_marker(&output.stdout);
    assert!(cut > 1_000_000_000, "{cut}");
}

#[tokio::test]
async fn an_empty_argv_is_refused() {
    let dir = tempdir();
    let err = run(&Command::argv(Vec::<String>::new(), dir.path())).await.unwrap_err();
    assert!(matches!(err, SandboxError::EmptyCommand), "{err}");
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_error_naming_it() {
    let dir = tempdir();
    let err = run(&Command::argv(["redraft-no-such-program"], dir.path())).await.unwrap_err();
    assert!(matches!(err, SandboxError::Spawn { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("`redraft-no-such-program`") && message.contains("hint:"), "{message}");
}

#[tokio::test]
async fn a_missing_workdir_is_reported_as_such() {
    let dir = tempdir();
    let missing = dir.path().join("nope");
    let err = run(&Command::shell("touch marker", &missing)).await.unwrap_err();
    assert!(matches!(err, SandboxError::Workdir { .. }), "{err}");
    assert!(err.to_string().contains(&format!("`{}`", missing.display())), "{err}");
}
