//! What coercion reads of a JSON Schema: `type`, `enum`/`const`, the object and array keywords
//! and `anyOf`/`oneOf`, with local `$ref`s (`#/$defs/…`, `#/definitions/…`) and `allOf`
//! followed. Every other keyword (`pattern`, `minimum`, `format`, …) is the evaluator's.

use serde_json::{Map, Value};

/// How many `$ref`s and `allOf` branches are followed from one schema.
const MAX_HOPS: usize = 32;
/// How many schemas one value may have to fit at once (`allOf`, a `$ref` with siblings).
const MAX_PARTS: usize = 16;

/// Keywords that say what a value may be. A schema object without any of them (`{}`, or only
/// `description`, `title`, `default`…) admits anything.
const SHAPE: [&str; 14] = [
    "type",
    "nullable",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "anyOf",
    "oneOf",
    "not",
];

/// A schema as coercion sees it, `$ref`s and `allOf` followed.
#[derive(Debug)]
pub(super) enum Node<'s> {
    /// Anything fits: `true`, `{}`, annotations only, or a `$ref` that cannot be followed.
    Any,
    /// Nothing fits: `false`.
    Never,
    /// One schema object.
    One(&'s Map<String, Value>),
    /// Several schema objects a value must all fit.
    All(Vec<&'s Map<String, Value>>),
}

/// The schema refers or nests further than coercion follows.
#[derive(Debug)]
pub(super) struct TooComplex;

/// `schema` (a part of `root`) as a [`Node`].
pub(super) fn node<'s>(root: &'s Value, schema: &'s Value) -> Result<Node<'s>, TooComplex> {
    if let Value::Object(map) = schema
        && !map.contains_key("$ref")
        && !map.contains_key("allOf")
    {
        // the common case, without references: no list to build
        let shaped = map.keys().any(|k| SHAPE.contains(&k.as_str()));
        return Ok(if shaped { Node::One(map) } else { Node::Any });
    }
    let mut parts = Vec::new();
    let mut hops = 0;
    if !collect(root, schema, &mut parts, &mut hops)? {
        return Ok(Node::Never);
    }
    Ok(match parts.as_slice() {
        [] => Node::Any,
        [one] => Node::One(one),
        _ => Node::All(parts),
    })
}

/// Add the parts of `schema` that say what a value may be; `false` when one of them is the
/// schema `false`.
fn collect<'s>(
    root: &'s Value,
    schema: &'s Value,
    parts: &mut Vec<&'s Map<String, Value>>,
    hops: &mut usize,
) -> Result<bool, TooComplex> {
    let map = match schema {
        Value::Bool(admits) => return Ok(*admits),
        Value::Object(map) => map,
        // not a schema: it says nothing
        _ => return Ok(true),
    };
    if map.keys().any(|k| SHAPE.contains(&k.as_str())) {
        if parts.len() >= MAX_PARTS {
            return Err(TooComplex);
        }
        parts.push(map);
    }
    let refs = map.get("$ref").and_then(Value::as_str).and_then(|r| resolve(root, r));
    let all = map.get("allOf").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for next in refs.into_iter().chain(all) {
        *hops += 1;
        if *hops > MAX_HOPS {
            return Err(TooComplex);
        }
        if !collect(root, next, parts, hops)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The schema a local `$ref` names: `#` or a JSON Pointer after `#`. Other references (remote,
/// by `$id`, `$dynamicRef`) are not followed.
fn resolve<'s>(root: &'s Value, reference: &str) -> Option<&'s Value> {
    match reference.strip_prefix('#')? {
        "" => Some(root),
        pointer => root.pointer(pointer),
    }
}

/// The branches of an `anyOf` (or `oneOf`) that is all a schema says, if it is.
pub(super) fn branches(schema: &Map<String, Value>) -> Option<&Vec<Value>> {
    let list = schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array)?;
    let own = schema.keys().any(|k| SHAPE.contains(&k.as_str()) && !matches!(k.as_str(), "anyOf" | "oneOf"));
    (!own).then_some(list)
}

/// The values `enum` (or `const`) allows, if it says.
pub(super) fn members(schema: &Map<String, Value>) -> Option<&[Value]> {
    match (schema.get("enum"), schema.get("const")) {
        (Some(Value::Array(list)), _) => Some(list),
        (_, Some(one)) => Some(std::slice::from_ref(one)),
        _ => None,
    }
}

