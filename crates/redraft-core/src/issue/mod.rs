//! Issues: one problem found in an artifact, and verdicts: an evaluator's judgement.

mod bounded;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use self::bounded::{
    BoundedIssues, MAX_ISSUES_PER_ATTEMPT, MAX_MESSAGE_CHARS, MAX_PATH_CHARS, MAX_VALUE_CHARS, bounded, json_within,
    too_many_issues,
};

/// How serious an issue is. An issue without a severity counts as an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

/// Well-known issue codes. Codes are an open set (`rule:city_matches`), so they are strings.
pub mod codes {
    pub const INVALID_JSON: &str = "invalid_json";
    pub const EVALUATOR_ERROR: &str = "evaluator_error";
    pub const TIMEOUT: &str = "timeout";
    pub const WALL_TIME: &str = "wall_time";
    pub const CANCELLED: &str = "cancelled";
    pub const PROVIDER_ERROR: &str = "provider_error";
    pub const CHECK: &str = "check";
    pub const DESERIALIZE: &str = "deserialize";
    /// A placeholder of the generated example (`"<string>"`…) left in the answer.
    pub const PLACEHOLDER: &str = "placeholder";
    /// The answer is a JSON Schema instead of an instance of one.
    pub const SCHEMA_ECHO: &str = "schema_echo";
    /// The answer is larger than the proposer's `max_response_bytes` and was not read.
    pub const RESPONSE_TOO_LARGE: &str = "response_too_large";
    /// More issues were found than an attempt keeps ([`super::MAX_ISSUES_PER_ATTEMPT`]): this
    /// last issue says how many more (its `found` value is that number).
    pub const TOO_MANY_ISSUES: &str = "too_many_issues";
    /// The answer could not be checked within what was left of the attempt's time: the checks
    /// were stopped and the answer rejected unchecked.
    pub const CHECK_TIMEOUT: &str = "check_timeout";
}

/// One problem found in an artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Issue {
    /// A JSON Pointer (`/fills/0/city`, empty for the whole artifact) or `file:line[:col]`.
    pub path: String,
    /// A short machine word: `required`, `type`, `rule:city_matches`, `invalid_json`, …
    pub code: String,
    /// What is wrong, in words a model (and a person) can act on.
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Box<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<Box<Value>>,
    /// The evaluator that raised it (`schema`, `kind:fill`, `exec`, `score`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator: Option<Box<str>>,
    /// What would satisfy the check, drawn from reference data the model has not seen (a kind
    /// rule's `hint`); serialised as the issue's `hint` and `hint_tables` fields. Boxed: most
    /// issues have none, and an `Issue` stays small enough to be a cheap `Err`.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none", deserialize_with = "hint_if_any")]
    pub hint: Option<Box<Hint>>,
}

/// What would satisfy a failed check, from reference data the model has not seen: "workers in
/// Toledo, OH with role Welder: W-2 Ben Carter, W-3 Carla Diaz".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hint {
    /// The hint's words (none when it has only a schema).
    #[serde(rename = "hint", default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// The reference tables it was drawn from.
    #[serde(rename = "hint_tables", default, skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<String>,
    /// A JSON Schema the value at the issue's path must also match ("one of W-9, W-12"): a
    /// backend that constrains decoding is given the run's schema narrowed by it for the next
    /// attempt (see [`crate::narrow`]). The checks do not use it.
    #[serde(rename = "hint_schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

/// An issue's hint as read, `None` when none of its fields is there.
fn hint_if_any<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Box<Hint>>, D::Error> {
    let hint = Option::<Box<Hint>>::deserialize(d)?;
    Ok(hint.filter(|h| !h.text.is_empty() || !h.tables.is_empty() || h.schema.is_some()))
}

impl Issue {
    /// An error-severity issue at `path` with `code` and `message`.
    pub fn new(path: impl Into<String>, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            code: code.into(),
            message: message.into(),
            severity: None,
            expected: None,
            found: None,
            evaluator: None,
            hint: None,
        }
    }

    /// Set the hint and the reference tables it was drawn from.
    pub fn with_hint(mut self, hint: impl Into<String>, tables: Vec<String>) -> Self {
        self.hint = Some(Box::new(Hint { text: hint.into(), tables, schema: None }));
        self
    }

    /// Set the schema the value at the issue's path must also match (see [`Hint::schema`]).
    pub fn with_hint_schema(mut self, schema: Value) -> Self {
        self.hint
            .get_or_insert_with(|| Box::new(Hint { text: String::new(), tables: Vec::new(), schema: None }))
            .schema = Some(schema);
        self
    }

    /// The hint's words, when the issue has a hint that says something.
    pub fn hint_text(&self) -> Option<&str> {
        self.hint.as_deref().map(|h| h.text.as_str()).filter(|t| !t.is_empty())
    }

    /// The schema the value at the issue's path must also match, when its hint has one.
    pub fn hint_schema(&self) -> Option<&Value> {
        self.hint.as_deref().and_then(|h| h.schema.as_ref())
    }

    /// Set what was expected and what was found.
    pub fn with_values(mut self, expected: Option<Value>, found: Option<Value>) -> Self {
        self.expected = expected.map(Box::new);
        self.found = found.map(Box::new);
        self
    }

    /// Set the severity.
    pub fn with_severity(mut self, severity: Severity) -> Self {
        self.severity = Some(severity);
        self
    }

    /// Whether this issue blocks success (no severity means error).
    pub fn is_error(&self) -> bool {
        matches!(self.severity, None | Some(Severity::Error))
    }
}

/// A score in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Score(f64);

impl Score {
    pub const ZERO: Score = Score(0.0);
    pub const ONE: Score = Score(1.0);

