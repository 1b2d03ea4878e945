use serde_json::{Value, json};

use crate::{output, redraft};

const CHECK: &str = r#"iteration_check:
  task_id: "task-003"
  current_iteration: 2
  max_iterations: 3
  test_result:
    status: "fail"          # pass | fail
    output: |
      FAIL src/auth/login.test.ts
        Expected: token to contain userId
        Received: undefined
  review_result:
    status: "pending"       # approve | reject | pending
    feedback: ""
"#;

async fn decide(dir: &std::path::Path, input: &str, args: &[&str]) -> crate::Output {
    let mut c = redraft(dir);
    c.arg("decide").args(args).write_stdin(input.to_owned());
    output(c).await
}

#[tokio::test]
async fn reproduces_the_spec_example_in_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let out = decide(dir.path(), CHECK, &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    insta::assert_snapshot!(out.stdout, @r"
    decision:
      action: retry
      task_id: task-003
      iteration: 3
      feedback:
        summary: 'Test failed: token missing userId'
        actionable_items:
        - Make the token contain userId (src/auth/login.test.ts expects it; it was undefined)
        priority: high
    ");
}

#[tokio::test]
async fn escalates_at_the_cap_and_proceeds_on_pass_and_approve_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let yaml: Value = serde_yaml_ng::from_str(CHECK).unwrap();
    let mut check = yaml["iteration_check"].clone();
    check["current_iteration"] = json!(3);
    let out = decide(dir.path(), &check.to_string(), &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let d: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(d["decision"]["action"], "escalate");
    assert_eq!(
        d["decision"]["question"],
        "After 3 attempts the test still fails (token missing userId); which should change, the test or the implementation?"
    );
    assert!(d["decision"]["context"]["pattern_detected"].is_string());

    check["test_result"]["status"] = json!("pass");
    check["review_result"]["status"] = json!("approve");
    let out = decide(dir.path(), &check.to_string(), &["--format", "yaml"]).await;
    assert_eq!(out.code, 0);
    assert!(out.stdout.starts_with("decision:\n  action: proceed\n"), "{}", out.stdout);
    assert!(out.stdout.contains("message:"), "{}", out.stdout);
}

#[tokio::test]
async fn with_store_the_escalation_summarises_every_earlier_iteration() {
    let dir = tempfile::tempdir().unwrap();
    let check = |i: u32, output: &str| {
        json!({"task_id": "t/1", "current_iteration": i, "max_iterations": 3,
               "test_result": {"status": "fail", "output": output}})
        .to_string()
    };
    let first = "Error: undefined token\nTypeError: Cannot read properties of undefined (reading 'id')";
    assert_eq!(decide(dir.path(), &check(1, first), &["--store"]).await.code, 0);
    assert_eq!(
        decide(dir.path(), &check(2, "FAIL src/a.test.ts\n  Expected: 200\n  Received: 500"), &["--store"]).await.code,
        0
    );
    let out = decide(dir.path(), &check(3, "FAIL src/a.test.ts\n  Expected: 200\n  Received: 500"), &["--store"]).await;
    let d: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(d["decision"]["action"], "escalate");
    assert_eq!(
        d["decision"]["context"]["attempts_summary"],
        json!([
            "Iteration 1: Test failed: Error: undefined token",
            "Iteration 2: Test failed: expected 200, received 500",
            "Iteration 3: Test failed: expected 200, received 500"
        ])
    );
    assert!(dir.path().join(".redraft/decide/t_1.jsonl").is_file());
}

#[tokio::test]
async fn a_malformed_check_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = decide(dir.path(), "iteration_check:\n  task_id: x\n", &[]).await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("missing field `current_iteration`") && out.stderr.contains("hint:"), "{}", out.stderr);
    let out = decide(dir.path(), "{\"task_id\": ", &[]).await;
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("not valid JSON"), "{}", out.stderr);
}
