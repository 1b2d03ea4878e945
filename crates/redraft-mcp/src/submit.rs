//! `submit`: the agent proposes, redraft only judges and counts.
//!
//! Key design decision: there is one loop logic. Each (session, target) pair owns an
//! [`Engine`] — the same state machine the runner drives — and every submission is fed to it
//! with [`Engine::settle`] as an attempt whose "proposer" is the agent. The engine numbers the
//! attempts, keeps the history and the best so far, notices repeats, decides the halt and
//! writes the feedback with the core's template machinery (a feedback template worded for a
//! submitter: "Attempt 2 of 3: rejected." and the numbered problems with their paths). When the
//! cap is reached, the engine's result — history and escalation — is the error answer.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use redraft::core::prompt::{Feedback, PriorAttempt, Prompts, pretty};
use redraft::core::{
    AttemptEnd, AttemptOutcome, Candidate, Ceilings, ChatResponse, Engine, Next, Plan, Task, Templates, Usage,
};
use redraft::{AttemptRecord, AttemptStatus, Policy, PromptStyle, RunResult, new_run_id};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::reply;
use crate::target::Target;

/// The feedback a submitter reads after a rejection: the attempt just judged, its problems
/// numbered with their paths, the schema once, and what is left.
pub const SUBMIT_FEEDBACK_TEMPLATE: &str = r#"Attempt {{ previous }} of {{ max_attempts }}: rejected.
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

/// Submissions per target when the first one names no cap.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// The submissions of one session, counted per target.
#[derive(Debug, Default)]
pub struct Submissions {
    counts: Mutex<HashMap<String, Arc<Mutex<Count>>>>,
}

/// What the counting needs besides the target.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_attempts: Option<u32>,
    pub ceilings: Ceilings,
    pub feedback_max_chars: usize,
}

impl Submissions {
    /// Judge one submission for the target `key`; `target` builds the target the first time
    /// it is seen in this session (its evaluators are then kept).
    pub async fn submit(
        &self,
        key: &str,
        target: impl FnOnce() -> Result<Target, String>,
        limits: &Limits,
        artifact: Value,
        context: &Value,
    ) -> CallToolResult {
        let count = {
            let mut counts = self.counts.lock().await;
            match counts.get(key) {
                Some(count) => count.clone(),
                None => {
                    let count = match target().and_then(|t| Count::new(t, limits)) {
                        Ok(count) => Arc::new(Mutex::new(count)),
                        Err(message) => return reply::bad_request(message),
                    };
                    counts.insert(key.to_owned(), count.clone());
                    count
                }
            }
        };
        let mut count = count.lock().await;
        count.submit(artifact, context).await
    }
}

/// One target's count: an engine while attempts are left, then the result it ended with.
#[derive(Debug)]
struct Count {
    target: Target,
    max_attempts: u32,
    ceilings: Ceilings,
    feedback_max_chars: usize,
    run_id: String,
    started: Instant,
    engine: Option<Engine>,
    closed: Option<RunResult>,
}

impl Count {
    fn new(target: Target, limits: &Limits) -> Result<Self, String> {
        let max_attempts = limits.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
        if max_attempts == 0 || max_attempts > limits.ceilings.max_iterations {
            return Err(format!(
                "`max_attempts` = {max_attempts} is invalid: it must be between 1 and {}",
                limits.ceilings.max_iterations
            ));
        }
        let mut count = Self {
            target,
            max_attempts,
            ceilings: limits.ceilings.clone(),
            feedback_max_chars: limits.feedback_max_chars,
            run_id: String::new(),
            started: Instant::now(),
            engine: None,
            closed: None,
        };
        count.restart()?;
        Ok(count)
    }

    /// Start counting afresh (a new target, or after an accepted submission).
    fn restart(&mut self) -> Result<(), String> {
        // Only the cap ends a count: a repeated or non-improving submission is told so in its
        // feedback but keeps its attempts.
        let policy = Policy { max_iterations: self.max_attempts, repeat_limit: 0, patience: 0, ..Policy::default() };
        let mut plan = Plan::new(Task::new(format!("Submit an artifact for {}.", self.target.label)), "agent");
        plan.policy = policy;
        plan.ceilings = self.ceilings.clone();
        plan.schema = self.target.schema.clone().map(std::sync::Arc::new);
        plan.example = self.target.kind.as_ref().and_then(|k| k.example.clone());
        // The agent wrote its own prompt and never reads redraft's, so the first rejection
        // shows the schema, once.
        plan.prompt_style = PromptStyle::Schema;
        plan.prompt_seen = false;
        plan.scoring = self.target.evaluators.iter().any(|e| e.scoring());
        plan.templates = Templates { feedback: Some(SUBMIT_FEEDBACK_TEMPLATE.to_owned()), ..Templates::default() };
        plan.feedback_max_chars = self.feedback_max_chars;
        self.engine = Some(Engine::new(plan).map_err(|e| e.to_string())?);
        self.closed = None;
        self.run_id = new_run_id();
        self.started = Instant::now();
        Ok(())
    }

