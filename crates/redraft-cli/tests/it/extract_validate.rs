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

#[tokio::test]
async fn validate_checks_formats_unless_the_flag_the_config_or_the_environment_says_not() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "s.json", r#"{"properties": {"on": {"format": "date"}, "to": {"format": "email"}}}"#);
    write(dir.path(), "doc.json", r#"{"on": "July 4th", "to": "not an email"}"#);
    let run = |args: &[&str], env: Option<(&str, &str)>| {
        let mut c = redraft(dir.path());
        c.args(["validate", "--schema", "s.json", "doc.json"]).args(args);
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        output(c)
    };
    let out = run(&[], None).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "1. /on: \"July 4th\" is not a \"date\" [format]\n2. /to: \"not an email\" is not a \"email\" [format]\n"
    );
    let out = run(&["--no-format-check"], None).await;
    assert_eq!((out.code, out.stdout.as_str()), (0, ""), "{}", out.stderr);
    let out = run(&[], Some(("REDRAFT_CHECK_FORMATS", "false"))).await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    write(dir.path(), "redraft.toml", "check_formats = false\n");
    let out = run(&[], None).await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    // The environment overrides the file, key by key.
    let out = run(&[], Some(("REDRAFT_CHECK_FORMATS", "true"))).await;
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
}

#[tokio::test]
async fn validate_follows_refs_to_files_next_to_the_schema_and_no_further() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("schemas/common")).unwrap();
    write(dir.path(), "schemas/order.json", r#"{"properties": {"ship_to": {"$ref": "common/address.json"}}}"#);
    write(
        dir.path(),
        "schemas/common/address.json",
        r##"{"required": ["zip"], "properties": {"zip": {"$ref": "defs.json#/$defs/zip"}}}"##,
    );
    write(dir.path(), "schemas/common/defs.json", r#"{"$defs": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}"#);
    write(dir.path(), "secret.json", r#"{"type": "object"}"#);
    write(dir.path(), "schemas/escape.json", r#"{"$ref": "../secret.json"}"#);
    write(dir.path(), "doc.json", r#"{"ship_to": {"zip": "4360"}}"#);
    let run = |schema: &str| {
        let mut c = redraft(dir.path());
        c.args(["validate", "--schema", schema, "doc.json"]);
        output(c)
    };
    let out = run("schemas/order.json").await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stdout.starts_with("1. /ship_to/zip: \"4360\" does not match \"^[0-9]{5}$\" [pattern]"),
        "{}",
        out.stdout
    );
    let out = run("schemas/escape.json").await;
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(out.stderr.contains("`../secret.json` is outside the schema file's directory"), "{}", out.stderr);
    assert!(out.stderr.contains("hint:"), "{}", out.stderr);
}
