//! The artifact found in a proposer's text: JSON extracted from it in structured mode, coerced
//! toward the plan's schema, or the text itself in text mode.

use std::sync::Arc;

use serde_json::Value;

use super::Engine;
use crate::answer_checks::{is_a_json_schema, looks_like_a_schema};
use crate::extract::{self, Coercion, Route};
use crate::issue::{Issue, codes};
use crate::plan::Mode;
use crate::record::RecordedRepair;

/// The artifact found in a proposer's text, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactRead {
    pub artifact: Option<Value>,
    pub extraction: Option<Route>,
    /// What extraction repaired in the text, then what coercion changed.
    pub repairs: Vec<RecordedRepair>,
    /// The `invalid_json` issue when no artifact was found.
    pub issue: Option<Issue>,
}

/// What reads the artifact in a proposer's text, apart from the engine (cheap to clone): the
/// runner reads answers with it on a thread of their own.
#[derive(Debug, Clone)]
pub struct ArtifactReader {
    mode: Mode,
    coerce: bool,
    schema: Option<Arc<Value>>,
}

impl Engine {
    /// Find the artifact in a proposer's text: extracted JSON in structured mode (coerced
    /// toward the schema, see [`Plan::coerce`](crate::plan::Plan::coerce)), the text itself in
    /// text mode.
    pub fn read_artifact(&self, raw: &str) -> ArtifactRead {
        self.reader().read(raw)
    }

    /// What reads the artifact in a proposer's text as [`Engine::read_artifact`] does.
    pub fn reader(&self) -> ArtifactReader {
        ArtifactReader { mode: self.plan.mode, coerce: self.plan.coerce, schema: self.plan.schema.clone() }
    }
}

impl ArtifactReader {
    /// Find the artifact in a proposer's text (see [`Engine::read_artifact`]).
    pub fn read(&self, raw: &str) -> ArtifactRead {
        match self.mode {
            Mode::Text => ArtifactRead {
                artifact: Some(Value::String(raw.to_owned())),
                extraction: None,
                repairs: Vec::new(),
                issue: None,
            },
            Mode::Structured => match extract::extract(raw) {
                Ok(found) => {
                    let mut artifact = found.value;
                    let coerced = self.coerce(&mut artifact);
                    let mut repairs: Vec<RecordedRepair> = found.repairs.into_iter().map(Into::into).collect();
                    repairs.extend(coerced.into_iter().map(RecordedRepair::from));
                    ArtifactRead { artifact: Some(artifact), extraction: Some(found.route), repairs, issue: None }
                }
                Err(no) => ArtifactRead {
                    artifact: None,
                    extraction: None,
                    repairs: Vec::new(),
                    issue: Some(Issue::new("", codes::INVALID_JSON, no.to_string())),
                },
            },
        }
    }

    /// Coerce an extracted artifact toward the plan's schema, when the plan says so. A JSON
    /// Schema given back instead of an answer is left as it is, for the evaluators and the
    /// `schema_echo` check to see what the proposer wrote.
    fn coerce(&self, artifact: &mut Value) -> Vec<Coercion> {
        match self.schema.as_deref() {
            Some(schema) if self.coerce && !looks_like_a_schema(artifact, schema) && !is_a_json_schema(artifact) => {
                extract::coerce(artifact, schema)
            }
            _ => Vec::new(),
        }
    }
}
