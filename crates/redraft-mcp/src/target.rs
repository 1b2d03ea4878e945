//! What `validate` checks an artifact against — a kind or an inline schema, turned into
//! evaluators — and the key `submit` counts a target's submissions by.

use std::sync::Arc;

use redraft::core::canonical::{canonical_json, sha256_hex};
use redraft::core::{Evaluator, Issue, Verdict};
use redraft::eval::{Formats, SchemaEvaluator};
use serde_json::Value;

/// The key submissions against an inline schema are counted by. Schemas compare by canonical
/// JSON, so key order and spacing do not matter.
pub fn schema_key(schema: &Value) -> String {
    format!("schema:{}", sha256_hex(&canonical_json(schema)))
}

/// How answers name an inline schema: by its title.
pub fn schema_label(schema: &serde_json::Map<String, Value>) -> String {
    match schema.get("title").and_then(Value::as_str) {
        Some(title) => format!("schema `{title}`"),
        None => "the given schema".to_owned(),
    }
}

/// A kind or an inline schema, with its evaluators.
#[derive(Debug)]
pub struct Target {
    pub evaluators: Vec<Arc<dyn Evaluator>>,
    /// The JSON Schema an artifact must match.
    pub schema: Option<Value>,
}

impl Target {
    /// A target for an inline schema (compiled here, `format` doing what `formats` says).
    pub fn schema(schema: Value, formats: Formats) -> Result<Self, String> {
        let evaluator = SchemaEvaluator::of(&schema, formats).map_err(|e| e.to_string())?;
        Ok(Self { evaluators: vec![Arc::new(evaluator)], schema: Some(schema) })
    }

    /// Run every evaluator on `artifact` and combine their verdicts, as an attempt is judged.
    pub async fn evaluate(&self, artifact: &Value, context: &Value, iteration: u32) -> Verdict {
        redraft::runner::verdict(&self.evaluators, artifact, context, iteration).await
    }

    /// The artifact to check: `artifact` itself, or the JSON found in it when it is a string
    /// the target cannot accept as it is. No JSON in such a string is an `invalid_json` issue.
    pub fn read(&self, artifact: Value) -> Result<Value, Issue> {
        redraft::runner::artifact_of(artifact, self.schema.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    impl Target {
        fn schema_checked(schema: Value) -> Result<Self, String> {
            Self::schema(schema, Formats::Checked)
        }
    }

    #[test]
    fn strings_are_read_as_json_only_where_a_string_cannot_be_the_artifact() {
        let object = Target::schema_checked(json!({"type": "object"})).unwrap();
        assert_eq!(object.read(json!("```json\n{\"a\": 1}\n```")).unwrap(), json!({"a": 1}));
        assert_eq!(object.read(json!("no json here")).unwrap_err().code, "invalid_json");
        let string = Target::schema_checked(json!({"type": ["string", "null"]})).unwrap();
        assert_eq!(string.read(json!("{\"a\": 1}")).unwrap(), json!("{\"a\": 1}"));
    }

    #[test]
    fn schema_keys_ignore_key_order() {
        let a = schema_key(&json!({"type": "object", "required": ["a"]}));
        assert_eq!(a, schema_key(&json!({"required": ["a"], "type": "object"})));
        assert_ne!(a, schema_key(&json!({"type": "object"})));
        assert!(Target::schema_checked(json!({"type": "strin"})).unwrap_err().contains("not a valid JSON Schema"));
    }
}
