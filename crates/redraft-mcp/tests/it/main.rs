//! The MCP server in-process: the real handler and rmcp's protocol over an in-memory duplex,
//! driven by a minimal JSON-RPC client (initialize, tools/list, tools/call).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_debug_implementations)] // test code

mod decide;
mod example_validate;
mod guards;
mod iterate;
mod secrets;
mod submit;
mod tools;

use std::path::{Path, PathBuf};

use redraft::config::Config;
use redraft_mcp::{McpSetup, RedraftMcp};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};

/// The repository root (for `examples/`).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// A config from TOML text, with the staffing kinds.
pub fn config(toml: &str) -> Config {
    let mut config = Config::parse(toml, Path::new("redraft.toml")).unwrap();
    config.kinds_dir = repo().join("examples/staffing/kinds");
    config
}

/// A setup over `config` in a temporary directory.
pub fn setup(config: Config) -> McpSetup {
    McpSetup::new(config, std::env::temp_dir()).unwrap()
}

/// One MCP session with the server.
pub struct Client {
    reader: BufReader<ReadHalf<DuplexStream>>,
    writer: WriteHalf<DuplexStream>,
    next_id: u64,
    /// Notifications received (progress, …), in order.
    pub notifications: Vec<Value>,
}

impl Client {
    /// Start a session with a new server over `setup`.
    pub async fn start(setup: McpSetup) -> Self {
        Self::connect(RedraftMcp::new(setup)).await
    }

    /// Start a session with `server` (e.g. another session of the same server).
    pub async fn connect(server: RedraftMcp) -> Self {
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        tokio::spawn(redraft_mcp::serve(server, theirs));
        let (r, w) = tokio::io::split(ours);
        let mut client = Self { reader: BufReader::new(r), writer: w, next_id: 1, notifications: Vec::new() };
        let init = client
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "it", "version": "0"}}),
            )
            .await;
        assert_eq!(init["serverInfo"]["name"], "redraft", "{init}");
        assert!(init["capabilities"]["tools"].is_object(), "{init}");
        client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        client
    }

    async fn send(&mut self, message: Value) {
        let mut line = serde_json::to_string(&message).unwrap();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await.unwrap();
        self.writer.flush().await.unwrap();
    }

    /// Send a request and wait for its response's `result` (a protocol error fails the test).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let response = self.request_raw(method, params).await;
        assert!(response.get("error").is_none(), "{method} failed: {response}");
        response["result"].clone()
    }

    /// Send a request and return the whole response.
    pub async fn request_raw(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        loop {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).await.unwrap();
            assert!(n > 0, "the server closed the connection");
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC: {line:?}: {e}"));
            if message.get("id") == Some(&json!(id)) {
                return message;
            }
            assert!(message.get("method").is_some(), "unexpected message: {message}");
            self.notifications.push(message);
        }
    }

    /// Call a tool; the `CallToolResult`.
    pub async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments})).await
    }

    /// Call a tool and check it is not an error; its structured content.
    pub async fn ok(&mut self, tool: &str, arguments: Value) -> Value {
        let result = self.call(tool, arguments).await;
        assert_eq!(result["isError"], false, "{tool} failed: {}", text(&result));
        result["structuredContent"].clone()
    }

    /// Call a tool and check it is a tool error; its text.
    pub async fn error(&mut self, tool: &str, arguments: Value) -> String {
        let result = self.call(tool, arguments).await;
        assert_eq!(result["isError"], true, "{tool} should have failed: {result}");
        text(&result)
    }
}

/// The text content of a tool result.
pub fn text(result: &Value) -> String {
    result["content"].as_array().unwrap().iter().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n")
}

/// The staffing contract C-7: two welders in Toledo, OH.
pub fn toledo() -> Value {
    json!({"contract_id": "C-7", "target_count": 2, "city": "Toledo", "state": "OH", "role": "Welder"})
}
