//! Server-sent events and chat completions, redacted. Events are parsed as the SSE spec reads
//! them — lines ended by LF, CRLF or CR, an event ended by a blank line, `data:` lines joined —
//! and each is redacted whole once it has arrived, its data parsed as JSON and written again
//! (data that is not JSON is dropped: a client would read escapes or split texts in it that
//! no byte search sees). In a chat completion chunk every string under
//! each choice is also redacted as a stream of its own across chunks, since a model streams a
//! secret piece by piece, in whatever field: the stream is keyed by the choice and the field's
//! path, array elements counting as consecutive pieces of one text (the tool calls' `arguments`
//! are one text, a key split across two calls included; so are the parts of a content array and
//! the tokens of `logprobs`). Only what could be the start of a secret is held back; it is given
//! back, redacted, with the chunk that finishes its choice. A whole (not streamed) completion is
//! redacted the same way, at once.

use std::collections::{HashMap, HashSet};

use redraft::core::secrets::{self, StreamRedactor};
use serde_json::{Map, Value};

/// Fields whose values a client takes as they come rather than joining them across chunks
/// (anywhere below a choice): redacted whole in each chunk, never held back. A choice's own
/// `finish_reason` is one too; one elsewhere (in a delta) is text like any other.
const NAMING_FIELDS: [&str; 2] = ["index", "type"];

/// Fields a client reads whole from the chunk that brings them, but that the OpenAI SDK also
/// joins across chunks: never held back (a role or a call's id cut short would break the
/// client that reads it whole), and a piece that completes a known secret with the pieces
/// before it is replaced with `[redacted]` whole.
const JOINED_FIELDS: [&str; 2] = ["role", "id"];

/// How much of a joined field's earlier pieces is kept to find a secret that a piece completes.
const JOINED_KEEP: usize = 4096;

/// Redaction of a stream of server-sent events.
#[derive(Debug, Default)]
pub(crate) struct EventRedactor {
    /// The start of an event whose end has not come.
    pending: Vec<u8>,
    /// The streamed texts of each choice.
    choices: Choices,
}

impl EventRedactor {
    pub(crate) fn push(&mut self, piece: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(piece);
        let mut out = Vec::new();
        while let Some(end) = event_end(&self.pending) {
            let event: Vec<u8> = self.pending.drain(..end).collect();
            out.extend(self.event(&event));
        }
        out
    }

    /// The end of the stream: an unfinished last event, redacted. Text still held for a choice
    /// that never finished is dropped: it is the start of a secret, or too little to matter.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.pending);
        if rest.is_empty() { rest } else { self.event(&rest) }
    }

    /// One whole event (its blank line included), redacted. Its data is parsed as JSON, as a
    /// client reads it (escapes decoded, whatever its bytes look like): the texts of a chat
    /// completion chunk's choices are redacted as streams, every other string whole. When that
    /// changes anything, the data is written again from what was parsed, the other lines
    /// (`event`, `id`, comments) redacted as they are; else the event goes as it came. Data
    /// that is not JSON (but the stream's end, `[DONE]`) is not passed on: the event becomes a
    /// comment.
    fn event(&mut self, event: &[u8]) -> Vec<u8> {
        let lines = lines(event);
        let data: Vec<&[u8]> = lines.iter().filter_map(|line| data_value(line)).collect();
        if data.is_empty() {
            return secrets::redact_bytes(event).into_owned();
        }
        let data = data.join(&b'\n');
        if data.trim_ascii() == b"[DONE]" {
            return secrets::redact_bytes(event).into_owned();
        }
        let Ok(mut value) = serde_json::from_slice::<Value>(&data) else { return DROPPED.to_vec() };
        let streamed = value.get("choices").is_some() && self.choices.redact(&mut value, Mode::Streamed);
        if !(secrets::redact_json(&mut value) | streamed) {
            // Nothing in what a client reads of it is secret: the event goes as it came.
            return secrets::redact_bytes(event).into_owned();
        }
        let data = value.to_string().into_bytes();
        let mut out = Vec::with_capacity(event.len());
        let mut data_written = false;
        for line in &lines {
            if data_value(line).is_none() {
                out.extend_from_slice(&secrets::redact_bytes(line));
                out.push(b'\n');
            } else if !data_written {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(&data);
                out.push(b'\n');
                data_written = true;
            }
        }
        out.push(b'\n');
        out
    }
}

/// What an event whose data is not JSON becomes: a comment, which clients skip.
const DROPPED: &[u8] = b": an event whose data is not JSON was dropped\n\n";

/// A whole chat completion (`{"choices": [...]}`), every text of each choice redacted as a
/// whole: a secret split between the parts of a content array, or between two tool calls, is
/// found too. Whether anything changed.
pub(crate) fn redact_completion(completion: &mut Value) -> bool {
    Choices::default().redact(completion, Mode::Whole)
}

/// Whether a chunk comes as part of a stream (held text waits for the next chunk) or is whole
/// (held text is given back at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Streamed,
    Whole,
}

