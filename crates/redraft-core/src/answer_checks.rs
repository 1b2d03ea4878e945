//! The engine's built-in checks of an answer, made beside the evaluators: an answer that
//! gives back what the proposer was shown instead of answering — a placeholder copied from the
//! generated example (`placeholder`), or a JSON Schema (`schema_echo`).

use serde_json::Value;

use crate::issue::{Issue, codes};
use crate::skeleton::placeholder_paths;

/// The `placeholder` issues of `artifact`: one for each place it still holds one of
/// `placeholders` (those of the generated example the proposer was shown).
pub(crate) fn copied_placeholders(artifact: &Value, placeholders: &[&'static str]) -> Vec<Issue> {
    placeholder_paths(artifact, placeholders)
        .into_iter()
        .map(|(path, p)| {
            let mut issue = Issue::new(
                path,
                codes::PLACEHOLDER,
                format!("\"{p}\" is a placeholder from the example: replace it with the real value"),
            );
            issue.evaluator = Some("redraft".into());
            issue
        })
        .collect()
}

/// The `schema_echo` issue when `artifact` is a JSON Schema given back instead of an answer to
/// `schema` (see [`looks_like_a_schema`]).
pub(crate) fn schema_echo(artifact: &Value, schema: &Value) -> Option<Issue> {
    if !looks_like_a_schema(artifact, schema) {
        return None;
    }
    // The validator's complaints (missing properties…) don't say why; this does.
    let mut issue = Issue::new(
        "",
        codes::SCHEMA_ECHO,
        "this is a JSON Schema, not an answer: give the values from the task, in the shape the schema describes",
    );
    issue.evaluator = Some("redraft".into());
    Some(issue)
}

/// Whether `artifact` is a JSON Schema rather than an answer to `schema`: an object with a
/// `type` naming a JSON type and `properties`, `required` or `items` (or with `$schema`),
/// where `schema` itself defines none of those keys as properties of the answer.
pub fn looks_like_a_schema(artifact: &Value, schema: &Value) -> bool {
    let Some(obj) = artifact.as_object() else {
        return false;
    };
    let own = schema.get("properties").and_then(Value::as_object);
    let keyword = |k: &str| obj.contains_key(k) && !own.is_some_and(|p| p.contains_key(k));
    let typed = keyword("type")
        && obj
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| matches!(t, "object" | "array" | "string" | "number" | "integer" | "boolean" | "null"));
    (typed && (keyword("properties") || keyword("required") || keyword("items"))) || keyword("$schema")
}

/// Whether `value` is itself a JSON Schema rather than an answer: an object whose every
/// member is a JSON Schema keyword, with a `$schema`, a `type` naming JSON types, or
/// `properties` describing members. What a model writes when it echoes "a JSON object" back
/// (`{"type": "object"}`), or a schema it was shown.
pub fn is_a_json_schema(value: &Value) -> bool {
    const KEYWORDS: &[&str] = &[
        "$schema",
        "$id",
        "$ref",
        "$defs",
        "definitions",
        "type",
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "items",
        "prefixItems",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "format",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "title",
        "description",
        "default",
        "examples",
    ];
    const TYPES: &[&str] = &["object", "array", "string", "number", "integer", "boolean", "null"];
    let Some(obj) = value.as_object() else {
        return false;
    };
    if obj.is_empty() || !obj.keys().all(|k| KEYWORDS.contains(&k.as_str())) {
        return false;
    }
    let type_names = |t: &Value| match t {
        Value::String(s) => TYPES.contains(&s.as_str()),
        Value::Array(a) => !a.is_empty() && a.iter().all(|t| t.as_str().is_some_and(|s| TYPES.contains(&s))),
        _ => false,
    };
    let described = obj
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty() && p.values().all(|v| v.is_object() || v.is_boolean()));
    obj.contains_key("$schema") || obj.get("type").is_some_and(type_names) || described
}

#[cfg(test)]
mod tests {
    use super::{is_a_json_schema, looks_like_a_schema};
    use serde_json::json;

    #[test]
    fn a_schema_given_back_is_told_apart_from_an_answer() {
        let schema = json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}});
        assert!(looks_like_a_schema(&json!({"title": "Person", "type": "object", "required": ["name"]}), &schema));
        assert!(looks_like_a_schema(&json!({"$schema": "https://json-schema.org/draft/2020-12/schema"}), &schema));
        assert!(!looks_like_a_schema(&json!({"name": "Ann"}), &schema));
        assert!(!looks_like_a_schema(&json!({"type": "welder", "required": ["x"]}), &schema));
        // An answer whose own fields are called `type` and `required` is an answer.
        let forms =
            json!({"type": "object", "properties": {"type": {"type": "string"}, "required": {"type": "array"}}});
        assert!(!looks_like_a_schema(&json!({"type": "object", "required": ["a"]}), &forms));
    }

    #[test]
    fn a_json_schema_is_told_from_an_answer() {
        for schema in [
            json!({"type": "object"}),
            json!({"type": ["string", "null"]}),
            json!({"properties": {"name": {"type": "string"}}, "required": ["name"]}),
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema"}),
            json!({"type": "object", "title": "Person", "description": "A person."}),
        ] {
            assert!(is_a_json_schema(&schema), "{schema}");
        }
        for answer in [
            json!({}),
            json!({"type": "invoice", "total": 3}),
            json!({"type": "nurse"}),
            json!({"name": "Yuki", "type": "object"}),
            json!({"title": "Dr", "description": "A doctor."}),
            json!([{"type": "object"}]),
            json!("object"),
        ] {
            assert!(!is_a_json_schema(&answer), "{answer}");
        }
    }
}
