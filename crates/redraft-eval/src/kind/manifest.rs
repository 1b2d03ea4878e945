//! `kind.toml` as written: deserialized strictly, with the spans of the values that later
//! checks point at.

use std::collections::BTreeMap;

use redraft_core::Severity;
use serde::Deserialize;
use toml::Spanned;

use super::LlmCheck;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Manifest {
    pub description: Spanned<String>,
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub tables: BTreeMap<String, TableSpec>,
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
    #[serde(default)]
    pub llm_check: Option<LlmCheck>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TableSpec {
    pub file: Spanned<String>,
    pub key: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RuleSpec {
    pub code: Spanned<String>,
    #[serde(default)]
    pub each: Option<Spanned<String>>,
    #[serde(default)]
    pub when: Option<Spanned<String>>,
    pub check: Spanned<String>,
    #[serde(default)]
    pub found: Option<Spanned<String>>,
    #[serde(default)]
    pub expected: Option<Spanned<String>>,
    #[serde(default)]
    pub path: Option<Spanned<String>>,
    pub message: Spanned<String>,
    #[serde(default)]
    pub severity: Option<Severity>,
    #[serde(default)]
    pub hint: Option<HintSpec>,
}

/// `hint = { value = "CEL", message = "template", schema = "CEL" }`: evaluated when the rule
/// fails; `schema` (optional) gives the JSON Schema the value at the rule's path must also
/// match, for the next attempt's constrained decoding.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HintSpec {
    pub value: Spanned<String>,
    pub message: Spanned<String>,
    #[serde(default)]
    pub schema: Option<Spanned<String>>,
}
