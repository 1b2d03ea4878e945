//! A chat completion request as it comes over the wire, and what the proxy reads from it: the
//! function call it forces, its messages as chat messages, and the run a checked request
//! becomes.

use redraft::RunSpec;
use redraft::core::{Message, PromptStyle, Role, ToolSpec};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::ApiError;

/// The parts of an OpenAI chat completion request the proxy reads; other members are ignored.
#[derive(Debug, Deserialize)]
pub(super) struct CompletionRequest {
    pub(super) model: String,
    pub(super) messages: Vec<InMessage>,
    #[serde(default)]
    pub(super) response_format: Option<ResponseFormat>,
    #[serde(default)]
    pub(super) stream: bool,
    #[serde(default)]
    pub(super) stream_options: Option<StreamOptions>,
    pub(super) temperature: Option<f32>,
    pub(super) max_tokens: Option<u32>,
    pub(super) max_completion_tokens: Option<u32>,
    pub(super) n: Option<u32>,
    #[serde(default)]
    pub(super) tools: Option<Vec<Value>>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    pub(super) functions: Option<Vec<Value>>,
    #[serde(default)]
    function_call: Option<Value>,
    /// Per-request options (`extra_body={"redraft": {...}}` in OpenAI's clients).
    #[serde(default)]
    pub(super) redraft: Option<Value>,
    /// Every other member: the backend's parameters (`top_p`, `stop`, `seed`, …).
    #[serde(flatten)]
    pub(super) parameters: serde_json::Map<String, Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct InMessage {
    pub(super) role: String,
    #[serde(default)]
    content: Option<Content>,
    /// An assistant's calls of functions.
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
    /// An assistant's legacy single call.
    #[serde(default)]
    function_call: Option<Value>,
    /// A `tool` message: the call it answers.
    #[serde(default)]
    tool_call_id: Option<String>,
    /// A `function` message: the function it answers.
    #[serde(default)]
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Debug, Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ResponseFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: JsonSchemaFormat },
}

#[derive(Debug, Deserialize)]
pub(super) struct JsonSchemaFormat {
    #[serde(default)]
    pub(super) schema: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct StreamOptions {
    #[serde(default)]
    pub(super) include_usage: bool,
}

/// A function call the request forces, checked against the function's parameters.
#[derive(Debug)]
pub(super) struct Forced {
    pub(super) tool: ToolSpec,
    /// Asked with the legacy `functions` / `function_call`: answered as a `function_call`.
    pub(super) legacy: bool,
}

/// The function call the request forces, if any: `tool_choice` naming a function (or
/// `required` with one tool), or the legacy `function_call` naming one. Checked against the
/// function's `parameters`; any other choice is passed through to the backend.
pub(super) fn forced(req: &CompletionRequest) -> Result<Option<Forced>, ApiError> {
    let tools = req.tools.as_deref().unwrap_or_default();
    let functions = req.functions.as_deref().unwrap_or_default();
    let (wanted, legacy) = match (&req.tool_choice, &req.function_call) {
        (Some(choice), _) => match choice {
            // One tool that must be called: when it is a function, that function is forced.
            Value::String(s) if s == "required" && tools.len() == 1 && is_function(&tools[0]) => {
                (tools[0].pointer("/function/name").and_then(Value::as_str).map(str::to_owned), false)
            }
            Value::String(s) if matches!(s.as_str(), "auto" | "none" | "required") => return Ok(None),
            Value::Object(_) => match choice.pointer("/function/name").and_then(Value::as_str) {
                Some(name) => (Some(name.to_owned()), false),
                None => return Ok(None),
            },
            other => {
                return Err(ApiError::bad_request(
                    "invalid_request",
                    format!(
                        "`tool_choice` = {other} is not valid; use \"auto\", \"none\", \"required\" or {{\"type\": \"function\", \"function\": {{\"name\": …}}}}"
                    ),
                ));
            }
        },
        (None, Some(Value::Object(call))) => match call.get("name").and_then(Value::as_str) {
            Some(name) => (Some(name.to_owned()), true),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    let Some(name) = wanted else {
        return Err(ApiError::bad_request("invalid_request", "`tools[0].function.name` is missing"));
    };
    let function = if legacy {
        functions.iter().find(|f| f.get("name").and_then(Value::as_str) == Some(name.as_str()))
    } else {
        tools
            .iter()
            .filter(|t| is_function(t))
            .filter_map(|t| t.get("function"))
            .find(|f| f.get("name").and_then(Value::as_str) == Some(name.as_str()))
    };
    let Some(function) = function else {
        let (choice, list) = if legacy { ("function_call", "functions") } else { ("tool_choice", "tools") };
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("`{choice}` names the function `{name}`, which `{list}` does not define"),
        ));
    };
    let parameters = match function.get("parameters") {
        None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_request",
                format!("the parameters of the function `{name}` are not a JSON Schema object: {other}"),
            ));
        }
    };
    let description = function.get("description").and_then(Value::as_str).map(str::to_owned);
    let strict = function.get("strict").and_then(Value::as_bool).unwrap_or(false);
    Ok(Some(Forced { tool: ToolSpec { name, description, parameters, strict }, legacy }))
}

