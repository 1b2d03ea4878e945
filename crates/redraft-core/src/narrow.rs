//! Narrowing the schema sent for constrained decoding with what the checks learned.
//!
//! A kind rule's hint may carry a schema (`[rules.hint] schema`): what the value at the
//! failed rule's path must also match, drawn from reference data — the roster's ids for the
//! contract's city and role, the occupation the text names. After such a failure the next
//! request's `response_format` is the run's schema with that fragment merged in at the
//! instance path's place (`/fills/0/worker_id` → `properties.fills.items.properties.
//! worker_id`), so a backend that constrains decoding cannot give the refused value again.
//! The checks are unchanged: every evaluator still judges the answer against the run's own
//! schema and rules; the narrowed schema only steers the decoder.

use serde_json::{Map, Value};

/// How many `$ref`s one path may pass through (a cycle stops here, and each is a copy).
const MAX_REFS: usize = 32;

/// How deep a path may go: a rule's path can carry the answer's values, and a recursive schema
/// would follow any depth.
const MAX_DEPTH: usize = 64;

/// The largest fragment placed, as JSON: one listing a whole table would make a grammar larger
/// than the answer it constrains (and the request larger with every attempt).
pub const MAX_FRAGMENT_BYTES: usize = 16 * 1024;

/// `schema` with each `(instance path, fragment)` merged in at the subschema that validates
/// that path: the fragment's members replace the subschema's (an `enum` replaces an `enum`, a
/// `const` or `enum` drops the other). `None` when no fragment could be placed: a path that is
/// not a JSON Pointer, or one the schema does not describe by `properties`, `items` or
/// `prefixItems` (through local `$ref`s, which are inlined on the way so that other uses of a
/// definition keep it whole), a fragment that is not an object, one whose `enum` is empty
/// (nothing could be decoded), or one larger than [`MAX_FRAGMENT_BYTES`].
pub fn narrow<'a>(schema: &Value, constraints: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Option<Value> {
    let mut narrowed = schema.clone();
    let mut placed = false;
    for (path, fragment) in constraints {
        let Value::Object(fragment) = fragment else { continue };
        if !placeable(fragment) {
            continue;
        }
        let Some(tokens) = pointer_tokens(path).filter(|t| t.len() <= MAX_DEPTH) else { continue };
        if let Some(node) = locate(&mut narrowed, schema, &tokens, &mut MAX_REFS.clone()) {
            merge(node, fragment);
            placed = true;
        }
    }
    placed.then_some(narrowed)
}

/// Whether [`narrow`] would place `fragment` (at a path the schema describes): an object, no
/// larger than [`MAX_FRAGMENT_BYTES`], and not an empty `enum` (nothing would match: a decoder
/// held to it could not answer at all).
pub fn fits(fragment: &Value) -> bool {
    fragment.as_object().is_some_and(placeable)
}

fn placeable(fragment: &Map<String, Value>) -> bool {
    let nothing = fragment.get("enum").and_then(Value::as_array).is_some_and(Vec::is_empty);
    let size = serde_json::to_vec(fragment).map_or(usize::MAX, |bytes| bytes.len());
    !nothing && size <= MAX_FRAGMENT_BYTES
}

/// The unescaped tokens of a JSON Pointer (`""` is the whole document); `None` for anything else
/// (`file:line` paths of command checks).
fn pointer_tokens(path: &str) -> Option<Vec<String>> {
    if path.is_empty() {
        return Some(Vec::new());
    }
    let rest = path.strip_prefix('/')?;
    Some(rest.split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect())
}

/// The subschema of `node` (a copy of `root`, being narrowed) that validates the instance at
/// `tokens`.
fn locate<'s>(node: &'s mut Value, root: &Value, tokens: &[String], refs: &mut usize) -> Option<&'s mut Value> {
    inline_refs(node, root, refs)?;
    let Some((token, rest)) = tokens.split_first() else { return Some(node) };
    if node.as_bool() == Some(true) {
        *node = Value::Object(Map::new());
    }
    let fields = node.as_object_mut()?;
    let child = match token.parse::<usize>() {
        Ok(index) if fields.contains_key("prefixItems") || fields.contains_key("items") => element(fields, index)?,
        _ => fields.get_mut("properties")?.as_object_mut()?.get_mut(token.as_str())?,
    };
    locate(child, root, rest, refs)
}

/// The subschema of array element `index`: `prefixItems[index]` (or draft 7's array
/// `items[index]`), else `items`.
fn element(fields: &mut Map<String, Value>, index: usize) -> Option<&mut Value> {
    let prefix = match fields.get("prefixItems") {
        Some(Value::Array(p)) => p.len(),
        _ => 0,
    };
    if index < prefix {
        return fields.get_mut("prefixItems")?.as_array_mut()?.get_mut(index);
    }
    match fields.get_mut("items")? {
        Value::Array(tuple) => tuple.get_mut(index),
        items => Some(items),
    }
}