/// The streamed texts of each choice, by the choice's index, and the choices that finished.
#[derive(Debug, Default)]
struct Choices {
    texts: HashMap<u64, Texts>,
    /// A finished choice's held text was given back: whatever comes for it later is dropped (a
    /// client would append it to what was given back, a secret's second half to its first).
    finished: HashSet<u64>,
}

/// A choice's streamed texts: each field path (array elements as `*`), in order of appearance.
#[derive(Debug, Default)]
struct Texts(Vec<Text>);

#[derive(Debug)]
struct Text {
    path: String,
    /// Where its last piece was (to give held text back there).
    last: Vec<Step>,
    redactor: StreamRedactor,
    /// For a joined field, the end of what was sent of it (at most [`JOINED_KEEP`] bytes).
    sent: String,
}

/// A step from a choice down to one of its strings.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    /// An array element, and its `index` field when it has one.
    Element(Option<u64>),
}

impl Choices {
    /// Redact the texts of `chunk`'s choices; whether any changed.
    fn redact(&mut self, chunk: &mut Value, mode: Mode) -> bool {
        let Some(choices) = chunk.get_mut("choices").and_then(Value::as_array_mut) else { return false };
        let index_of =
            |position: usize, choice: &Value| choice.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
        let before = choices.len();
        let mut position = 0;
        choices.retain(|choice| {
            let index = index_of(position, choice);
            position += 1;
            !self.finished.contains(&index)
        });
        let mut changed = choices.len() != before;
        for (position, choice) in choices.iter_mut().enumerate() {
            let index = index_of(position, choice);
            let finished = choice.get("finish_reason").is_some_and(|f| !f.is_null());
            let texts = self.texts.entry(index).or_default();
            changed |= texts.visit(choice, &mut Vec::new());
            if (finished || mode == Mode::Whole)
                && let Some(texts) = self.texts.remove(&index)
                && let Some(fields) = choice.as_object_mut()
            {
                changed |= texts.give_back(fields);
                if mode == Mode::Streamed {
                    self.finished.insert(index);
                }
            }
        }
        changed
    }
}

impl Texts {
    /// Redact every string below `value` (at `steps`) as the next piece of its text; whether
    /// any changed.
    fn visit(&mut self, value: &mut Value, steps: &mut Vec<Step>) -> bool {
        match value {
            Value::String(text) => self.piece(steps, text),
            Value::Array(items) => {
                let mut changed = false;
                for item in items {
                    steps.push(Step::Element(item.get("index").and_then(Value::as_u64)));
                    changed |= self.visit(item, steps);
                    steps.pop();
                }
                changed
            }
            Value::Object(fields) => {
                let mut changed = false;
                let mut token_changed = false;
                for (key, value) in fields.iter_mut() {
                    if NAMING_FIELDS.contains(&key.as_str()) || (steps.is_empty() && key == "finish_reason") {
                        continue;
                    }
                    steps.push(Step::Key(key.clone()));
                    let this = match value {
                        Value::String(text) if JOINED_FIELDS.contains(&key.as_str()) => self.joined(steps, text),
                        _ => self.visit(value, steps),
                    };
                    steps.pop();
                    token_changed |= this && key == "token";
                    changed |= this;
                }
                // A token's `bytes` spell it: they follow its text.
                if token_changed
                    && let Some(Value::String(token)) = fields.get("token")
                    && fields.get("bytes").is_some_and(Value::is_array)
                {
                    let bytes = token.bytes().map(Value::from).collect();
                    fields.insert("bytes".into(), Value::Array(bytes));
                }
                changed
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => false,
        }
    }

    /// The text at `path`, made when it is new.
    fn text(&mut self, path: String) -> &mut Text {
        let at = match self.0.iter().position(|t| t.path == path) {
            Some(at) => at,
            None => {
                self.0.push(Text { path, last: Vec::new(), redactor: StreamRedactor::new(), sent: String::new() });
                self.0.len() - 1
            }
        };
        &mut self.0[at]
    }

    /// `text`, the next piece of the joined field at `steps`: `[redacted]` when, joined to the
    /// pieces before it, it completes a known secret; else as it came. Whether it changed.
    fn joined(&mut self, steps: &[Step], text: &mut String) -> bool {
        // Keyed by each element's own `index`, as a client joins them (one tool call's id).
        let field = self.text(format!("#joined{}", path_of(steps, Elements::ByIndex)));
        let joined = format!("{}{text}", field.sent);
        let completes = secrets::contains(joined.as_bytes()) && !secrets::contains(field.sent.as_bytes());
        if completes {
            *text = secrets::REDACTED.to_owned();
        }
        field.sent.push_str(text);
        if field.sent.len() > JOINED_KEEP {
            let cut = field.sent.len() - JOINED_KEEP;
            let cut = (cut..field.sent.len()).find(|&i| field.sent.is_char_boundary(i)).unwrap_or(field.sent.len());
            field.sent.drain(..cut);
        }
        completes
    }

    /// `text`, the next piece of the text at `steps`, redacted; whether it changed.
    fn piece(&mut self, steps: &[Step], text: &mut String) -> bool {
        let stream = self.text(path_of(steps, Elements::Any));
        stream.last = steps.to_vec();
        let out = stream.redactor.push(text.as_bytes());
        if out == text.as_bytes() {
            return false;
        }
        *text = String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        true
    }

    /// What the texts still hold, redacted, into the choice `fields` where each was last.
    fn give_back(self, fields: &mut Map<String, Value>) -> bool {
        let mut changed = false;
        for mut text in self.0 {
            let rest = text.redactor.finish();
            if rest.is_empty() {
                continue;
            }
            changed = true;
            let mut value = Value::String(String::from_utf8_lossy(&rest).into_owned());
            let Some((Step::Key(first), below)) = text.last.split_first().map(|(f, b)| (f.clone(), b)) else {
                continue;
            };
            for step in below.iter().rev() {
                value = match step {
                    Step::Key(key) => Value::Object(Map::from_iter([(key.clone(), value)])),
                    Step::Element(Some(index)) => {
                        let mut element = match value {
                            Value::Object(element) => element,
                            other => Map::from_iter([("value".to_owned(), other)]),
                        };
                        element.insert("index".into(), Value::from(*index));
                        Value::Array(vec![Value::Object(element)])
                    }
                    Step::Element(None) => Value::Array(vec![value]),
                };
            }
            match fields.get_mut(&first) {
                Some(target) => merge(target, value),
                None => {
                    fields.insert(first, value);
                }
            }
        }
        changed
    }
}

/// A text's key: its field path, array elements as `*`.
fn path_of(steps: &[Step], elements: Elements) -> String {
    let mut path = String::new();
    for step in steps {
        match step {
            Step::Key(key) => {
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
            }
            Step::Element(Some(index)) if elements == Elements::ByIndex => path.push_str(&format!("/{index}")),
            Step::Element(_) => path.push_str("/*"),
        }
    }
    path
}

/// How a path names array elements: all as one (`*`), or each by its `index` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elements {
    Any,
    ByIndex,
}

