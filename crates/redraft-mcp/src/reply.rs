//! Tool results: structured content with the same JSON as text (for clients that read only
//! text), and tool errors that the caller's model can read and act on.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

/// A successful result: `value` as structured content and as pretty JSON text.
pub fn json(value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(pretty(&value))]);
    result.structured_content = Some(value);
    result
}

/// A tool-level error (`isError: true`) with structured content; the text is `text`.
pub fn error_with(text: String, value: Value) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}

/// A request that cannot be carried out (unknown kind, no model, invalid schema, bad
/// arguments): nothing was run. The message keeps its `hint:` line.
pub fn bad_request(message: impl std::fmt::Display) -> CallToolResult {
    let message = message.to_string();
    error_with(message.clone(), json!({"error": "invalid_request", "message": message}))
}

/// A result whose text is written for people and whose structured content is `value`.
pub fn text_and(text: String, value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}
