use serde_json::json;

use crate::{Client, config, setup, toledo};

#[tokio::test]
async fn validate_checks_a_kind_with_its_context_or_a_schema() {
    let mut client = Client::start(setup(config(""))).await;
    let wrong = json!({"fills": [{"worker_id": "W-1"}, {"worker_id": "W-2"}]});
    let report = client.ok("validate", json!({"target_type": "fill", "artifact": wrong, "context": toledo()})).await;
    assert_eq!(report["passed"], false);
    assert_eq!(report["issues"][0]["path"], "/fills/0/worker_id");
    assert_eq!(report["issues"][0]["code"], "rule:city_matches");
    assert_eq!(report["issues"][0]["message"], "city 'Louisville' doesn't match contract city 'Toledo'");

    let right = json!({"fills": [{"worker_id": "W-2"}, {"worker_id": "W-3"}]});
    let report = client.ok("validate", json!({"kind": "fill", "artifact": right, "context": toledo()})).await;
    assert_eq!(report, json!({"passed": true, "issues": []}));

    // A string holding JSON is read as JSON where the target expects no string.
    let text = "Here it is:\n```json\n{\"fills\": [{\"worker_id\": \"W-2\"}, {\"worker_id\": \"W-3\"}]}\n```";
    let report = client.ok("validate", json!({"target_type": "fill", "artifact": text, "context": toledo()})).await;
    assert_eq!(report["passed"], true, "{report}");
    let report = client.ok("validate", json!({"target_type": "fill", "artifact": "no JSON"})).await;
    assert_eq!(report["issues"][0]["code"], "invalid_json");

    let schema = json!({"type": "object", "required": ["city"]});
    let report = client.ok("validate", json!({"schema": schema, "artifact": {"town": "Toledo"}})).await;
    assert_eq!((report["passed"].clone(), report["issues"][0]["code"].clone()), (json!(false), json!("required")));

    let err = client.error("validate", json!({"artifact": {}})).await;
    assert!(err.contains("`target_type`") && err.contains("fill"), "{err}");
    let err = client.error("validate", json!({"target_type": "fil", "artifact": {}})).await;
    assert!(err.contains("unknown kind `fil`") && err.contains("email, fill, playbook"), "{err}");
    let err = client.error("validate", json!({"target_type": "fill"})).await;
    assert!(err.contains("missing field `artifact`"), "{err}");
}

#[tokio::test]
async fn example_shows_a_kinds_example_and_schema_or_a_skeleton() {
    let mut client = Client::start(setup(config(""))).await;
    let shown = client.ok("example", json!({"target_type": "fill"})).await;
    assert_eq!(shown["example_source"], "example.json");
    assert_eq!(shown["example"]["fills"][0]["worker_id"], "W-2");
    assert_eq!(shown["schema"]["title"], "fill");
    assert!(shown["instructions"].as_str().unwrap().contains("roster"));

    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}});
    let shown = client.ok("example", json!({"schema": schema})).await;
    assert_eq!(shown["example"], json!({"city": "<string>", "n": 0}));
    assert_eq!(shown["example_source"], "skeleton");

    let err = client.error("example", json!({"target_type": "nope"})).await;
    assert!(err.contains("unknown kind `nope`"), "{err}");
}

#[tokio::test]
async fn a_missing_kinds_directory_is_named_when_a_kind_is_asked_for() {
    let mut cfg = config("");
    cfg.kinds_dir = "/nonexistent/kinds".into();
    let mut client = Client::start(setup(cfg)).await;
    let err = client.error("example", json!({"target_type": "fill"})).await;
    assert!(err.contains("/nonexistent/kinds") && err.contains("hint:"), "{err}");
    // Schemas need no kinds.
    let report = client.ok("validate", json!({"schema": {"type": "object"}, "artifact": {}})).await;
    assert_eq!(report["passed"], true);
}

#[tokio::test]
async fn formats_are_checked_unless_the_request_or_the_server_says_not() {
    let schema = json!({"type": "object", "properties": {"start": {"type": "string", "format": "date"}}});
    let artifact = json!({"start": "July 4th"});
    let mut client = Client::start(setup(config(""))).await;
    let report = client.ok("validate", json!({"schema": schema, "artifact": artifact})).await;
    assert_eq!(report["passed"], false, "{report}");
    assert_eq!(report["issues"][0]["code"], "format");
    assert_eq!(report["issues"][0]["path"], "/start");
    assert_eq!(report["issues"][0]["message"], r#""July 4th" is not a "date""#);
    let report = client.ok("validate", json!({"schema": schema, "artifact": artifact, "check_formats": false})).await;
    assert_eq!(report, json!({"passed": true, "issues": []}));

    let mut client = Client::start(setup(config("check_formats = false\n"))).await;
    let report = client.ok("validate", json!({"schema": schema, "artifact": artifact})).await;
    assert_eq!(report["passed"], true, "{report}");
    let report = client.ok("validate", json!({"schema": schema, "artifact": artifact, "check_formats": true})).await;
    assert_eq!(report["passed"], false, "{report}");
}