    /// A score, or `None` when `value` is outside `[0, 1]` or not a number.
    pub fn new(value: f64) -> Option<Self> {
        (0.0..=1.0).contains(&value).then_some(Score(value))
    }

    /// The score as a number.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl TryFrom<f64> for Score {
    type Error = String;
    fn try_from(value: f64) -> Result<Self, Self::Error> {
        Score::new(value).ok_or_else(|| format!("score `{value}` is not in [0, 1]"))
    }
}

impl From<Score> for f64 {
    fn from(score: Score) -> f64 {
        score.0
    }
}

impl std::fmt::Display for Score {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An evaluator's judgement of one artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub score: Score,
    pub passed: bool,
    pub issues: Vec<Issue>,
    #[serde(default)]
    pub cost_usd: Option<f64>,
    #[serde(default)]
    pub wall_ms: u64,
}

impl Verdict {
    /// A passing verdict with score 1.0 and no issues.
    pub fn pass() -> Self {
        Self { score: Score::ONE, passed: true, issues: Vec::new(), cost_usd: None, wall_ms: 0 }
    }

    /// A pass/fail verdict from issues: passed with score 1.0 when no issue is an error,
    /// else failed with score 0.0.
    pub fn from_issues(issues: Vec<Issue>) -> Self {
        let passed = !issues.iter().any(Issue::is_error);
        let score = if passed { Score::ONE } else { Score::ZERO };
        Self { score, passed, issues, cost_usd: None, wall_ms: 0 }
    }

    /// Combine the verdicts of several evaluators: the score is the minimum, the run passes
    /// when all pass, issues are concatenated — the first [`MAX_ISSUES_PER_ATTEMPT`] kept, the
    /// rest counted (see [`BoundedIssues`]) —, costs summed (unknown when any is unknown).
    /// No verdict at all is a pass.
    pub fn combine(verdicts: impl IntoIterator<Item = Verdict>) -> Verdict {
        let mut out = Verdict::pass();
        let mut issues = BoundedIssues::new();
        let mut any_cost = false;
        let mut cost = 0.0;
        for v in verdicts {
            if v.score < out.score {
                out.score = v.score;
            }
            out.passed &= v.passed;
            issues.extend(v.issues);
            out.wall_ms = out.wall_ms.max(v.wall_ms);
            if let Some(c) = v.cost_usd {
                any_cost = true;
                cost += c;
            }
        }
        out.issues = issues.finish();
        out.cost_usd = any_cost.then_some(cost);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_is_written_as_the_issues_hint_and_hint_tables_fields_and_read_back() {
        let issue =
            Issue::new("/fills/0", "rule:city", "wrong city").with_hint("in Toledo: W-2", vec!["workers".into()]);
        let json = serde_json::to_value(&issue).unwrap();
        assert_eq!(json["hint"], "in Toledo: W-2");
        assert_eq!(json["hint_tables"], serde_json::json!(["workers"]));
        assert_eq!(serde_json::from_value::<Issue>(json).unwrap(), issue);

        let plain = Issue::new("", "type", "not an object");
        let json = serde_json::to_value(&plain).unwrap();
        assert!(json.get("hint").is_none() && json.get("hint_tables").is_none(), "{json}");
        assert_eq!(serde_json::from_value::<Issue>(json).unwrap().hint, None);

        let narrowed = issue.with_hint_schema(serde_json::json!({"enum": ["W-2"]}));
        let json = serde_json::to_value(&narrowed).unwrap();
        assert_eq!(json["hint_schema"], serde_json::json!({"enum": ["W-2"]}));
        assert_eq!(json["hint"], "in Toledo: W-2");
        assert_eq!(serde_json::from_value::<Issue>(json).unwrap(), narrowed);

        // A hint of a schema only has no words to write.
        let only = Issue::new("/city", "rule:city", "not in the text")
            .with_hint_schema(serde_json::json!({"enum": ["Osaka"]}));
        let json = serde_json::to_value(&only).unwrap();
        assert!(json.get("hint").is_none(), "{json}");
        assert_eq!(only.hint_text(), None);
        assert_eq!(serde_json::from_value::<Issue>(json).unwrap(), only);
    }

    #[test]
    fn an_issue_is_small_enough_to_be_a_cheap_err() {
        // `Result<(), Issue>` is what a check returns; past 128 bytes it is a large error for
        // every caller (and clippy says so in their code).
        assert!(std::mem::size_of::<Issue>() < 128, "{}", std::mem::size_of::<Issue>());
    }

    #[test]
    fn combine_takes_minimum_score_and_all_pass() {
        let a = Verdict { score: Score::new(0.8).unwrap_or(Score::ZERO), passed: true, ..Verdict::pass() };
        let b = Verdict::from_issues(vec![Issue::new("/a", "type", "wrong")]);
        let c = Verdict::combine([a.clone(), b]);
        assert_eq!(c.score, Score::ZERO);
        assert!(!c.passed);
        assert_eq!(c.issues.len(), 1);
        let d = Verdict::combine([a, Verdict::pass()]);
        assert_eq!(d.score.get(), 0.8);
        assert!(d.passed);
        assert!(Verdict::combine([]).passed);
    }

    #[test]
    fn score_rejects_out_of_range() {
        assert!(Score::new(1.5).is_none());
        assert!(Score::new(f64::NAN).is_none());
        assert!(serde_json::from_str::<Score>("2.0").is_err());
    }

    #[test]
    fn warnings_do_not_fail() {
        let v = Verdict::from_issues(vec![Issue::new("", "style", "meh").with_severity(Severity::Warning)]);
        assert!(v.passed);
    }
}
