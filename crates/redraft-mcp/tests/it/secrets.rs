//! No MCP message carries a known secret: a run whose model repeats one, its progress
//! notifications and a tool error that would name one show `[redacted]` instead.

use redraft::core::secrets;
use redraft_testkit::{FakeOpenAi, reply};
use serde_json::json;

use crate::{Client, config, setup, text};

const SECRET: &str = "sk-mcp-test-9a8b7c6d5e4f";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_message_carries_a_known_secret() {
    secrets::register(SECRET);
    let server = FakeOpenAi::start(vec![reply(&format!(r#"{{"city": "{SECRET}"}}"#))]).await;
    let cfg = config(&format!(
        "default_model = \"fake/small\"\n[providers.fake]\ntype = \"openai\"\nbase_url = \"{}\"\n",
        server.base_url()
    ));
    let mut client = Client::start(setup(cfg)).await;
    let schema = json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}});
    let call = json!({
        "name": "iterate",
        "arguments": {"prompt": "Which city?", "schema": schema, "max_iterations": 1},
        "_meta": {"progressToken": "p1"}
    });
    let result = client.request("tools/call", call).await;
    assert_eq!(result["structuredContent"]["artifact"], json!({"city": "[redacted]"}), "{result}");
    let error = client.error("validate", json!({"target_type": SECRET, "artifact": {}})).await;
    assert!(error.contains("[redacted]"), "{error}");
    let everything = format!("{result} {error} {}", json!(client.notifications));
    assert!(!everything.contains(SECRET), "{everything}");
    assert!(!text(&result).contains(SECRET));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_escaped_twice_in_a_result_text_is_redacted_too() {
    // Quotes and backslashes are escaped once in `structuredContent` and twice in the text copy
    // of the result (JSON in a JSON string).
    const QUOTED: &str = "sk-mcp\"quote\\back-5e4f3a2b";
    secrets::register(QUOTED);
    let mut client = Client::start(setup(config(""))).await;
    let schema = json!({"type": "object", "properties": {"k": {"type": "integer"}}});
    let call = json!({"name": "validate", "arguments": {"schema": schema, "artifact": {"k": QUOTED}}});
    let result = client.request("tools/call", call).await;
    let wire = result.to_string();
    assert!(!wire.contains("back-5e4f3a2b"), "{wire}");
    let copy: serde_json::Value = serde_json::from_str(&text(&result)).unwrap();
    assert!(!copy.to_string().contains("back-5e4f3a2b"), "{copy}");
}
