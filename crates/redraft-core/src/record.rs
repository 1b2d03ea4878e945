//! What a run leaves behind: attempt records, metrics, the escalation and the result.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chat::FinishReason;
use crate::extract::{Coercion, Repair, Route};
use crate::issue::{Issue, Score};
use crate::policy::HaltReason;

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptStatus {
    Accepted,
    Rejected,
    InvalidJson,
    Error,
}

impl AttemptStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptStatus::Accepted => "accepted",
            AttemptStatus::Rejected => "rejected",
            AttemptStatus::InvalidJson => "invalid_json",
            AttemptStatus::Error => "error",
        }
    }
}

/// One change made to an answer before it was evaluated: damage repaired in its text, kept as
/// the repair's name (`"trailing_comma"`), or a value coerced toward the schema, kept as
/// `{"path": "/unit_price", "from": "€77.08", "to": 77.08}`. Records from before coercion hold
/// names only, and read back as they were written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RecordedRepair {
    /// Damage the extractor repaired in the text.
    Text(Repair),
    /// A value coerced toward the schema.
    Coercion(Coercion),
}

impl From<Repair> for RecordedRepair {
    fn from(repair: Repair) -> Self {
        RecordedRepair::Text(repair)
    }
}

impl From<Coercion> for RecordedRepair {
    fn from(coercion: Coercion) -> Self {
        RecordedRepair::Coercion(coercion)
    }
}

/// One attempt: the proposal, what was extracted, and its evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub iteration: u32,
    pub status: AttemptStatus,
    /// The proposer's text, verbatim.
    pub raw: String,
    pub artifact: Option<Value>,
    pub extraction: Option<Route>,
    /// What was repaired in the text and coerced toward the schema, in that order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<RecordedRepair>,
    pub score: Score,
    pub issues: Vec<Issue>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tokens_estimated: bool,
    pub cost_usd: Option<f64>,
    /// What judging this attempt cost (LLM judges); not counted against the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_cost_usd: Option<f64>,
    pub wall_ms: u64,
    /// When the attempt began (RFC 3339, UTC, milliseconds), as it happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When the attempt was judged (or failed), as it happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// The earlier attempt this one repeats (same canonical artifact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_of: Option<u32>,
    /// The `provider/model` that proposed (it changes when fallback models are configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model the provider's server says answered (`gpt-4o-mini-2024-07-18`), when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_model: Option<String>,
    /// The sampling temperature sent, when one was set (it rises after a repeated answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// The person's answer this attempt was the first to receive, with the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<PersonReply>,
    /// What the proposer was told for this attempt, as sent: the first prompt, then the
    /// feedback on the previous attempt (or, with the `fresh` strategy, the whole rebuilt
    /// prompt). The system message and the context's turns are the run's, not repeated here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
}

/// Whether a run succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Succeeded,
    Failed,
    /// It would have failed, and its policy says to await a person (`on_escalation =
    /// "await"`): it waits for an answer to its escalation's question, or an abort.
    AwaitingInput,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::AwaitingInput => "awaiting_input",
        }
    }
}

/// A person's answer to a run's escalation, given to the model with the question it answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersonReply {
    /// The escalation's question.
    pub question: String,
    pub answer: String,
    /// Attempts the run was given with the answer.
    pub max_iterations: u32,
    /// Attempts made before the answer.
    pub after_iteration: u32,
    /// When the answer was given (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_at: Option<String>,
}

/// The verdict on the returned artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    pub score: Score,
    pub passed: bool,
    pub issues: Vec<Issue>,
}

/// Totals for a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub wall_ms: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// True when any token count was estimated (ceil(chars/4)) rather than reported.
    pub tokens_estimated: bool,
    /// Unknown (null) when the price of the model is unknown.
    pub cost_usd: Option<f64>,
    /// What LLM judges cost, reported apart from `cost_usd` (and not counted against budgets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_cost_usd: Option<f64>,
}

/// A recurring issue: the same path and code in several attempts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecurringIssue {
    pub path: String,
    pub code: String,
    pub count: u32,
}

/// What a person needs to act on a failed run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Escalation {
    pub summary: String,
    pub attempts: Vec<String>,
    pub recurring_issues: Vec<RecurringIssue>,
    pub pattern: Option<String>,
    pub question: String,
}

/// Why a run could not go on, beyond the artifact's issues.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunErrorReport {
    /// A short machine word: `provider_error`, …
    pub code: String,
    pub message: String,
}

/// The result of a run: one JSON shape for every face.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub run_id: String,
    pub status: RunStatus,
    pub halted_because: HaltReason,
    /// The accepted artifact; on failure the best so far (null when no attempt had one).
    pub artifact: Option<Value>,
    pub validation: Validation,
    pub iterations: u32,
    pub best_iteration: Option<u32>,
    pub best_score: Option<Score>,
    pub best_ref: Option<String>,
    pub artifact_sha256: Option<String>,
    pub metrics: Metrics,
    pub history: Vec<AttemptRecord>,
    pub escalation: Option<Escalation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunErrorReport>,
}

impl RunResult {
    /// Whether the run succeeded.
    pub fn succeeded(&self) -> bool {
        self.status == RunStatus::Succeeded
    }

    /// The raw text of the last attempt, if any.
    pub fn last_raw(&self) -> Option<&str> {
        self.history.last().map(|a| a.raw.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn repairs_keep_their_names_and_coercions_are_objects() {
        let repairs = vec![
            RecordedRepair::from(Repair::TrailingComma),
            RecordedRepair::from(Coercion { path: "/unit_price".into(), from: json!("€77.08"), to: json!(77.08) }),
        ];
        let text = serde_json::to_value(&repairs).unwrap_or_default();
        assert_eq!(text, json!(["trailing_comma", {"path": "/unit_price", "from": "€77.08", "to": 77.08}]));
        assert_eq!(serde_json::from_value::<Vec<RecordedRepair>>(text).ok(), Some(repairs));
    }

    #[test]
    fn an_attempt_recorded_before_coercion_reads_back() {
        // as an earlier version stored it: repairs by name only
        let old = json!({
            "iteration": 1, "status": "accepted", "raw": "{'a': 1,", "artifact": {"a": 1},
            "extraction": "repaired", "repairs": ["single_quotes", "trailing_comma", "truncated_tail"],
            "score": 1.0, "issues": [], "tokens_in": 10, "tokens_out": 4, "cost_usd": null, "wall_ms": 3
        });
        let record: AttemptRecord = match serde_json::from_value(old.clone()) {
            Ok(record) => record,
            Err(e) => panic!("an old record does not read: {e}"),
        };
        assert_eq!(
            record.repairs,
            [Repair::SingleQuotes, Repair::TrailingComma, Repair::TruncatedTail].map(RecordedRepair::Text)
        );
        assert_eq!(serde_json::to_value(&record).ok(), Some(old));
        // and one without repairs at all
        let bare = json!({
            "iteration": 1, "status": "invalid_json", "raw": "no", "artifact": null, "extraction": null,
            "score": 0.0, "issues": [], "tokens_in": 1, "tokens_out": 1, "cost_usd": null, "wall_ms": 0
        });
        assert!(serde_json::from_value::<AttemptRecord>(bare).is_ok_and(|r| r.repairs.is_empty()));
    }
}