/// Whether a `tools` entry is a function (`type` `function`, or none given).
fn is_function(tool: &Value) -> bool {
    tool.get("type").and_then(Value::as_str).is_none_or(|k| k == "function")
}

/// The request's messages as chat messages (text parts joined). Function calls and their
/// results become text: an assistant's turn says which function it called with what, and a
/// `tool` (or `function`) message is the user's turn giving the result.
pub(super) fn messages(input: &[InMessage]) -> Result<Vec<Message>, ApiError> {
    let mut out = Vec::with_capacity(input.len());
    let mut names: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for (i, m) in input.iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => Role::System,
            "user" | "tool" | "function" => Role::User,
            "assistant" => Role::Assistant,
            other => {
                return Err(ApiError::bad_request(
                    "unsupported",
                    format!(
                        "`messages[{i}].role` = `{other}` is not supported by the redraft proxy (system, developer, user, assistant, tool)"
                    ),
                ));
            }
        };
        let content = match &m.content {
            None => String::new(),
            Some(Content::Text(t)) => t.clone(),
            Some(Content::Parts(parts)) => {
                let mut text = Vec::new();
                for p in parts {
                    match (p.kind.as_str(), &p.text) {
                        ("text", Some(t)) => text.push(t.as_str()),
                        (kind, _) => {
                            return Err(ApiError::bad_request(
                                "unsupported",
                                format!("`messages[{i}]` has a `{kind}` part; the redraft proxy takes text only"),
                            ));
                        }
                    }
                }
                text.join("\n")
            }
        };
        let mut calls = Vec::new();
        for call in m.tool_calls.iter().flatten() {
            let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or("?");
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                names.insert(id, name);
            }
            calls.push(describe_call(name, call.pointer("/function/arguments")));
        }
        if let Some(call) = &m.function_call {
            calls.push(describe_call(call.get("name").and_then(Value::as_str).unwrap_or("?"), call.get("arguments")));
        }
        let content = match m.role.as_str() {
            "tool" => {
                let id = m.tool_call_id.as_deref().unwrap_or("?");
                let name = names.get(id).copied().or(m.name.as_deref()).unwrap_or("?");
                format!("Result of the call of `{name}` ({id}):\n{content}")
            }
            "function" => format!("Result of the call of `{}`:\n{content}", m.name.as_deref().unwrap_or("?")),
            _ if !calls.is_empty() => {
                let calls = calls.join("\n");
                if content.trim().is_empty() { calls } else { format!("{content}\n{calls}") }
            }
            _ => content,
        };
        out.push(Message { role, content });
    }
    if out.is_empty() {
        return Err(ApiError::bad_request("invalid_request", "`messages` is empty"));
    }
    Ok(out)
}

/// An assistant's function call, as text.
fn describe_call(name: &str, arguments: Option<&Value>) -> String {
    let arguments = match arguments {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "{}".into(),
    };
    format!("Called `{name}` with {arguments}")
}

