//! How many subschemas checking one value may visit: a schema's size with its `$ref`s into the
//! same document expanded. A reference used twice at each of many levels (`a` is `allOf` two
//! `b`, `b` two `c`, …) makes a schema of a few kilobytes that a validator walks 2^levels
//! times for every value; it is refused when it is compiled instead.

use std::collections::HashMap;

use serde_json::Value;

/// The most subschemas one value may meet, `$ref`s expanded.
pub(super) const MAX_EXPANDED_SUBSCHEMAS: u64 = 100_000;

/// The size of `root` with references into it expanded, counted up to a little past `limit`.
/// A reference back to a schema on the current path counts one: it recurses only as deep as
/// the value does. References are resolved as a validator resolves them, against the base URI
/// of the schema they stand in (`$id`, `id`, relative ones included): by JSON pointer, anchor
/// (`$anchor`, `$dynamicAnchor`, a plain-name `$id: "#name"`) or embedded resource. One to
/// another document (a sibling schema file) counts one.
///
/// A reference must name a subschema: a schema in a place the validator reads one (under
/// `$defs`, `properties`, `allOf`, …, see `stop::subschemas`), never data (`default`, `enum`)
/// or an unknown keyword's value, which are neither probed nor counted. One that does not is
/// the error.
pub(super) fn expanded_size(root: &Value, limit: u64) -> Result<u64, String> {
    let Ok(base) = url::Url::parse(ROOT_BASE) else { return Ok(0) };
    let mut walk = Walk {
        resources: HashMap::new(),
        anchors: HashMap::new(),
        bases: HashMap::new(),
        memo: HashMap::new(),
        path: Vec::new(),
        limit,
        stray: None,
    };
    walk.resources.insert(without_fragment(&base), root);
    walk.collect(root, &base);
    let size = walk.size(root);
    match walk.stray {
        Some(reference) => Err(reference),
        None => Ok(size),
    }
}

/// The base URI of a schema without an `$id` of its own.
const ROOT_BASE: &str = "redraft:///this-schema";

struct Walk<'a> {
    /// Each resource (the root, each subschema with an `$id`), by its URI without fragment.
    resources: HashMap<String, &'a Value>,
    /// Each anchor, by its resource's URI and its name (`URI#name`).
    anchors: HashMap<String, &'a Value>,
    /// The base URI in force in each schema object, by its address.
    bases: HashMap<*const Value, url::Url>,
    /// Sizes already known, by the node's address.
    memo: HashMap<*const Value, u64>,
    /// The references being expanded, by their targets' addresses.
    path: Vec<*const Value>,
    limit: u64,
    /// A reference that names no subschema.
    stray: Option<String>,
}

fn without_fragment(url: &url::Url) -> String {
    let mut url = url.clone();
    url.set_fragment(None);
    url.to_string()
}

impl<'a> Walk<'a> {
    /// Record the base URI of every schema object below `node`, its resources and anchors.
    fn collect(&mut self, node: &'a Value, base: &url::Url) {
        match node {
            Value::Object(fields) => {
                let mut base = base.clone();
                for key in ["$id", "id"] {
                    let Some(Value::String(id)) = fields.get(key) else { continue };
                    if let Some(name) = id.strip_prefix('#') {
                        self.anchors.insert(format!("{}#{name}", without_fragment(&base)), node);
                    } else if let Ok(joined) = base.join(id) {
                        base = joined;
                        self.resources.insert(without_fragment(&base), node);
                    }
                }
                for key in ["$anchor", "$dynamicAnchor"] {
                    if let Some(Value::String(name)) = fields.get(key) {
                        self.anchors.insert(format!("{}#{name}", without_fragment(&base)), node);
                    }
                }
                self.bases.insert(node, base.clone());
                for subschema in super::stop::subschemas(fields) {
                    self.collect(subschema, &base);
                }
            }
            Value::Bool(_) => {
                self.bases.insert(node, base.clone());
            }
            _ => {}
        }
    }

    fn size(&mut self, node: &'a Value) -> u64 {
        let Value::Object(fields) = node else { return 1 };
        let mut total: u64 = 1;
        for key in ["$ref", "$dynamicRef", "$recursiveRef"] {
            if let Some(Value::String(reference)) = fields.get(key) {
                total = total.saturating_add(self.reference(node, reference));
            }
        }
        for subschema in super::stop::subschemas(fields) {
            if total > self.limit {
                break;
            }
            total = total.saturating_add(self.size(subschema));
        }
        total
    }

    fn reference(&mut self, from: &'a Value, reference: &str) -> u64 {
        let Some(target) = self.resolve(from, reference) else { return 1 };
        let address: *const Value = target;
        if !self.bases.contains_key(&address) {
            self.stray.get_or_insert_with(|| reference.to_owned());
            return 1;
        }
        if self.path.contains(&address) {
            return 1;
        }
        if let Some(&known) = self.memo.get(&address) {
            return known;
        }
        self.path.push(address);
        let size = self.size(target);
        self.path.pop();
        self.memo.insert(address, size);
        size
    }

