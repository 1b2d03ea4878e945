use serde_json::json;

use super::*;

const KEY: &str = "sk-stream-token-test-77";

/// The events a client reads from `stream` (LF, CRLF or CR line ends; `data:` lines joined).
fn client_events(stream: &[u8]) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Vec<Vec<u8>> = Vec::new();
    for line in lines(stream) {
        if line.is_empty() {
            if !data.is_empty() {
                events.push(String::from_utf8(data.join(&b'\n')).unwrap());
            }
            data.clear();
        } else if let Some(value) = data_value(line) {
            data.push(value.to_vec());
        }
    }
    if !data.is_empty() {
        events.push(String::from_utf8(data.join(&b'\n')).unwrap());
    }
    events
}

/// Every text a client can rebuild: for each choice and field path (array elements as `*`),
/// its strings in order; a token's `bytes` as text too.
fn rebuilt(events: &[String]) -> HashMap<String, String> {
    fn walk(value: &Value, path: String, out: &mut HashMap<String, String>) {
        match value {
            Value::String(s) => out.entry(path).or_default().push_str(s),
            Value::Array(items) => {
                if items.iter().all(Value::is_u64) && !items.is_empty() {
                    let bytes: Vec<u8> = items.iter().filter_map(Value::as_u64).map(|b| b as u8).collect();
                    out.entry(path.clone()).or_default().push_str(&String::from_utf8_lossy(&bytes));
                }
                for item in items {
                    walk(item, format!("{path}/*"), out);
                }
            }
            Value::Object(fields) => {
                for (k, v) in fields {
                    walk(v, format!("{path}/{k}"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = HashMap::new();
    for event in events {
        let Ok(chunk) = serde_json::from_str::<Value>(event) else { continue };
        for (position, choice) in chunk["choices"].as_array().into_iter().flatten().enumerate() {
            let index = choice["index"].as_u64().unwrap_or(position as u64);
            walk(choice, format!("{index}"), &mut out);
        }
    }
    out
}

/// `stream` through an [`EventRedactor`] in pieces of `size` bytes.
fn redacted(stream: &[u8], size: usize) -> Vec<u8> {
    let mut redactor = EventRedactor::default();
    let mut out = Vec::new();
    for piece in stream.chunks(size) {
        out.extend(redactor.push(piece));
    }
    out.extend(redactor.finish());
    out
}

fn chunk(choice: Value) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "choices": [choice]})
}

/// Events from chunks, each `data: …` and a blank line, with `end` as the line end.
fn events(chunks: &[Value], end: &str) -> Vec<u8> {
    let mut text: String = chunks.iter().map(|c| format!("data: {c}{end}{end}")).collect();
    text.push_str(&format!("data: [DONE]{end}{end}"));
    text.into_bytes()
}

/// The key split in three, each piece in its own chunk under `field` (a JSON pointer below the
/// choice), then a finishing chunk.
fn split_in(build: impl Fn(&str) -> Value) -> Vec<Value> {
    let mut chunks: Vec<Value> =
        ["The key is sk-", "stream-token", "-test-77, and sk-x."].iter().map(|p| chunk(build(p))).collect();
    chunks.push(chunk(json!({"index": 0, "delta": {}, "finish_reason": "stop"})));
    chunks
}

/// Check that no client-visible text of the redacted stream holds the key, that one says
/// `[redacted]`, and that the other text came through.
fn check(name: &str, stream: &[u8]) {
    secrets::register(KEY);
    for size in [1, 5, 17, 64, stream.len()] {
        let out = redacted(stream, size);
        let text = String::from_utf8_lossy(&out);
        assert!(!text.contains(KEY), "{name} ({size}): {text}");
        let texts = rebuilt(&client_events(&out));
        for (path, rebuilt) in &texts {
            assert!(!rebuilt.contains(KEY), "{name} ({size}): {path} is {rebuilt:?}");
        }
        let said = texts.values().find(|t| t.contains("[redacted]"));
        assert!(
            said.is_some_and(|t| t.contains("The key is [redacted]") && t.contains(", and sk-x.")),
            "{name} ({size}): {texts:?}"
        );
        assert!(text.trim_end().ends_with("data: [DONE]"), "{name} ({size}): {text}");
    }
}

#[test]
fn a_secret_streamed_piece_by_piece_is_redacted_in_any_field() {
    type Build = fn(&str) -> Value;
    let fields: [(&str, Build); 8] = [
        ("content", |p| json!({"index": 0, "delta": {"content": p}})),
        ("reasoning", |p| json!({"index": 0, "delta": {"reasoning": p}})),
        ("thinking", |p| json!({"index": 0, "delta": {"thinking": p}})),
        ("function_call", |p| json!({"index": 0, "delta": {"function_call": {"arguments": p}}})),
        ("tool name", |p| json!({"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": p}}]}})),
        ("content parts", |p| json!({"index": 0, "delta": {"content": [{"type": "text", "text": p}]}})),
        ("message", |p| json!({"index": 0, "message": {"content": p}})),
        (
            "logprobs",
            |p| json!({"index": 0, "delta": {}, "logprobs": {"content": [{"token": p, "logprob": -0.1, "bytes": p.bytes().collect::<Vec<u8>>()}]}}),
        ),
    ];
    for (name, build) in fields {
        check(name, &events(&split_in(build), "\n"));
    }
}

