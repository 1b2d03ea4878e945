use crate::{Client, config, setup};

#[tokio::test]
async fn the_tools_and_their_input_schemas() {
    let mut client = Client::start(setup(config(""))).await;
    let listed = client.request("tools/list", serde_json::json!({})).await;
    let names: Vec<&str> = listed["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 6);
    for name in ["iterate", "validate", "example", "submit", "decide", "answer"] {
        assert!(names.contains(&name), "{name} is missing: {names:?}");
    }
    // The argument names MCP clients use for `iterate` are in its schema (serde aliases would not be).
    let iterate = listed["tools"].as_array().unwrap().iter().find(|t| t["name"] == "iterate").unwrap();
    for arg in [
        "prompt",
        "target_type",
        "evaluator",
        "max_iterations",
        "success_threshold",
        "patience",
        "max_budget",
        "max_wall_time",
        "model",
        "timeout",
        "sandbox",
    ] {
        assert!(iterate["inputSchema"]["properties"].get(arg).is_some(), "`{arg}` is not in iterate's schema");
    }
    insta::assert_json_snapshot!("tools_list", listed);
}