/// Put `addition` (built by [`Texts::give_back`]) into `target`: strings appended, objects
/// merged by key, an array element into the element of the same `index` (or, without one, the
/// last element).
fn merge(target: &mut Value, addition: Value) {
    match (target, addition) {
        (Value::String(text), Value::String(more)) => text.push_str(&more),
        (Value::Object(fields), Value::Object(more)) => {
            for (key, value) in more {
                match fields.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        fields.insert(key, value);
                    }
                }
            }
        }
        (Value::Array(items), Value::Array(more)) => {
            for element in more {
                let index = element.get("index").and_then(Value::as_u64);
                let found = match index {
                    Some(index) => items.iter_mut().rfind(|e| e.get("index").and_then(Value::as_u64) == Some(index)),
                    None => items.last_mut(),
                };
                match found {
                    Some(existing) => merge(existing, element),
                    None => items.push(element),
                }
            }
        }
        (target @ Value::Null, addition) => *target = addition,
        // A shape that differs: the text is dropped rather than the answer broken.
        _ => {}
    }
}

/// Where the first whole event of `bytes` ends (after its blank line), if it has come. Lines
/// end with LF, CRLF or CR; a CR at the very end may be the start of a CRLF, so it waits.
fn event_end(bytes: &[u8]) -> Option<usize> {
    let mut start = 0;
    loop {
        let (end, next) = line_end(bytes, start)?;
        if end == start {
            return Some(next);
        }
        start = next;
    }
}

/// The end of the line starting at `start`, and where the next one starts, when both are known.
fn line_end(bytes: &[u8], start: usize) -> Option<(usize, usize)> {
    let rest = bytes.get(start..)?;
    let at = rest.iter().position(|&b| b == b'\n' || b == b'\r')?;
    let end = start + at;
    match (bytes.get(end), bytes.get(end + 1)) {
        (Some(b'\r'), Some(b'\n')) => Some((end, end + 2)),
        (Some(b'\r'), None) => None,
        _ => Some((end, end + 1)),
    }
}

/// The lines of an event, without their ends (a last line without an end included).
fn lines(event: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::new();
    let mut start = 0;
    while start < event.len() {
        match line_end(event, start) {
            Some((end, next)) => {
                lines.push(event.get(start..end).unwrap_or_default());
                start = next;
            }
            None => {
                let line = event.get(start..).unwrap_or_default();
                lines.push(line.strip_suffix(b"\r").unwrap_or(line));
                break;
            }
        }
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}

/// The value of a `data` line (after `data:` and one optional space).
fn data_value(line: &[u8]) -> Option<&[u8]> {
    let value = line.strip_prefix(b"data")?;
    if value.is_empty() {
        return Some(value);
    }
    let value = value.strip_prefix(b":")?;
    Some(value.strip_prefix(b" ").unwrap_or(value))
}

#[cfg(test)]
mod tests;
