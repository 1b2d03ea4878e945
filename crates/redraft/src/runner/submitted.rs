//! Runs whose proposer is outside: an agent writes its own artifacts and hands each one in
//! (MCP `submit`). Every submission is an attempt of the same loop — the runner reads it,
//! runs the evaluators, and the engine numbers it, keeps the history and the best so far,
//! notices repeats, writes the feedback and decides the halt — only nobody is asked: the
//! runner waits for the next submission instead of calling a model.

use std::sync::Arc;

use redraft_core::prompt::pretty;
use redraft_core::{
    ArtifactRead, AttemptRecord, AttemptStatus, ChatResponse, Issue, Next, RunResult, Task, Usage, codes, extract,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::verdict::off_thread;
use super::{Live, Runner, new_run_id};
use crate::error::ConfigError;

/// The feedback a submitter reads after a rejection: the attempt just judged, its problems
/// numbered with their paths, the schema once, and what is left.
pub const SUBMITTED_FEEDBACK_TEMPLATE: &str = r#"Attempt {{ previous }} of {{ max_attempts }}: rejected.
{% if repeat_of %}

This submission is identical to attempt {{ repeat_of }} and was rejected for the same reasons. Do not repeat it: change what the problems below point at.
{% endif %}

Problems ({{ issues | length }}):
{% for issue in issues %}
{{ loop.index }}. {{ issue.path or "(root)" }}: {{ issue.message }} [{{ issue.code }}]
{% endfor %}
{% if schema %}

The artifact must match this JSON Schema:
```json
{{ schema }}
```
{% endif %}

{% if attempt > max_attempts %}
No attempts left.
{% else %}
{{ max_attempts - previous }} attempt{% if max_attempts - previous != 1 %}s{% endif %} left: fix every problem above and submit the corrected artifact (attempt {{ attempt }} of {{ max_attempts }}).
{% endif %}"#;

/// A run that takes its answers from [`SubmittedRun::submit`].
#[derive(Debug)]
pub struct SubmittedRun {
    runner: Runner,
    state: State,
}

#[derive(Debug)]
enum State {
    /// Attempts are left: what the engine asks for next.
    Open { live: Box<Live>, next: Next },
    /// The run halted with this result.
    Halted(Box<RunResult>),
    /// Between the two, inside [`SubmittedRun::halt`].
    Halting,
}

/// What became of a submission.
#[derive(Debug, Clone)]
pub enum Submission {
    /// Judged, and rejected; the run goes on. `feedback` is what the submitter is told: the
    /// problems, numbered with their paths, and the attempts left.
    Rejected { record: AttemptRecord, feedback: String },
    /// Judged, and the run halted with it: accepted, or rejected as the last attempt allowed
    /// (`feedback` then says what was wrong with it, and that no attempt is left).
    Halted { record: AttemptRecord, result: Box<RunResult>, feedback: Option<String> },
    /// The run had already halted: the submission was not judged.
    Closed { result: Box<RunResult> },
}

impl Runner {
    /// A run of `task` whose answers are submitted to it rather than asked of the proposer.
    /// The submitter wrote its own prompt, so the first feedback shows the expected shape, and
    /// it reads the feedback message of the conversation strategy;
    /// feedback is worded for a submitter ([`SUBMITTED_FEEDBACK_TEMPLATE`]) unless the runner
    /// was given a feedback template of its own.
    pub fn submitted(&self, task: Task) -> Result<SubmittedRun, ConfigError> {
        let mut runner = self.clone();
        runner.plan.prompt_seen = false;
        // The submitter is told through the feedback message, whatever the config's strategy.
        runner.plan.strategy = redraft_core::Strategy::Conversation;
        if runner.plan.templates.feedback.is_none() {
            runner.plan.templates.feedback = Some(SUBMITTED_FEEDBACK_TEMPLATE.to_owned());
        }
        let mut live = Live::new(new_run_id(), runner.engine(task, Vec::new(), Vec::new())?);
        let next = live.next(&CancellationToken::new());
        let state = match next {
            Next::Halt(_) => State::Halted(Box::new(live.finish())),
            next => State::Open { live: Box::new(live), next },
        };
        Ok(SubmittedRun { runner, state })
    }
}

impl SubmittedRun {
    /// The run's id.
    pub fn run_id(&self) -> &str {
        match &self.state {
            State::Open { live, .. } => &live.run_id,
            State::Halted(result) => &result.run_id,
            State::Halting => "",
        }
    }

    /// Attempts the run allows.
    pub fn max_attempts(&self) -> u32 {
        self.runner.plan.policy.max_iterations
    }

    /// The result, once the run halted.
    pub fn result(&self) -> Option<&RunResult> {
        match &self.state {
            State::Halted(result) => Some(result),
            State::Open { .. } | State::Halting => None,
        }
    }

    /// Judge `answer` as the run's next attempt, with `context` for the evaluators. A string
    /// is the artifact itself when the schema lets the artifact be a string; otherwise it is
    /// text holding JSON (model output), and the JSON found in it is judged.
    pub async fn submit(&mut self, answer: Value, context: &Value) -> Submission {
        let iteration = match &self.state {
            State::Halted(result) => return Submission::Closed { result: result.clone() },
            State::Open { next: Next::Attempt { iteration, .. }, .. } => *iteration,
            State::Open { .. } | State::Halting => return Submission::Closed { result: Box::new(self.halt().await) },
        };
        let State::Open { live, next: pending } = &mut self.state else {
            return Submission::Closed { result: Box::new(self.halt().await) };
        };
        let runner = &self.runner;
        let begun = live.begin(runner, iteration, 0).await;
        let span = begun.span.clone();
        let raw = match &answer {
            Value::String(text) => text.clone(),
            other => pretty(other),
        };
        // Off the threads that serve requests, like a model's answer.
        let schema = live.engine.plan().schema.clone();
        let read = off_thread(move || read(answer, schema.as_deref())).await.unwrap_or_else(|message| {
            let issue = Issue::new("", codes::EVALUATOR_ERROR, format!("reading the answer failed: {message}"));
            ArtifactRead { artifact: None, extraction: None, repairs: Vec::new(), issue: Some(issue) }
        });
        let response = ChatResponse {
            text: raw,
            usage: Some(Usage { input_tokens: 0, output_tokens: 0 }),
            finish_reason: None,
            cost_usd: None,
            served_model: None,
        };
        let context = Arc::new(context.clone());
        let budget = live.engine.plan().policy.attempt_timeout;
        let end = runner.judged(read, response, &context, iteration, budget).instrument(span).await;
        let (record, next) = live.settle(runner, begun, 0, end, &CancellationToken::new()).await;
        let feedback = match (&next, &record) {
            // The engine has prepared the feedback for the next attempt: the conversation's
            // last message.
            (Next::Attempt { request, .. }, _) => request.messages.last().map(|m| m.content.clone()),
            // The last attempt allowed, rejected: its feedback says no attempt is left.
            (Next::Halt(_), Some(record)) if record.status != AttemptStatus::Accepted => {
                Some(live.engine.last_feedback(record))
            }
            (Next::Halt(_), _) => None,
        };
        let halted = matches!(next, Next::Halt(_));
        *pending = next;
        match record {
            Some(record) if !halted => Submission::Rejected { record, feedback: feedback.unwrap_or_default() },
            Some(record) => Submission::Halted { record, result: Box::new(self.halt().await), feedback },
            None => Submission::Closed { result: Box::new(self.halt().await) },
        }
    }

    /// End the run: its result (history, best so far, escalation) is kept and the observers
    /// are told.
    async fn halt(&mut self) -> RunResult {
        let result = match std::mem::replace(&mut self.state, State::Halting) {
            State::Open { live, .. } => {
                let result = live.finish();
                self.runner.tell_finished(&result).await;
                result
            }
            State::Halted(result) => *result,
            // Never seen: `halt` puts a result back before it returns.
            State::Halting => crate::recorder::failed_result("", Vec::new(), "cannot_run", "the run's state was lost"),
        };
        self.state = State::Halted(Box::new(result.clone()));
        result
    }
}

/// The artifact of a submission: the answer itself, or the JSON found in it when it is a
/// string the schema cannot accept as it is (no JSON in such a string: an `invalid_json`
/// issue).
pub fn artifact_of(answer: Value, schema: Option<&Value>) -> Result<Value, Issue> {
    match answer {
        Value::String(text) if !accepts_string(schema) => extract::extract(&text)
            .map(|found| found.value)
            .map_err(|no| Issue::new("", codes::INVALID_JSON, no.to_string())),
        other => Ok(other),
    }
}

fn read(answer: Value, schema: Option<&Value>) -> ArtifactRead {
    let (artifact, issue) = match artifact_of(answer, schema) {
        Ok(artifact) => (Some(artifact), None),
        Err(issue) => (None, Some(issue)),
    };
    ArtifactRead { artifact, extraction: None, repairs: Vec::new(), issue }
}

/// Whether `schema` lets the whole artifact be a string.
fn accepts_string(schema: Option<&Value>) -> bool {
    let Some(schema) = schema.and_then(Value::as_object) else { return true };
    match schema.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(types)) => types.iter().any(|t| t == "string"),
        _ => !["properties", "required", "items", "prefixItems"].iter().any(|k| schema.contains_key(*k)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_are_read_as_json_only_where_a_string_cannot_be_the_artifact() {
        let object = json!({"type": "object"});
        let read_as = |answer: Value, schema: &Value| read(answer, Some(schema));
        assert_eq!(read_as(json!("```json\n{\"a\": 1}\n```"), &object).artifact, Some(json!({"a": 1})));
        assert_eq!(read_as(json!("no json here"), &object).issue.map(|i| i.code), Some("invalid_json".into()));
        let string = json!({"type": ["string", "null"]});
        assert_eq!(read_as(json!("{\"a\": 1}"), &string).artifact, Some(json!("{\"a\": 1}")));
        assert!(!accepts_string(Some(&json!({"required": ["a"]}))));
        assert!(accepts_string(None));
    }
}
