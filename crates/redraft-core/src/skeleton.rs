//! The example instance generated from a JSON Schema (a skeleton of placeholders), the
//! placeholders it uses, and the skeleton filled in again with what the answers so far gave.
//! The prompts show it; the engine checks an answer for placeholders copied from it.

use serde_json::{Map, Value};

use crate::prompt::pretty;

/// The placeholder strings a generated [`skeleton`] uses. An answer that still holds one
/// copied the example instead of filling it in.
pub const PLACEHOLDERS: [&str; 8] =
    ["<string>", "<date YYYY-MM-DD>", "<date-time>", "<email>", "<uri>", "<integer>", "<number>", "<boolean>"];

/// The placeholders a [`skeleton_text`] shows bare, in place of a number or a boolean.
const BARE: [&str; 3] = ["<integer>", "<number>", "<boolean>"];

/// The placeholders of [`PLACEHOLDERS`] that occur in `example` (a generated skeleton).
pub fn placeholders_in(example: &Value) -> Vec<&'static str> {
    fn walk(v: &Value, found: &mut [bool; PLACEHOLDERS.len()]) {
        match v {
            Value::String(s) => {
                if let Some(i) = PLACEHOLDERS.iter().position(|p| *p == s.as_str()) {
                    found[i] = true;
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, found)),
            Value::Object(map) => map.values().for_each(|item| walk(item, found)),
            _ => {}
        }
    }
    let mut found = [false; PLACEHOLDERS.len()];
    walk(example, &mut found);
    PLACEHOLDERS.into_iter().zip(found).filter_map(|(p, f)| f.then_some(p)).collect()
}

