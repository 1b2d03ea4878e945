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