    /// The schema `reference` names, read in the schema `from`.
    fn resolve(&self, from: &'a Value, reference: &str) -> Option<&'a Value> {
        let base = self.bases.get(&(from as *const Value))?;
        let target = base.join(reference).ok()?;
        let document = *self.resources.get(&without_fragment(&target))?;
        match target.fragment().unwrap_or_default() {
            "" => Some(document),
            pointer if pointer.starts_with('/') => document.pointer(&percent_decoded(pointer)),
            name => {
                let name = percent_decoded(name);
                self.anchors.get(&format!("{}#{name}", without_fragment(&target))).copied()
            }
        }
    }
}

/// `%XX` escapes decoded, as a URI fragment holds them.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(decoded) if b == b'%' => {
                out.push(decoded);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `a0` is `allOf` two `a1`, …: `levels` levels of doubling.
    fn doubling(levels: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..levels {
            let next = json!({"$ref": format!("#/$defs/a{}", i + 1)});
            defs.insert(format!("a{i}"), json!({"allOf": [next.clone(), next]}));
        }
        defs.insert(format!("a{levels}"), json!({"type": "string"}));
        json!({"$defs": defs, "$ref": "#/$defs/a0"})
    }

    #[test]
    fn references_used_twice_at_each_level_grow_as_a_power_of_two() {
        let small = expanded_size(&doubling(10), MAX_EXPANDED_SUBSCHEMAS).unwrap();
        assert!((2_048..20_000).contains(&small), "{small}");
        assert!(expanded_size(&doubling(40), MAX_EXPANDED_SUBSCHEMAS).unwrap() > MAX_EXPANDED_SUBSCHEMAS);
    }

    #[test]
    fn references_by_id_relative_or_plain_name_are_expanded_too() {
        // Each definition a resource of its own, referred to by its absolute `$id`, by a URI
        // relative to the root's `$id`, or by a draft-07 plain name.
        type Names = fn(usize) -> (String, String);
        let forms: [(&str, Names); 3] = [
            (r#"{}"#, |i| (format!("https://x.test/a{i}"), format!("https://x.test/a{}", i + 1))),
            (r#"{"$id": "https://x.test/root.json"}"#, |i| (format!("a{i}"), format!("a{}", i + 1))),
            (r#"{"$schema": "http://json-schema.org/draft-07/schema#"}"#, |i| {
                (format!("#a{i}"), format!("#a{}", i + 1))
            }),
        ];
        for (root, names) in forms {
            let mut root: Value = serde_json::from_str(root).unwrap();
            let mut defs = serde_json::Map::new();
            for i in 0..40 {
                let (id, next) = names(i);
                defs.insert(format!("a{i}"), json!({"$id": id, "allOf": [{"$ref": next.clone()}, {"$ref": next}]}));
            }
            defs.insert("a40".into(), json!({"$id": names(40).0, "type": "string"}));
            root["definitions"] = Value::Object(defs);
            root["$ref"] = json!(names(0).0);
            let size = expanded_size(&root, MAX_EXPANDED_SUBSCHEMAS).unwrap();
            assert!(size > MAX_EXPANDED_SUBSCHEMAS, "{size}: {root}");
        }
    }

    #[test]
    fn recursion_anchors_and_data_count_once() {
        // A tree: a node's children are nodes. Recursion follows the value's depth.
        let tree = json!({"$defs": {"node": {"$anchor": "n", "type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#n"}},
            "parent": {"$ref": "#/$defs/node"}
        }}}, "$ref": "#"});
        let size = expanded_size(&tree, MAX_EXPANDED_SUBSCHEMAS).unwrap();
        assert!(size < 100, "{size}");
        let values: Vec<Value> = (0..50_000).map(|i| json!({"id": i})).collect();
        assert!(expanded_size(&json!({"enum": values}), MAX_EXPANDED_SUBSCHEMAS).unwrap() < 5);
    }

    #[test]
    fn a_reference_must_name_a_subschema_not_data_nor_an_unknown_keyword() {
        for root in [
            json!({"default": {"a": {"type": "string"}}, "$ref": "#/default/a"}),
            json!({"x": {"r": {"type": "string"}}, "$ref": "#/x/r"}),
        ] {
            let error = expanded_size(&root, MAX_EXPANDED_SUBSCHEMAS).unwrap_err();
            assert!(root.to_string().contains(&error), "{error}: {root}");
        }
        let fine = json!({"$defs": {"a": {"items": [{"type": "string"}]}}, "$ref": "#/$defs/a/items/0"});
        assert!(expanded_size(&fine, MAX_EXPANDED_SUBSCHEMAS).is_ok());
    }
}