/// Where `value` holds one of `placeholders` as a string: (JSON Pointer, placeholder).
pub fn placeholder_paths(value: &Value, placeholders: &[&'static str]) -> Vec<(String, &'static str)> {
    fn walk(v: &Value, at: &mut String, ps: &[&'static str], out: &mut Vec<(String, &'static str)>) {
        match v {
            Value::String(s) => {
                if let Some(p) = ps.iter().find(|p| **p == s.as_str()) {
                    out.push((at.clone(), p));
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = at.len();
                    at.push_str(&format!("/{i}"));
                    walk(item, at, ps, out);
                    at.truncate(len);
                }
            }
            Value::Object(map) => {
                for (k, item) in map {
                    let len = at.len();
                    at.push('/');
                    at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    walk(item, at, ps, out);
                    at.truncate(len);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if !placeholders.is_empty() {
        walk(value, &mut String::new(), placeholders, &mut out);
    }
    out
}

/// An example instance generated from a JSON Schema: every property filled with a
/// placeholder (`"<string>"`, `0`, `false`), the first enum value, or the schema's own
/// example or default. `$ref`s into `$defs`/`definitions` are followed a bounded depth.
pub fn skeleton(schema: &Value) -> Value {
    skeleton_at(schema, &mut Walk::new(schema, false), 0)
}

/// The skeleton shown to a model: like [`skeleton`], but a number or boolean is shown as a
/// bare `<integer>`, `<number>` or `<boolean>` (the text is a pattern, not JSON). Small models
/// copy a `0` or `false` from an example as if it were the answer: with SmolLM2-135M, an age
/// came back `0` in 4 of 5 extractions under `"age": 0` and right in 5 of 5 under
/// `"age": <integer>` (BENCHMARKS.md section 5). Returns the text and the placeholders in it.
pub fn skeleton_text(schema: &Value) -> (String, Vec<&'static str>) {
    let value = bare_skeleton(schema);
    (skeleton_value_text(&value), placeholders_in(&value))
}

/// The skeleton `value` (from [`skeleton`] with bare placeholders) as text shown to a model,
/// with the placeholders still in it.
pub fn skeleton_value_text(value: &Value) -> String {
    let mut text = pretty(value);
    for bare in BARE {
        text = text.replace(&format!("\"{bare}\""), bare);
    }
    text
}

/// The skeleton generated from `schema` with bare placeholders (`"<integer>"` for a number),
/// as a value: what [`skeleton_text`] renders.
pub fn bare_skeleton(schema: &Value) -> Value {
    skeleton_at(schema, &mut Walk::new(schema, true), 0)
}

/// The example `skeleton` with what is known filled in: each placeholder whose place holds a
/// value in one of `known` (earlier answers, most trusted first) that is not itself a
/// placeholder takes that value, if it has the placeholder's JSON type (a number for
/// `<number>`, a string for `<string>`…). Nothing is invented: what no answer gave stays a
/// placeholder. A model that answered in prose or copied the example is shown its own values
/// in the shape, instead of the bare skeleton again.
pub fn fill_known(skeleton: &Value, known: &[&Value]) -> Value {
    match skeleton {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, sub) in map {
                let inner: Vec<&Value> = known.iter().filter_map(|k| k.get(key)).collect();
                out.insert(key.clone(), fill_known(sub, &inner));
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            // A whole array from the first answer that gave one free of placeholders.
            let given = known.iter().find_map(|k| match k {
                Value::Array(a) if !a.is_empty() && !a.iter().any(holds_placeholder) => Some(*k),
                _ => None,
            });
            match (given, items.first()) {
                (Some(array), Some(shape)) if array.as_array().is_some_and(|a| a.iter().all(|v| fits(shape, v))) => {
                    array.clone()
                }
                _ => skeleton.clone(),
            }
        }
        Value::String(s) if PLACEHOLDERS.contains(&s.as_str()) => known
            .iter()
            .find(|k| !holds_placeholder(k) && fits(skeleton, k))
            .map_or_else(|| skeleton.clone(), |k| (*k).clone()),
        _ => skeleton.clone(),
    }
}

/// The `Key: value` lines of a prose answer whose key names a top-level member of the object
/// `skeleton` (case, spaces, `-` and `_` aside), as an object of those members: what a model
/// that answered `Name: Yuki Tanaka` / `Age: 27` gave. A value is read as the placeholder's
/// type asks (a number for `<integer>` or `<number>`, `true`/`false`/`yes`/`no` for
/// `<boolean>`, else the text without its quotes); one that does not read so is left out.
pub fn prose_pairs(raw: &str, skeleton: &Value) -> Value {
    let Some(members) = skeleton.as_object() else {
        return Value::Null;
    };
    let norm = |k: &str| k.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect::<String>();
    let mut out = Map::new();
    for line in raw.lines().take(200) {
        let line = line.trim().trim_start_matches(['-', '*', '•']).trim();
        if line.starts_with(['{', '[']) {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else { continue };
        let key = norm(key.trim().trim_matches(['"', '\'', '*', '`']));
        let Some((name, shape)) = members.iter().find(|(name, _)| norm(name) == key) else { continue };
        if out.contains_key(name) {
            continue;
        }
        let value = value.trim().trim_end_matches(',').trim().trim_matches(['"', '\'', '`']).trim();
        if value.is_empty() {
            continue;
        }
        let read = match shape.as_str() {
            Some("<integer>") => value.parse::<i64>().ok().map(Value::from),
            Some("<number>") => value.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number),
            Some("<boolean>") => match value.to_ascii_lowercase().as_str() {
                "true" | "yes" => Some(Value::Bool(true)),
                "false" | "no" => Some(Value::Bool(false)),
                _ => None,
            },
            Some(p) if PLACEHOLDERS.contains(&p) => Some(Value::String(value.to_owned())),
            _ => None,
        };
        if let Some(read) = read {
            out.insert(name.clone(), read);
        }
    }
    Value::Object(out)
}

/// Whether `value` holds a placeholder string anywhere.
fn holds_placeholder(value: &Value) -> bool {
    match value {
        Value::String(s) => PLACEHOLDERS.contains(&s.as_str()),
        Value::Array(a) => a.iter().any(holds_placeholder),
        Value::Object(m) => m.values().any(holds_placeholder),
        _ => false,
    }
}

/// Whether `value` has the JSON type of the skeleton's `shape` (a placeholder names its type).
fn fits(shape: &Value, value: &Value) -> bool {
    match shape {
        Value::String(p) => match p.as_str() {
            "<integer>" => value.as_i64().is_some() || value.as_u64().is_some(),
            "<number>" => value.is_number(),
            "<boolean>" => value.is_boolean(),
            _ => value.is_string() && !value.as_str().is_some_and(str::is_empty),
        },
        Value::Object(_) => value.is_object(),
        Value::Array(_) => value.is_array(),
        Value::Number(_) => value.is_number(),
        Value::Bool(_) => value.is_boolean(),
        Value::Null => true,
    }
}

/// Most values in one skeleton: a schema whose properties refer back to itself would otherwise
/// make a skeleton (and the prompt showing it) grow as a power of its size.
const MAX_NODES: usize = 500;

/// What the generation of one skeleton keeps track of: the schema's root, the `$ref`s being
/// expanded on the way down (one met again is recursion, shown as `null`), and the values
/// still allowed.
struct Walk<'a> {
    root: &'a Value,
    bare: bool,
    expanding: Vec<&'a str>,
    nodes_left: usize,
}

impl<'a> Walk<'a> {
    fn new(root: &'a Value, bare: bool) -> Self {
        Self { root, bare, expanding: Vec::new(), nodes_left: MAX_NODES }
    }
}

fn skeleton_at<'a>(node: &'a Value, walk: &mut Walk<'a>, depth: usize) -> Value {
    if depth > 8 || walk.nodes_left == 0 {
        return Value::Null;
    }
    walk.nodes_left -= 1;
    let Some(obj) = node.as_object() else {
        return Value::Null;
    };
    let root = walk.root;
    let bare = walk.bare;
    if let Some(r) = obj.get("$ref").and_then(Value::as_str)
        && let Some(target) = r.strip_prefix('#').and_then(|p| root.pointer(p))
    {
        if walk.expanding.contains(&r) {
            return Value::Null;
        }
        walk.expanding.push(r);
        let value = skeleton_at(target, walk, depth + 1);
        walk.expanding.pop();
        return value;
    }
    for key in ["const", "default"] {
        if let Some(v) = obj.get(key) {
            return v.clone();
        }
    }
    if let Some(v) = obj.get("examples").and_then(Value::as_array).and_then(|a| a.first()) {
        return v.clone();
    }
    if let Some(v) = obj.get("enum").and_then(Value::as_array).and_then(|a| a.first()) {
        return v.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = obj
            .get(key)
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|s| s.get("type").and_then(Value::as_str) != Some("null")))
        {
            return skeleton_at(first, walk, depth + 1);
        }
    }
    let ty = match obj.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ if obj.contains_key("properties") => Some("object"),
        _ if obj.contains_key("items") => Some("array"),
        _ => None,
    };
    match ty {
        Some("object") => {
            let mut out = Map::new();
            if let Some(props) = obj.get("properties").and_then(Value::as_object) {
                for (name, sub) in props {
                    out.insert(name.clone(), skeleton_at(sub, walk, depth + 1));
                }
            }
            Value::Object(out)
        }
        Some("array") => match obj.get("items") {
            Some(items) if items.is_object() => Value::Array(vec![skeleton_at(items, walk, depth + 1)]),
            _ => Value::Array(Vec::new()),
        },
        Some("string") => Value::String(match obj.get("format").and_then(Value::as_str) {
            Some("date") => "<date YYYY-MM-DD>".into(),
            Some("date-time") => "<date-time>".into(),
            Some("email") => "<email>".into(),
            Some("uri") => "<uri>".into(),
            _ => "<string>".into(),
        }),
        Some(t @ ("integer" | "number" | "boolean")) if bare => Value::String(format!("<{t}>")),
        Some("integer") | Some("number") => Value::from(0),
        Some("boolean") => Value::Bool(false),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_referring_to_itself_gives_a_small_skeleton() {
        // Forty properties each referring back to the whole schema: every level would multiply
        // the skeleton by forty.
        let properties: Map<String, Value> = (0..40).map(|i| (format!("p{i}"), json!({"$ref": "#"}))).collect();
        let schema = json!({"type": "object", "properties": properties});
        let value = bare_skeleton(&schema);
        assert_eq!(value.as_object().map(Map::len), Some(40));
        // A reference is expanded once on a path: below it, the recursion shows as `null`.
        let inner = &value["p0"];
        assert!(inner.as_object().is_some_and(|m| m.values().all(Value::is_null)), "{inner}");
        let text = skeleton_text(&schema).0;
        assert!(text.len() < 20_000, "{} bytes", text.len());
        // Wide and deep without recursion: bounded too.
        let mut wide = json!({"type": "string"});
        for _ in 0..4 {
            let properties: Map<String, Value> = (0..10).map(|i| (format!("k{i}"), wide.clone())).collect();
            wide = json!({"type": "object", "properties": properties});
        }
        let text = skeleton_text(&wide).0;
        assert!(text.len() < 20_000, "{} bytes", text.len());
    }

    #[test]
    fn skeleton_fills_placeholders_and_follows_refs() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": ["integer", "null"]},
                "role": {"enum": ["welder", "fitter"]},
                "born": {"type": "string", "format": "date"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "home": {"$ref": "#/$defs/Place"}
            },
            "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}, "ok": {"type": "boolean"}}}}
        });
        insta::assert_snapshot!(pretty(&skeleton(&schema)), @r#"
        {
          "name": "<string>",
          "age": 0,
          "role": "welder",
          "born": "<date YYYY-MM-DD>",
          "tags": [
            "<string>"
          ],
          "home": {
            "city": "<string>",
            "ok": false
          }
        }
        "#);
    }

    #[test]
    fn the_skeleton_shown_to_a_model_leaves_numbers_and_booleans_as_bare_placeholders() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "age": {"type": "integer"}, "ok": {"type": "boolean"},
            "kind": {"enum": ["a", "b"]}, "scores": {"type": "array", "items": {"type": "number"}}}});
        let (text, placeholders) = skeleton_text(&schema);
        insta::assert_snapshot!(text, @r#"
        {
          "name": "<string>",
          "age": <integer>,
          "ok": <boolean>,
          "kind": "a",
          "scores": [
            <number>
          ]
        }
        "#);
        assert_eq!(placeholders, vec!["<string>", "<integer>", "<number>", "<boolean>"]);
        // The skeleton as a value (the MCP `example` tool) stays valid JSON of the schema's types.
        assert_eq!(skeleton(&schema)["age"], json!(0));
    }

    #[test]
    fn placeholders_are_found_with_their_paths() {
        let example = json!({"name": "<string>", "born": "<date YYYY-MM-DD>", "n": 0});
        let ps = placeholders_in(&example);
        assert_eq!(ps, vec!["<string>", "<date YYYY-MM-DD>"]);
        let answer = json!({"name": "Ann", "tags": ["<string>"], "a/b": {"born": "<date YYYY-MM-DD>"}, "x": "<uri>"});
        assert_eq!(
            placeholder_paths(&answer, &ps),
            vec![("/tags/0".to_owned(), "<string>"), ("/a~1b/born".to_owned(), "<date YYYY-MM-DD>")]
        );
    }

    #[test]
    fn skeleton_survives_recursive_refs() {
        let schema = json!({"$ref": "#", "type": "object"});
        assert_eq!(skeleton(&schema), Value::Null);
    }
}