#[test]
fn a_secret_split_across_two_tool_calls_is_redacted() {
    let chunks = [
        chunk(
            json!({"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "The key is sk-stream-"}}]}}),
        ),
        chunk(
            json!({"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "b", "function": {"name": "g", "arguments": "token-test-77, and sk-x."}}]}}),
        ),
        chunk(json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"})),
    ];
    check("two tool calls", &events(&chunks, "\n"));
}

#[test]
fn events_are_read_as_the_spec_reads_them() {
    let chunks = split_in(|p| json!({"index": 0, "delta": {"content": p}}));
    for end in ["\r\n", "\r"] {
        check(&format!("line ends {end:?}"), &events(&chunks, end));
    }
    // Multi-line `data:`: the JSON spread over lines.
    let mut stream = String::new();
    for chunk in &chunks {
        let pretty = serde_json::to_string_pretty(chunk).unwrap();
        for line in pretty.lines() {
            stream.push_str(&format!("data: {line}\n"));
        }
        stream.push_str(": a comment\n\n");
    }
    stream.push_str("data: [DONE]\n\n");
    check("multi-line data", stream.as_bytes());
}

#[test]
fn a_whole_completion_is_redacted_across_its_parts() {
    secrets::register(KEY);
    let mut completion = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": [
        {"type": "text", "text": "The key is sk-stream-"},
        {"type": "text", "text": "token-test-77, and sk-x."}
    ], "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"k\": \"sk-stream-token"}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": "-test-77\"}"}}
    ]}, "finish_reason": "stop"}]});
    assert!(redact_completion(&mut completion));
    let text = completion.to_string();
    let texts = rebuilt(std::slice::from_ref(&text));
    assert_eq!(texts["0/message/content/*/text"], "The key is [redacted], and sk-x.", "{text}");
    assert_eq!(texts["0/message/tool_calls/*/function/arguments"], "{\"k\": \"[redacted]\"}", "{text}");
    assert_eq!(completion["choices"][0]["message"]["role"], "assistant");
    // Nothing to redact: nothing changes.
    let mut plain = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}}]});
    assert!(!redact_completion(&mut plain));
}

#[test]
fn an_event_without_a_secret_passes_as_it_came() {
    secrets::register(KEY);
    let mut redactor = EventRedactor::default();
    let plain =
        format!("data: {}\r\n\r\n", chunk(json!({"index": 0, "delta": {"role": "assistant", "content": "Hello"}})));
    assert_eq!(redactor.push(plain.as_bytes()), plain.as_bytes());
    // A CR at the end of a piece waits: it may be the start of a CRLF.
    let mut redactor = EventRedactor::default();
    assert_eq!(redactor.push(b"event: x\r\n\r"), b"");
    assert_eq!(redactor.push(b"\ndata: 1\n\n"), b"event: x\r\n\r\ndata: 1\n\n");
}

#[test]
fn events_are_redacted_as_a_client_parses_them_whatever_their_bytes() {
    secrets::register(KEY);
    let escaped: String = KEY.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
    let half = KEY.len() / 2;
    let (first, second) = (&KEY[..half], &KEY[half..]);
    let hostile: Vec<String> = vec![
        // The field named with an escape, the key split across two events.
        format!(r#"data: {{"\u0063hoices":[{{"index":0,"delta":{{"content":"{first}"}}}}]}}"#),
        format!(r#"data: {{"\u0063hoices":[{{"index":0,"delta":{{"content":"{second}"}},"finish_reason":"stop"}}]}}"#),
        // Every character escaped, in one event.
        format!(r#"data: {{"choices":[{{"index":1,"delta":{{"content":"{escaped}"}},"finish_reason":"stop"}}]}}"#),
        // Escaped in an event that is not a chunk at all.
        format!(r#"data: {{"error":{{"message":"{escaped}"}}}}"#),
    ];
    let mut redactor = EventRedactor::default();
    let mut out = Vec::new();
    for event in &hostile {
        out.extend(redactor.push(format!("{event}\n\n").as_bytes()));
    }
    out.extend(redactor.finish());
    let events = client_events(&out);
    let texts = rebuilt(&events);
    assert_eq!(texts["0/delta/content"], "[redacted]", "{events:?}");
    assert_eq!(texts["1/delta/content"], "[redacted]", "{events:?}");
    let error: Value = serde_json::from_str(&events[events.len() - 1]).unwrap();
    assert_eq!(error["error"]["message"], "[redacted]");

    // Data a JSON parser refuses but a lenient client reads (NaN, a lone surrogate, no JSON at
    // all) is not passed on: nothing of the key gets through in pieces.
    let mut redactor = EventRedactor::default();
    let mut out = Vec::new();
    for data in [
        format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"{first}"}}}}],"x":NaN}}"#),
        format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"{second}"}}}}],"x":"\ud800"}}"#),
        first.to_string(),
        second.to_string(),
    ] {
        out.extend(redactor.push(format!("data: {data}\n\n").as_bytes()));
    }
    out.extend(redactor.push(b"data: [DONE]\n\n"));
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains(first) && !text.contains(second), "{text}");
    assert_eq!(client_events(text.as_bytes()), ["[DONE]"], "{text}");
}

