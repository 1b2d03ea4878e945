//! The OpenAI-compatible proxy through the router: checked answers ([`checked`]), pass-through
//! and tools ([`pass_through`]), the models it lists ([`models`]), failures in OpenAI's error
//! shape.

mod checked;
mod models;
mod pass_through;

use serde_json::{Value, json};

use crate::CITY_SCHEMA;

fn checked(messages: Value) -> Value {
    json!({
        "model": "fake/m",
        "messages": messages,
        "response_format": {"type": "json_schema", "json_schema": {"name": "city", "strict": true, "schema": serde_json::from_str::<Value>(CITY_SCHEMA).unwrap()}},
    })
}

fn weather_tool() -> Value {
    json!([{"type": "function", "function": {"name": "weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}}])
}

/// `tool_calls` rebuilt from streamed deltas, by index.
fn streamed_calls(chunks: &[&Value]) -> Vec<Value> {
    let mut calls: Vec<Value> = Vec::new();
    for delta in
        chunks.iter().flat_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array().cloned().unwrap_or_default())
    {
        let i = delta["index"].as_u64().unwrap() as usize;
        if i == calls.len() {
            calls.push(json!({"id": delta["id"], "type": delta["type"], "function": {"name": delta["function"]["name"], "arguments": ""}}));
        }
        let args = calls[i]["function"]["arguments"].as_str().unwrap().to_owned();
        calls[i]["function"]["arguments"] = json!(args + delta["function"]["arguments"].as_str().unwrap_or_default());
    }
    calls
}