/// The run a checked request becomes: system messages → the task's system, the last message
/// (a user's) → the prompt, the turns in between kept before it.
pub(super) fn spec(
    messages: Vec<Message>,
    schema: Option<Value>,
    style: Option<PromptStyle>,
    model: String,
    temperature: Option<f32>,
    max_tokens: Option<u32>,
) -> Result<RunSpec, ApiError> {
    let (system, mut turns): (Vec<Message>, Vec<Message>) = messages.into_iter().partition(|m| m.role == Role::System);
    let prompt = match turns.pop() {
        Some(m) if m.role == Role::User && !m.content.trim().is_empty() => m.content,
        _ => {
            return Err(ApiError::bad_request(
                "invalid_request",
                "the last message must be a user's, with text: it is the task the answer is checked against",
            ));
        }
    };
    let system: Vec<String> = system.into_iter().map(|m| m.content).filter(|c| !c.trim().is_empty()).collect();
    Ok(RunSpec {
        prompt,
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        turns,
        schema,
        model: Some(model),
        temperature,
        max_tokens,
        prompt_style: style,
        ..RunSpec::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, text: &str) -> InMessage {
        InMessage { role: role.into(), content: Some(Content::Text(text.into())), ..InMessage::default() }
    }

    #[test]
    fn messages_map_onto_a_task() {
        let input = [
            msg("system", "Be terse."),
            msg("user", "Hi"),
            msg("assistant", "Hello"),
            msg("developer", "JSON only."),
            msg("user", "Which city?"),
        ];
        let spec = spec(messages(&input).unwrap(), Some(json!({"type": "object"})), None, "fake/m".into(), None, None)
            .unwrap();
        assert_eq!(spec.prompt, "Which city?");
        assert_eq!(spec.system.as_deref(), Some("Be terse.\n\nJSON only."));
        assert_eq!(spec.turns, vec![Message::user("Hi"), Message::assistant("Hello")]);
        let bad = spec_err(&[msg("user", "Hi"), msg("assistant", "prefill")]);
        assert!(bad.contains("last message must be a user's"), "{bad}");
        assert!(messages(&[msg("critic", "x")]).unwrap_err().message.contains("`critic`"));
    }

    #[test]
    fn function_calls_and_results_become_text() {
        let call = json!({"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}});
        let input = [
            msg("user", "Weather in Paris?"),
            InMessage { role: "assistant".into(), tool_calls: Some(vec![call]), ..InMessage::default() },
            InMessage { tool_call_id: Some("call_1".into()), ..msg("tool", "18 C, clear") },
            msg("user", "Answer as JSON."),
        ];
        let m = messages(&input).unwrap();
        assert_eq!(m[1], Message::assistant(r#"Called `weather` with {"city":"Paris"}"#));
        assert_eq!(m[2], Message::user("Result of the call of `weather` (call_1):\n18 C, clear"));
        let spec = spec(m, None, None, "fake/m".into(), None, None).unwrap();
        assert_eq!(spec.prompt, "Answer as JSON.");
        assert_eq!(spec.turns.len(), 3);
    }

    fn req(body: Value) -> CompletionRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn a_forced_function_is_checked_and_any_other_choice_passes_through() {
        let tool = |name: &str| json!({"type": "function", "function": {"name": name, "parameters": {"type": "object", "required": ["a"]}, "strict": true}});
        let m = json!([{"role": "user", "content": "x"}]);
        let named = forced(&req(json!({"model": "m", "messages": m, "tools": [tool("f"), tool("g")], "tool_choice": {"type": "function", "function": {"name": "g"}}}))).unwrap().unwrap();
        assert_eq!((named.tool.name.as_str(), named.tool.strict, named.legacy), ("g", true, false));
        assert_eq!(named.tool.parameters["required"], json!(["a"]));
        let one = forced(&req(json!({"model": "m", "messages": m, "tools": [tool("f")], "tool_choice": "required"})))
            .unwrap()
            .unwrap();
        assert_eq!(one.tool.name, "f");
        for choice in [json!("required"), json!("auto"), json!("none"), Value::Null] {
            let r = req(json!({"model": "m", "messages": m, "tools": [tool("f"), tool("g")], "tool_choice": choice}));
            assert!(forced(&r).unwrap().is_none(), "{choice} passes through");
        }
        let legacy = forced(&req(
            json!({"model": "m", "messages": m, "functions": [{"name": "h"}], "function_call": {"name": "h"}}),
        ))
        .unwrap()
        .unwrap();
        assert!(legacy.legacy);
        assert_eq!(
            legacy.tool.parameters,
            json!({"type": "object", "properties": {}}),
            "no parameters: an empty object"
        );
        let unknown = forced(&req(json!({"model": "m", "messages": m, "tools": [tool("f")], "tool_choice": {"type": "function", "function": {"name": "nope"}}}))).unwrap_err();
        assert!(unknown.message.contains("`nope`"), "{}", unknown.message);
        let bad =
            forced(&req(json!({"model": "m", "messages": m, "tools": [tool("f")], "tool_choice": 3}))).unwrap_err();
        assert!(bad.message.contains("`tool_choice`"), "{}", bad.message);
    }

    fn spec_err(input: &[InMessage]) -> String {
        spec(messages(input).unwrap(), None, None, "m/x".into(), None, None).unwrap_err().message
    }
}
