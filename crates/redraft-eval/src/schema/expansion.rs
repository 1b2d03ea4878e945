//! How many subschemas checking one value may visit: a schema's size with its `$ref`s into the
//! same document expanded. A reference used twice at each of many levels (`a` is `allOf` two
//! `b`, `b` two `c`, …) makes a schema of a few kilobytes that a validator walks 2^levels
//! times for every value; it is refused when it is compiled instead.

use std::collections::HashMap;

use serde_json::Value;

/// The most subschemas one value may meet, `$ref`s expanded.
pub(super) const MAX_EXPANDED_SUBSCHEMAS: u64 = 100_000;

/// Keywords whose values are data, not schemas.
const DATA_KEYWORDS: [&str; 5] = ["enum", "const", "examples", "default", "required"];

/// The size of `root` with references into it expanded, counted up to a little past `limit`.
/// A reference back to a schema on the current path counts one: it recurses only as deep as
/// the value does. References this cannot resolve (other documents, `$id`s) count one.
pub(super) fn expanded_size(root: &Value, limit: u64) -> u64 {
    let mut anchors = HashMap::new();
    collect_anchors(root, &mut anchors);
    let mut walk = Walk { root, anchors, memo: HashMap::new(), path: Vec::new(), limit };
    walk.size(root)
}

struct Walk<'a> {
    root: &'a Value,
    anchors: HashMap<&'a str, &'a Value>,
    /// Sizes already known, by the node's address in `root`.
    memo: HashMap<*const Value, u64>,
    /// The references being expanded, by their targets' addresses.
    path: Vec<*const Value>,
    limit: u64,
}

impl<'a> Walk<'a> {
    fn size(&mut self, node: &'a Value) -> u64 {
        match node {
            Value::Object(fields) => {
                let mut total: u64 = 1;
                for (key, value) in fields {
                    if total > self.limit {
                        break;
                    }
                    let part = match (key.as_str(), value) {
                        (k, _) if DATA_KEYWORDS.contains(&k) => 0,
                        ("$ref" | "$dynamicRef", Value::String(reference)) => self.reference(reference),
                        (_, Value::Object(_) | Value::Array(_)) => self.size(value),
                        _ => 0,
                    };
                    total = total.saturating_add(part);
                }
                total
            }
            Value::Array(items) => {
                let mut total: u64 = 0;
                for item in items {
                    if total > self.limit {
                        break;
                    }
                    total = total.saturating_add(self.size(item));
                }
                total
            }
            _ => 0,
        }
    }

    fn reference(&mut self, reference: &str) -> u64 {
        let Some(target) = self.resolve(reference) else { return 1 };
        let address: *const Value = target;
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

    /// The node a reference into this document names: `#`, `#/json/pointer`, `#anchor`.
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let fragment = reference.strip_prefix('#')?;
        if fragment.is_empty() {
            return Some(self.root);
        }
        if fragment.starts_with('/') {
            return self.root.pointer(&percent_decoded(fragment));
        }
        self.anchors.get(fragment).copied()
    }
}

fn collect_anchors<'a>(node: &'a Value, anchors: &mut HashMap<&'a str, &'a Value>) {
    match node {
        Value::Object(fields) => {
            for key in ["$anchor", "$dynamicAnchor"] {
                if let Some(Value::String(name)) = fields.get(key) {
                    anchors.entry(name.as_str()).or_insert(node);
                }
            }
            fields.values().for_each(|v| collect_anchors(v, anchors));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_anchors(v, anchors)),
        _ => {}
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
        let small = expanded_size(&doubling(10), MAX_EXPANDED_SUBSCHEMAS);
        assert!((2_048..20_000).contains(&small), "{small}");
        assert!(expanded_size(&doubling(40), MAX_EXPANDED_SUBSCHEMAS) > MAX_EXPANDED_SUBSCHEMAS);
    }

    #[test]
    fn recursion_anchors_and_data_count_once() {
        // A tree: a node's children are nodes. Recursion follows the value's depth.
        let tree = json!({"$defs": {"node": {"$anchor": "n", "type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#n"}},
            "parent": {"$ref": "#/$defs/node"}
        }}}, "$ref": "#"});
        let size = expanded_size(&tree, MAX_EXPANDED_SUBSCHEMAS);
        assert!(size < 100, "{size}");
        let values: Vec<Value> = (0..50_000).map(|i| json!({"id": i})).collect();
        assert!(expanded_size(&json!({"enum": values}), MAX_EXPANDED_SUBSCHEMAS) < 5);
    }
}