/// Replace a local `$ref` at `node` by a copy of what it names (its sibling members kept), until
/// `node` has none, taking each from the path's budget `refs`. `None`, with `node` as it was,
/// for a `$ref` that names nothing here or no object (`false`), or past the budget.
fn inline_refs(node: &mut Value, root: &Value, refs: &mut usize) -> Option<()> {
    while let Some(reference) = node.get("$ref").and_then(Value::as_str) {
        *refs = refs.checked_sub(1)?;
        let mut inlined = match reference.strip_prefix('#').and_then(|p| root.pointer(p))? {
            Value::Bool(true) => Map::new(),
            Value::Object(target) => target.clone(),
            _ => return None,
        };
        if let Value::Object(siblings) = node.take() {
            for (key, value) in siblings {
                if key != "$ref" {
                    inlined.entry(key).or_insert(value);
                }
            }
        }
        *node = Value::Object(inlined);
    }
    Some(())
}

fn merge(node: &mut Value, fragment: &Map<String, Value>) {
    if !node.is_object() {
        // `true` (anything) becomes the fragment; `false` cannot be narrowed into anything.
        if node.as_bool() == Some(false) {
            return;
        }
        *node = Value::Object(Map::new());
    }
    let Some(fields) = node.as_object_mut() else { return };
    if fragment.contains_key("enum") || fragment.contains_key("const") {
        fields.remove("enum");
        fields.remove("const");
    }
    for (key, value) in fragment {
        fields.insert(key.clone(), value.clone());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fill_schema() -> Value {
        json!({
            "type": "object",
            "required": ["fills"],
            "properties": {
                "contract_id": {"type": "string"},
                "fills": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["worker_id"],
                        "properties": {"worker_id": {"type": "string", "pattern": "^W-[0-9]+$"}}
                    }
                }
            }
        })
    }

    #[test]
    fn an_element_path_narrows_the_items_schema() {
        let ids = json!({"enum": ["W-9", "W-12"]});
        let narrowed = narrow(&fill_schema(), [("/fills/1/worker_id", &ids)]).unwrap();
        assert_eq!(
            narrowed["properties"]["fills"]["items"]["properties"]["worker_id"],
            json!({"type": "string", "pattern": "^W-[0-9]+$", "enum": ["W-9", "W-12"]})
        );
        // Nothing else changed.
        let mut back = narrowed.clone();
        back["properties"]["fills"]["items"]["properties"]["worker_id"] =
            fill_schema()["properties"]["fills"]["items"]["properties"]["worker_id"].clone();
        assert_eq!(back, fill_schema());
    }

    #[test]
    fn fragments_for_the_array_and_the_whole_document_merge_where_they_say() {
        let count = json!({"minItems": 2, "maxItems": 2});
        let closed = json!({"additionalProperties": false});
        let narrowed = narrow(&fill_schema(), [("/fills", &count), ("", &closed)]).unwrap();
        assert_eq!(narrowed["properties"]["fills"]["minItems"], 2);
        assert_eq!(narrowed["properties"]["fills"]["maxItems"], 2);
        assert_eq!(narrowed["additionalProperties"], false);
    }

    #[test]
    fn an_enum_replaces_an_enum_and_a_const() {
        let schema = json!({"type": "object", "properties": {
            "occupation": {"type": "string", "enum": ["nurse", "electrician", "pilot", "teacher", "other"]},
            "unit": {"const": "kg"}
        }});
        let only = json!({"enum": ["electrician"]});
        let grams = json!({"enum": ["g"]});
        let narrowed = narrow(&schema, [("/occupation", &only), ("/unit", &grams)]).unwrap();
        assert_eq!(narrowed["properties"]["occupation"], json!({"type": "string", "enum": ["electrician"]}));
        assert_eq!(narrowed["properties"]["unit"], json!({"enum": ["g"]}));
    }

    #[test]
    fn a_ref_on_the_way_is_inlined_and_its_other_uses_keep_the_definition() {
        let schema = json!({
            "type": "object",
            "properties": {
                "home": {"$ref": "#/$defs/address", "description": "where they live"},
                "work": {"$ref": "#/$defs/address"}
            },
            "$defs": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}}
        });
        let toledo = json!({"enum": ["Toledo"]});
        let narrowed = narrow(&schema, [("/home/city", &toledo)]).unwrap();
        assert_eq!(narrowed["properties"]["home"]["properties"]["city"], json!({"type": "string", "enum": ["Toledo"]}));
        assert_eq!(narrowed["properties"]["home"]["description"], "where they live");
        assert_eq!(narrowed["properties"]["work"], json!({"$ref": "#/$defs/address"}));
        assert_eq!(narrowed["$defs"], schema["$defs"]);
    }

    #[test]
    fn tuples_take_their_own_element_schema() {
        let schema = json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": {"type": "boolean"}});
        let one = json!({"const": 1});
        let narrowed = narrow(&schema, [("/1", &one), ("/5", &json!({"const": true}))]).unwrap();
        assert_eq!(narrowed["prefixItems"][1], json!({"type": "integer", "const": 1}));
        assert_eq!(narrowed["items"], json!({"type": "boolean", "const": true}));
        assert_eq!(narrowed["prefixItems"][0], json!({"type": "string"}));
    }

    #[test]
    fn escaped_pointer_tokens_name_their_property() {
        let schema = json!({"type": "object", "properties": {"a/b": {"type": "string"}, "c~d": {"type": "string"}}});
        let x = json!({"enum": ["x"]});
        let narrowed = narrow(&schema, [("/a~1b", &x), ("/c~0d", &x)]).unwrap();
        assert_eq!(narrowed["properties"]["a/b"]["enum"], json!(["x"]));
        assert_eq!(narrowed["properties"]["c~d"]["enum"], json!(["x"]));
    }

    #[test]
    fn what_cannot_be_placed_leaves_the_schema_alone() {
        let ids = json!({"enum": ["W-9"]});
        let schema = fill_schema();
        // Not a pointer, a property the schema does not name, a fragment that is not an object.
        assert_eq!(narrow(&schema, [("src/lib.rs:3", &ids)]), None);
        assert_eq!(narrow(&schema, [("/notes", &ids)]), None);
        assert_eq!(narrow(&schema, [("/fills/0/worker_id", &json!(["W-9"]))]), None);
        // An empty `enum`: no worker fits, and a decoder held to it could write nothing.
        assert_eq!(narrow(&schema, [("/fills/0/worker_id", &json!({"enum": []}))]), None);
        // A fragment past the size limit (a whole table); one just under it is placed.
        let table = |n: usize| json!({"enum": (0..n).map(|i| format!("W-{i:05}")).collect::<Vec<_>>()});
        assert_eq!(narrow(&schema, [("/fills/0/worker_id", &table(2000))]), None);
        assert!(narrow(&schema, [("/fills/0/worker_id", &table(1500))]).is_some());
        // A `$ref` that names nothing, and a cycle of them.
        let dangling = json!({"properties": {"a": {"$ref": "#/$defs/missing"}}});
        assert_eq!(narrow(&dangling, [("/a", &ids)]), None);
        let cycle = json!({"properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"$ref": "#/$defs/x"}}});
        assert_eq!(narrow(&cycle, [("/a", &ids)]), None);
        // A `$ref` to `false` on the way: that constraint is dropped and the schema is left whole
        // for the others (not a `null` where the reference was).
        let refused =
            json!({"properties": {"a": {"$ref": "#/$defs/no"}, "b": {"type": "string"}}, "$defs": {"no": false}});
        let narrowed = narrow(&refused, [("/a/x", &ids), ("/b", &ids)]).unwrap();
        assert_eq!(narrowed["properties"]["a"], json!({"$ref": "#/$defs/no"}));
        assert_eq!(narrowed["properties"]["b"], json!({"type": "string", "enum": ["W-9"]}));
        // A path under `anyOf` is not followed.
        let either = json!({"anyOf": [{"properties": {"a": {"type": "string"}}}]});
        assert_eq!(narrow(&either, [("/a", &ids)]), None);
    }

    /// A recursive schema follows a path as deep as the answer makes it (a rule's path can hold
    /// the answer's values): a deep one is refused, not followed until the stack runs out, and
    /// the copies made on the way are bounded.
    #[test]
    fn a_recursive_schema_and_a_deep_path_stop_early() {
        let schema = json!({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
            "next": {"$ref": "#/$defs/node"}, "name": {"type": "string"}}}}});
        let x = json!({"enum": ["x"]});
        let within = format!("{}/name", "/next".repeat(10));
        let narrowed = narrow(&schema, [(within.as_str(), &x)]).unwrap();
        let at = format!("{}/properties/name", "/properties/next".repeat(10));
        assert_eq!(narrowed.pointer(&at), Some(&json!({"type": "string", "enum": ["x"]})));
        for deep in [format!("{}/name", "/next".repeat(100)), format!("{}/name", "/next".repeat(100_000))] {
            assert_eq!(narrow(&schema, [(deep.as_str(), &x)]), None);
        }
        // Within the depth, the `$ref`s a path may pass through are bounded too.
        let many_refs = format!("{}/name", "/next".repeat(40));
        assert_eq!(narrow(&schema, [(many_refs.as_str(), &x)]), None);
    }

    #[test]
    fn fits_says_what_would_be_placed() {
        assert!(fits(&json!({"enum": ["W-9"]})));
        assert!(!fits(&json!({"enum": []})));
        assert!(!fits(&json!(["W-9"])));
        let table = json!({"enum": (0..2000).map(|i| format!("W-{i:05}")).collect::<Vec<_>>()});
        assert!(!fits(&table));
    }

    #[test]
    fn a_schema_of_true_is_narrowed_and_false_is_not() {
        assert_eq!(narrow(&json!(true), [("", &json!({"enum": [1]}))]), Some(json!({"enum": [1]})));
        let schema = json!({"properties": {"a": false, "b": true}});
        let narrowed = narrow(&schema, [("/a", &json!({"enum": [1]})), ("/b", &json!({"enum": [2]}))]).unwrap();
        assert_eq!(narrowed["properties"]["a"], false);
        assert_eq!(narrowed["properties"]["b"], json!({"enum": [2]}));
    }
}