    async fn submit(&mut self, artifact: Value, context: &Value) -> CallToolResult {
        let Some(engine) = self.engine.as_mut() else { return self.closed_reply(false) };
        let iteration = match engine.next(Duration::ZERO) {
            Next::Attempt { iteration, .. } => iteration,
            Next::Halt(_) => {
                self.close();
                return self.closed_reply(false);
            }
        };
        let t0 = Instant::now();
        let started_at = Some(redraft::clock::now_rfc3339());
        let raw = match &artifact {
            Value::String(text) => text.clone(),
            other => pretty(other),
        };
        let candidate = match self.target.read(artifact) {
            Ok(a) => Candidate { artifact: Some(a), extraction: None, repairs: Vec::new(), issue: None },
            Err(issue) => Candidate { artifact: None, extraction: None, repairs: Vec::new(), issue: Some(issue) },
        };
        let verdict = match &candidate.artifact {
            Some(a) => Some(self.target.evaluate(a, context, iteration).await),
            None => None,
        };
        let response = ChatResponse {
            text: raw,
            usage: Some(Usage { input_tokens: 0, output_tokens: 0 }),
            finish_reason: None,
            cost_usd: None,
            served_model: None,
        };
        let wall_ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
        let end = AttemptEnd::Answered { response, candidate, verdict };
        let Some(record) = engine
            .settle(AttemptOutcome {
                iteration,
                request_chars: 0,
                wall_ms,
                started_at,
                finished_at: Some(redraft::clock::now_rfc3339()),
                end,
            })
            .cloned()
        else {
            self.close();
            return self.closed_reply(true);
        };
        if record.status == AttemptStatus::Accepted {
            let answer = self.accepted(&record);
            // The next submission for this target starts a new count.
            if let Err(e) = self.restart() {
                tracing::error!("cannot restart the count of {}: {e}", self.target.label);
            }
            return answer;
        }
        if engine.halted().is_some() {
            self.close();
            return self.closed_reply(true);
        }
        // The engine has prepared the feedback for the next attempt: the conversation's last
        // message.
        let feedback = engine.request().messages.last().map(|m| m.content.clone()).unwrap_or_default();
        let value = json!({
            "status": record.status.as_str(),
            "target": self.target.label,
            "attempt": record.iteration,
            "max_attempts": self.max_attempts,
            "attempts_left": self.max_attempts.saturating_sub(record.iteration),
            "score": record.score,
            "issues": record.issues,
            "repeat_of": record.repeat_of,
        });
        reply::text_and(feedback, value)
    }

    fn accepted(&self, record: &AttemptRecord) -> CallToolResult {
        let mut text = format!("Attempt {} of {}: accepted.", record.iteration, self.max_attempts);
        if !record.issues.is_empty() {
            text.push_str("\n\nNotes:\n");
            number_issues(&mut text, record);
        }
        let value = json!({
            "status": "accepted",
            "target": self.target.label,
            "attempt": record.iteration,
            "max_attempts": self.max_attempts,
            "score": record.score,
            "issues": record.issues,
            "artifact_sha256": record.artifact.as_ref().map(redraft::core::canonical::artifact_sha256),
        });
        reply::text_and(text, value)
    }

    /// End the count: the engine's result (history, best so far, escalation) is kept.
    fn close(&mut self) {
        if let Some(engine) = self.engine.take() {
            self.closed = Some(engine.finish(&self.run_id, self.started.elapsed()));
        }
    }

    /// The `MaxRetriesExceeded` answer: `checked` when this submission was the last one
    /// judged, else it came after the cap and was not checked.
    fn closed_reply(&self, checked: bool) -> CallToolResult {
        let Some(result) = &self.closed else {
            return reply::bad_request(format!("the submissions for {} cannot be counted", self.target.label));
        };
        let mut text = match result.history.last().filter(|_| checked) {
            Some(last) => self.last_feedback(last),
            None => format!(
                "No attempts left for {}: all {} attempts in this session were rejected, so this submission was not checked.",
                self.target.label, result.iterations
            ),
        };
        let message = format!(
            "max retries exceeded: {} attempt(s) at {} were rejected (halted because {})",
            result.iterations, self.target.label, result.halted_because
        );
        let _ = write!(text, "\n\nMaxRetriesExceeded: {message}.");
        if let Some(esc) = &result.escalation {
            let _ = write!(text, "\nSummary: {}\nAttempts: {}", esc.summary, esc.attempts.join("; "));
            if let Some(pattern) = &esc.pattern {
                let _ = write!(text, "\nPattern: {pattern}");
            }
            let _ = write!(text, "\nQuestion: {}", esc.question);
        }
        let value = json!({
            "status": "max_retries_exceeded",
            "error": "max_retries_exceeded",
            "message": message,
            "target": self.target.label,
            "attempts": result.iterations,
            "max_attempts": self.max_attempts,
            "halted_because": result.halted_because,
            "best_iteration": result.best_iteration,
            "best_score": result.best_score,
            "artifact": result.artifact,
            "history": result.history,
            "escalation": result.escalation,
        });
        reply::error_with(text, value)
    }

    /// The last attempt's feedback, from the same template ("No attempts left.").
    fn last_feedback(&self, last: &AttemptRecord) -> String {
        let templates = Templates { feedback: Some(SUBMIT_FEEDBACK_TEMPLATE.to_owned()), ..Templates::default() };
        let prior =
            PriorAttempt::new(last.iteration, &last.raw, self.feedback_max_chars, last.issues.clone(), last.repeat_of);
        let ctx = Feedback {
            attempt: last.iteration + 1,
            max_attempts: self.max_attempts,
            previous: last.iteration,
            structured: true,
            prior: &prior,
            schema: None,
            example: None,
        };
        match Prompts::new(&templates).and_then(|p| p.feedback(&ctx)) {
            Ok(text) => text,
            Err(_) => {
                let mut text = format!("Attempt {} of {}: rejected.\n\nProblems:\n", last.iteration, self.max_attempts);
                number_issues(&mut text, last);
                text
            }
        }
    }
}

fn number_issues(text: &mut String, record: &AttemptRecord) {
    for (n, issue) in record.issues.iter().enumerate() {
        let place = if issue.path.is_empty() { "(root)" } else { issue.path.as_str() };
        let _ = writeln!(text, "{}. {place}: {} [{}]", n + 1, issue.message, issue.code);
    }
    while text.ends_with('\n') {
        text.pop();
    }
}