/// The property names `required` lists.
pub(super) fn required(schema: &Map<String, Value>) -> impl Iterator<Item = &str> {
    schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

/// The JSON types a `type` keyword names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Types(u8);

impl Types {
    pub(super) const NULL: u8 = 1;
    pub(super) const BOOLEAN: u8 = 1 << 1;
    pub(super) const INTEGER: u8 = 1 << 2;
    pub(super) const NUMBER: u8 = 1 << 3;
    pub(super) const STRING: u8 = 1 << 4;
    pub(super) const ARRAY: u8 = 1 << 5;
    pub(super) const OBJECT: u8 = 1 << 6;

    /// The types `schema` names; `None` when it names none it knows (any type then fits).
    pub(super) fn of(schema: &Map<String, Value>) -> Option<Types> {
        let bit = |name: &str| match name {
            "null" => Self::NULL,
            "boolean" => Self::BOOLEAN,
            "integer" => Self::INTEGER,
            "number" => Self::NUMBER,
            "string" => Self::STRING,
            "array" => Self::ARRAY,
            "object" => Self::OBJECT,
            _ => 0,
        };
        let mut bits = match schema.get("type")? {
            Value::String(name) => bit(name),
            Value::Array(names) => names.iter().filter_map(Value::as_str).fold(0, |acc, n| acc | bit(n)),
            _ => 0,
        };
        if bits == 0 {
            return None;
        }
        if schema.get("nullable") == Some(&Value::Bool(true)) {
            bits |= Self::NULL;
        }
        Some(Types(bits))
    }

    pub(super) fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// Whether `value` is of one of the types (a number with no fraction is an integer).
    pub(super) fn allows(self, value: &Value) -> bool {
        match value {
            Value::Null => self.has(Self::NULL),
            Value::Bool(_) => self.has(Self::BOOLEAN),
            Value::Number(n) => self.has(Self::NUMBER) || (self.has(Self::INTEGER) && integral(n)),
            Value::String(_) => self.has(Self::STRING),
            Value::Array(_) => self.has(Self::ARRAY),
            Value::Object(_) => self.has(Self::OBJECT),
        }
    }
}

/// Whether `n` has no fraction (`12.0` is an integer, as JSON Schema counts).
pub(super) fn integral(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parts(root: &Value, schema: &Value) -> String {
        match node(root, schema) {
            Ok(Node::Any) => "any".into(),
            Ok(Node::Never) => "never".into(),
            Ok(Node::One(m)) => Value::Object(m.clone()).to_string(),
            Ok(Node::All(ms)) => format!("all of {}", ms.len()),
            Err(TooComplex) => "too complex".into(),
        }
    }

    #[test]
    fn refs_and_all_of_are_followed() {
        let root = json!({
            "$defs": {"n": {"type": "number"}, "loop": {"$ref": "#/$defs/loop"}},
            "definitions": {"s": {"type": "string"}}
        });
        let check = |schema: Value, expect: &str| assert_eq!(parts(&root, &schema), expect, "{schema}");
        check(json!({"$ref": "#/$defs/n", "description": "x"}), r#"{"type":"number"}"#);
        check(json!({"$ref": "#/definitions/s"}), r#"{"type":"string"}"#);
        check(json!({"allOf": [{"$ref": "#/$defs/n"}]}), r#"{"type":"number"}"#);
        check(json!({"$ref": "#/$defs/n", "minimum": 0, "enum": [1]}), "all of 2");
        check(json!({"$ref": "https://example.org/x"}), "any");
        check(json!({"description": "only words"}), "any");
        check(json!(true), "any");
        check(json!(false), "never");
        check(json!({"allOf": [{"type": "number"}, false]}), "never");
        check(json!({"$ref": "#/$defs/loop"}), "too complex");
        check(json!({"$ref": "#"}), "any");
    }

    #[test]
    fn types() {
        let t = |schema: Value| Types::of(schema.as_object().unwrap_or(&Map::new()));
        let int = t(json!({"type": "integer"})).unwrap_or(Types(0));
        assert!(int.allows(&json!(12)) && int.allows(&json!(12.0)) && !int.allows(&json!(12.5)));
        let nullable = t(json!({"type": ["number", "null"]})).unwrap_or(Types(0));
        assert!(nullable.allows(&Value::Null) && nullable.allows(&json!(1.5)) && !nullable.allows(&json!("1")));
        assert!(t(json!({"type": "string", "nullable": true})).is_some_and(|t| t.allows(&Value::Null)));
        assert_eq!(t(json!({"type": "mystery"})), None);
        assert_eq!(t(json!({"properties": {}})), None);
    }
}
