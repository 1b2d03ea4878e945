//! `exec:` evaluators and command proposers through `redraft run`.

use serde_json::Value;

use crate::{output, redraft, write};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_artifacts_never_execute() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = [
        "$(touch pwned1)",
        "`touch pwned2`",
        "'; touch pwned3; echo '",
        "\"; touch pwned4; echo \"",
        "line one\ntouch pwned5\n",
        "{artifact} $(touch pwned6)",
    ];
    let replies: String = hostile.iter().map(|h| serde_json::to_string(h).unwrap() + "\n").collect();
    write(dir.path(), "replies.jsonl", &replies);
    let mut c = redraft(dir.path());
    c.args([
        "run",
        "--text",
        "--model",
        "mock/replies.jsonl",
        "--prompt",
        "say something",
        "--max-iterations",
        "6",
        "--repeat-limit",
        "0",
        "--artifact-ext",
        "py",
        "--eval",
        "exec:cat {artifact} >> seen.txt; printf '\\n--\\n' >> seen.txt; echo \"$ARTIFACT\" >> names.txt; exit 1",
        "--json",
    ]);
    let out = output(c).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["iterations"], 6);
    for n in 1..=6 {
        assert!(!dir.path().join(format!("pwned{n}")).exists(), "pwned{n} was created");
    }
    let seen = std::fs::read_to_string(dir.path().join("seen.txt")).unwrap();
    for h in hostile {
        assert!(seen.contains(h), "the verifier saw the artifact verbatim: {seen}");
    }
    let names = std::fs::read_to_string(dir.path().join("names.txt")).unwrap();
    assert!(names.lines().all(|n| n.ends_with("/artifact.py")), "{names}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_issues_are_read_from_compiler_style_output_and_graded_verdicts_count() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "replies.jsonl", "\"{\\\"n\\\": 1}\"\n\"{\\\"n\\\": 2}\"\n");
    let check = write(
        dir.path(),
        "check.sh",
        "n=$(sed -n 's/.*\"n\": *\\([0-9]*\\).*/\\1/p' \"$1\")\nif [ \"$n\" = 2 ]; then echo '{\"score\": 1.0, \"issues\": []}'; else echo \"$1:1:7: n must be 2, not $n\"; exit 3; fi\n",
    );
    let mut c = redraft(dir.path());
    c.args([
        "run",
        "--model",
        "mock/replies.jsonl",
        "--prompt",
        "n?",
        "--eval",
        &format!("exec:sh {} {{artifact}}", check.display()),
        "--json",
    ]);
    let out = output(c).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    let issue = &result["history"][0]["issues"][0];
    assert_eq!(issue["message"], "n must be 2, not 1");
    assert!(issue["path"].as_str().unwrap().ends_with("artifact.json:1:7"), "{issue}");
    assert_eq!(result["history"][1]["status"], "accepted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ad_hoc_agent_proposes_with_fresh_prompts_and_reported_usage() {
    let dir = tempfile::tempdir().unwrap();
    let agent = write(
        dir.path(),
        "agent.sh",
        "#!/bin/sh\nprompt=$(cat)\necho '{\"usage\": {\"input_tokens\": 40, \"output_tokens\": 5, \"cost_usd\": 0.01}}' >&2\ncase \"$prompt\" in *'Prior attempts'*) echo '{\"city\": \"Toledo\"}' ;; *) echo '{\"city\": 7}' ;; esac\n",
    );
    write(
        dir.path(),
        "s.json",
        r#"{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}"#,
    );
    let mut c = redraft(dir.path());
    c.args(["run", "--prompt", "Where?", "--schema", "s.json", "--json", "--", "sh", agent.to_str().unwrap()]);
    let out = output(c).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["iterations"], 2);
    assert_eq!(result["history"][0]["tokens_in"], 40);
    assert_eq!(result["metrics"]["tokens_estimated"], false);
    assert!((result["metrics"]["cost_usd"].as_f64().unwrap() - 0.02).abs() < 1e-9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_that_needs_bubblewrap_is_refused_up_front_when_it_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "replies.jsonl", "\"hello\"\n");
    // A PATH with `sh` and friends but no `bwrap`.
    let mut c = redraft(dir.path());
    c.env("PATH", "/usr/bin:/bin").args([
        "run",
        "--text",
        "--model",
        "mock/replies.jsonl",
        "--prompt",
        "x",
        "--eval",
        "exec:touch ran",
        "--sandbox",
        r#"{"network": false}"#,
    ]);
    let out = output(c).await;
    if std::path::Path::new("/usr/bin/bwrap").exists() || std::path::Path::new("/bin/bwrap").exists() {
        // bubblewrap is installed system-wide (CI): the sandboxed verifier runs.
        assert!(dir.path().join("ran").exists(), "{}", out.stderr);
    } else {
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(out.stderr.contains("needs bubblewrap") && out.stderr.contains("hint:"), "{}", out.stderr);
        assert!(!dir.path().join("ran").exists(), "nothing ran unsandboxed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_command_provider_gets_the_quoted_prompt() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "agent.sh", "printf '%s' \"$1\" > got-arg.txt\necho '{\"ok\": true}'\n");
    write(dir.path(), "redraft.toml", "[providers.mine]\ntype = \"command\"\ncommand = \"sh agent.sh {prompt}\"\n");
    let prompt = "it's $(touch pwned) \"quoted\"";
    let mut c = redraft(dir.path());
    c.args(["run", "--model", "command/mine", "--prompt", prompt]);
    let out = output(c).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!dir.path().join("pwned").exists());
    let got = std::fs::read_to_string(dir.path().join("got-arg.txt")).unwrap();
    assert!(got.starts_with(prompt), "the whole prompt arrives as one argument: {got}");
}