#[test]
fn a_secret_split_across_the_ids_and_roles_a_client_joins_is_redacted() {
    secrets::register(KEY);
    let half = KEY.len() / 2;
    let (first, second) = (&KEY[..half], &KEY[half..]);
    let mut redactor = EventRedactor::default();
    let mut out = Vec::new();
    for (n, part) in [first, second].into_iter().enumerate() {
        let finish = if n == 1 { json!("stop") } else { Value::Null };
        let delta = json!({"role": part, "tool_calls": [{"index": 0, "id": part, "type": "function"}]});
        let event = chunk(json!({"index": 0, "delta": delta, "finish_reason": finish}));
        out.extend(redactor.push(format!("data: {event}\n\n").as_bytes()));
    }
    out.extend(redactor.finish());
    let events = client_events(&out);
    let texts = rebuilt(&events);
    // Joined as the OpenAI SDK joins them, the secret is not whole (its first piece went out
    // before the second completed it: what a role or an id cut short would cost is worse).
    assert_eq!(texts["0/delta/role"], format!("{first}[redacted]"), "{events:?}");
    assert_eq!(texts["0/delta/tool_calls/*/id"], format!("{first}[redacted]"), "{events:?}");
    assert!(!events.join("").contains(KEY));

    // A role or an id is never cut short, whatever secret begins the way it ends.
    secrets::register("tool-secret-begins-with-t");
    let mut redactor = EventRedactor::default();
    let delta = json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_abct", "type": "function"}]});
    let event = format!("data: {}\n\n", chunk(json!({"index": 0, "delta": delta})));
    let out = redactor.push(event.as_bytes());
    let sent: Value = serde_json::from_str(&client_events(&out)[0]).unwrap();
    assert_eq!(sent["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(sent["choices"][0]["delta"]["tool_calls"][0]["id"], "call_abct");
}

#[test]
fn a_finished_choice_gets_nothing_more_and_joined_fields_are_keyed_by_call() {
    secrets::register(KEY);
    let half = KEY.len() / 2;
    let (first, second) = (&KEY[..half], &KEY[half..]);
    let streamed = |chunks: Vec<Value>| {
        let mut redactor = EventRedactor::default();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(redactor.push(format!("data: {chunk}\n\n").as_bytes()));
        }
        out.extend(redactor.finish());
        String::from_utf8(out).unwrap()
    };
    // Text after the choice's finish: a client appends it to the held text given back.
    let text = streamed(vec![
        chunk(json!({"index": 0, "delta": {"content": first, "refusal": first}, "finish_reason": "stop"})),
        chunk(json!({"index": 0, "delta": {"content": second, "refusal": second}})),
    ]);
    let texts = rebuilt(&client_events(text.as_bytes()));
    assert!(!texts["0/delta/content"].contains(KEY) && !texts["0/delta/refusal"].contains(KEY), "{text}");
    assert!(!text.contains(second), "{text}");
    // A `finish_reason` inside a delta is text like any other.
    let text = streamed(vec![
        chunk(json!({"index": 0, "delta": {"finish_reason": first}})),
        chunk(json!({"index": 0, "delta": {"finish_reason": second}, "finish_reason": "stop"})),
    ]);
    assert!(!rebuilt(&client_events(text.as_bytes()))["0/delta/finish_reason"].contains(KEY), "{text}");
    // Two tool calls interleaved: each call's id is joined on its own, as a client joins it.
    let call =
        |index: u64, id: &str| json!({"index": index, "id": id, "type": "function", "function": {"arguments": ""}});
    let text = streamed(vec![
        chunk(json!({"index": 0, "delta": {"tool_calls": [call(0, first)]}})),
        chunk(json!({"index": 0, "delta": {"tool_calls": [call(1, "call_zzzzzz")]}})),
        chunk(json!({"index": 0, "delta": {"tool_calls": [call(0, second)]}, "finish_reason": "tool_calls"})),
    ]);
    let events = client_events(text.as_bytes());
    let ids: String = events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .flat_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array().cloned().unwrap_or_default())
        .filter(|t| t["index"] == 0)
        .filter_map(|t| t["id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(ids, format!("{first}[redacted]"), "{text}");
}
