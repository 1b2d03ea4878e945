use serde_json::{Value, json};

use crate::{output, redraft, write};

#[tokio::test]
async fn extract_prints_the_json_found_in_prose_and_fails_without_any() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "answer.txt", "Sure!\n```json\n{\"a\": [1, 2]}\n```\nAnything else?");
    let out = output({
        let mut c = redraft(dir.path());
        c.args(["extract", "answer.txt", "--compact"]);
        c
    })
    .await;
    assert_eq!((out.code, out.stdout.as_str()), (0, "{\"a\":[1,2]}\n"));

    let out = output({
        let mut c = redraft(dir.path());
        c.args(["extract", "--json", "-"]).write_stdin("{'a': 1,}");
        c
    })
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["value"], json!({"a": 1}));
    assert_eq!(v["route"], "repaired");

    let out = output({
        let mut c = redraft(dir.path());
        c.arg("extract").write_stdin("I cannot help with that.");
        c
    })
    .await;
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("no JSON value was found"), "{}", out.stderr);
}

#[tokio::test]
async fn validate_prints_every_issue_and_exits_1_when_invalid() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "s.json",
        r#"{"type": "object", "required": ["name"], "properties": {"age": {"type": "integer"}}}"#,
    );
    write(dir.path(), "bad.json", r#"{"age": "ten"}"#);
    write(dir.path(), "good.json", r#"{"name": "Ada", "age": 36}"#);
    let run = |args: &[&str]| {
        let mut c = redraft(dir.path());
        c.args(args);
        output(c)
    };
    let out = run(&["validate", "--schema", "s.json", "bad.json"]).await;
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stdout,
        "1. (root): \"name\" is a required property [required]\n2. /age: \"ten\" is not of type \"integer\" [type]\n"
    );
    let out = run(&["validate", "--schema", "s.json", "good.json", "--json"]).await;
    assert_eq!(out.code, 0);
    assert_eq!(serde_json::from_str::<Value>(&out.stdout).unwrap(), json!({"passed": true, "issues": []}));
    let out = run(&["validate", "--schema", "nope.json", "good.json"]).await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("`nope.json`"), "{}", out.stderr);
}
