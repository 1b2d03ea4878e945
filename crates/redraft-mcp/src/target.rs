//! What `validate` and `submit` check an artifact against: a kind or an inline schema, turned
//! into evaluators once.

use std::sync::Arc;

use redraft::core::canonical::{canonical_json, sha256_hex};
use redraft::core::{EvalInput, Evaluator, Issue, Verdict, codes, extract};
use redraft::eval::kind::Kind;
use redraft::eval::{Formats, SchemaEvaluator};
use serde_json::Value;

/// The key submissions against an inline schema are counted by. Schemas compare by canonical
/// JSON, so key order and spacing do not matter.
pub fn schema_key(schema: &Value) -> String {
    format!("schema:{}", sha256_hex(&canonical_json(schema)))
}

/// A kind or an inline schema, with its evaluators.
#[derive(Debug)]
pub struct Target {
    /// How answers name it: the kind's name, or the schema's title.
    pub label: String,
    pub evaluators: Vec<Arc<dyn Evaluator>>,
    /// The JSON Schema an artifact must match.
    pub schema: Option<Value>,
    pub kind: Option<Arc<Kind>>,
}

impl Target {
    /// A target for an inline schema (compiled here, `format` doing what `formats` says).
    pub fn schema(schema: Value, formats: Formats) -> Result<Self, String> {
        let evaluator = SchemaEvaluator::of(&schema, formats).map_err(|e| e.to_string())?;
        let label = match schema.get("title").and_then(Value::as_str) {
            Some(title) => format!("schema `{title}`"),
            None => "the given schema".to_owned(),
        };
        Ok(Self { label, evaluators: vec![Arc::new(evaluator)], schema: Some(schema), kind: None })
    }

    /// Run every evaluator on `artifact` and combine their verdicts, as the loop does.
    pub async fn evaluate(&self, artifact: &Value, context: &Value, iteration: u32) -> Verdict {
        let input = EvalInput { artifact, context, iteration };
        let mut outcomes = Vec::with_capacity(self.evaluators.len());
        for evaluator in &self.evaluators {
            outcomes.push(evaluator.evaluate(input).await.map(|mut verdict| {
                for issue in &mut verdict.issues {
                    issue.evaluator.get_or_insert_with(|| evaluator.name().into());
                }
                verdict
            }));
        }
        redraft::core::evaluator::combine(outcomes)
    }

    /// Whether the target's schema lets the whole artifact be a string. When it does not, a
    /// string artifact is JSON text (or model output holding JSON) and is read as such.
    pub fn accepts_string(&self) -> bool {
        let Some(schema) = self.schema.as_ref().and_then(Value::as_object) else { return true };
        match schema.get("type") {
            Some(Value::String(t)) => t == "string",
            Some(Value::Array(types)) => types.iter().any(|t| t == "string"),
            _ => !["properties", "required", "items", "prefixItems"].iter().any(|k| schema.contains_key(*k)),
        }
    }

    /// The artifact to check: `artifact` itself, or the JSON found in it when it is a string
    /// the target cannot accept as it is. No JSON in such a string is an `invalid_json` issue.
    pub fn read(&self, artifact: Value) -> Result<Value, Issue> {
        match artifact {
            Value::String(text) if !self.accepts_string() => extract::extract(&text)
                .map(|found| found.value)
                .map_err(|no| Issue::new("", codes::INVALID_JSON, no.to_string())),
            other => Ok(other),
        }
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
        assert!(!Target::schema_checked(json!({"required": ["a"]})).unwrap().accepts_string());
    }

    #[test]
    fn schema_keys_ignore_key_order() {
        let a = schema_key(&json!({"type": "object", "required": ["a"]}));
        assert_eq!(a, schema_key(&json!({"required": ["a"], "type": "object"})));
        assert_ne!(a, schema_key(&json!({"type": "object"})));
        assert!(Target::schema_checked(json!({"type": "strin"})).unwrap_err().contains("not a valid JSON Schema"));
    }
}
