//! `kind:NAME` as an evaluator: the kind's schema, then — only when the schema passes — its
//! rules. (The kind's LLM check is a separate evaluator, built where the judge is.)

use std::sync::Arc;

use redraft_core::{CancelFlag, EvalInput, Evaluator, EvaluatorError, Issue, Verdict};
use serde_json::Value;

use super::{Kind, KindError};
use crate::schema::{Formats, SchemaError, SchemaEvaluator};

/// Checks artifacts against a kind: schema first, rules when the schema passes.
#[derive(Debug)]
pub struct KindEvaluator {
    name: String,
    kind: Arc<Kind>,
    schema: SchemaEvaluator,
}

impl KindEvaluator {
    /// An evaluator for `kind`; its schema is compiled here, `format` doing what `formats`
    /// says.
    pub fn new(kind: Arc<Kind>, formats: Formats) -> Result<Self, KindError> {
        let schema = SchemaEvaluator::of(&kind.schema, formats).map_err(|e| KindError::Schema {
            path: kind.dir().join("schema.json"),
            message: match e {
                SchemaError::Invalid { message, .. } => message,
                other => other.to_string(),
            },
        })?;
        Ok(Self { name: format!("kind:{}", kind.name), kind, schema })
    }

    /// The kind this evaluator checks.
    pub fn kind(&self) -> &Arc<Kind> {
        &self.kind
    }

    /// The issues of one artifact: schema issues, or — when there is no schema error — the
    /// rules' issues.
    pub fn issues(&self, artifact: &Value, context: &Value) -> Vec<Issue> {
        self.issues_until(artifact, context, &CancelFlag::new())
    }

    /// [`KindEvaluator::issues`], stopping once `cancel` is set.
    fn issues_until(&self, artifact: &Value, context: &Value, cancel: &CancelFlag) -> Vec<Issue> {
        let mut issues = self.schema.issues_until(artifact, cancel);
        if !issues.iter().any(Issue::is_error) {
            issues.extend(self.kind.check_rules_until(artifact, context, cancel));
        }
        issues
    }
}

#[async_trait::async_trait]
impl Evaluator for KindEvaluator {
    fn name(&self) -> &str {
        &self.name
    }

    fn schema(&self) -> Option<Arc<Value>> {
        Some(self.schema.shared_schema())
    }

    async fn evaluate(&self, input: EvalInput<'_>) -> Result<Verdict, EvaluatorError> {
        Ok(Verdict::from_issues(self.issues_until(input.artifact, input.context, input.cancel)))
    }
}
