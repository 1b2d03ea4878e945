//! `submit`: the agent proposes, redraft only judges and counts.
//!
//! Each (session, target) pair owns a [`SubmittedRun`] — a run of the one loop whose answers
//! are handed in instead of asked for. The runner judges every submission with the target's
//! evaluators and the engine numbers the attempts, keeps the history and the best so far,
//! notices repeats, decides the halt and writes the feedback ("Attempt 2 of 3: rejected." and
//! the numbered problems with their paths). This module only turns what became of a
//! submission into the tool's answer. When the cap is reached, the run's result — history and
//! escalation — is the error answer.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use redraft::{AttemptRecord, RunResult, Submission, SubmittedRun};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::reply;

/// Submissions per target when the first one names no cap.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// The submissions of one session, counted per target.
#[derive(Debug, Default)]
pub struct Submissions {
    counts: Mutex<HashMap<String, Arc<Mutex<Count>>>>,
}

/// How a target's runs are made: a new one for the first submission, and again after an
/// accepted one.
pub type NewRun = Box<dyn Fn() -> Result<SubmittedRun, String> + Send + Sync>;

impl Submissions {
    /// Judge one submission for the target `key` (named `label` in answers); `start` makes the
    /// target's run the first time it is seen in this session, and is kept to make the next.
    pub async fn submit(
        &self,
        key: &str,
        label: &str,
        start: impl FnOnce() -> Result<NewRun, String>,
        artifact: Value,
        context: &Value,
    ) -> CallToolResult {
        let count = {
            let mut counts = self.counts.lock().await;
            match counts.get(key) {
                Some(count) => count.clone(),
                None => {
                    let count = match start().and_then(|new| Count::new(label, new)) {
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

/// One target's count: its current run.
struct Count {
    label: String,
    new_run: NewRun,
    run: SubmittedRun,
}

impl std::fmt::Debug for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Count").field("label", &self.label).field("run", &self.run).finish_non_exhaustive()
    }
}

impl Count {
    fn new(label: &str, new_run: NewRun) -> Result<Self, String> {
        let run = new_run()?;
        Ok(Self { label: label.to_owned(), new_run, run })
    }

    async fn submit(&mut self, artifact: Value, context: &Value) -> CallToolResult {
        match self.run.submit(artifact, context).await {
            Submission::Rejected { record, feedback } => {
                let max_attempts = self.run.max_attempts();
                let value = json!({
                    "status": record.status.as_str(),
                    "target": self.label,
                    "attempt": record.iteration,
                    "max_attempts": max_attempts,
                    "attempts_left": max_attempts.saturating_sub(record.iteration),
                    "score": record.score,
                    "issues": record.issues,
                    "repeat_of": record.repeat_of,
                });
                reply::text_and(feedback, value)
            }
            Submission::Halted { record, result, feedback: None } if result.succeeded() => {
                let answer = self.accepted(&record);
                // The next submission for this target starts a new count.
                match (self.new_run)() {
                    Ok(run) => self.run = run,
                    Err(e) => tracing::error!("cannot start a new count for {}: {e}", self.label),
                }
                answer
            }
            Submission::Halted { result, feedback, .. } => self.closed_reply(&result, feedback),
            Submission::Closed { result } => self.closed_reply(&result, None),
        }
    }

    fn accepted(&self, record: &AttemptRecord) -> CallToolResult {
        let max_attempts = self.run.max_attempts();
        let mut text = format!("Attempt {} of {max_attempts}: accepted.", record.iteration);
        if !record.issues.is_empty() {
            text.push_str("\n\nNotes:\n");
            number_issues(&mut text, record);
        }
        let value = json!({
            "status": "accepted",
            "target": self.label,
            "attempt": record.iteration,
            "max_attempts": max_attempts,
            "score": record.score,
            "issues": record.issues,
            "artifact_sha256": record.artifact.as_ref().map(redraft::core::canonical::artifact_sha256),
        });
        reply::text_and(text, value)
    }

    /// The `MaxRetriesExceeded` answer: with `feedback` on the submission just judged, which was
    /// the last one allowed; without, the submission came after the cap and was not checked.
    fn closed_reply(&self, result: &RunResult, feedback: Option<String>) -> CallToolResult {
        let max_attempts = self.run.max_attempts();
        let mut text = match feedback {
            Some(feedback) => feedback,
            None => format!(
                "No attempts left for {}: all {} attempts in this session were rejected, so this submission was not checked.",
                self.label, result.iterations
            ),
        };
        let message = format!(
            "max retries exceeded: {} attempt(s) at {} were rejected (halted because {})",
            result.iterations, self.label, result.halted_because
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
            "target": self.label,
            "attempts": result.iterations,
            "max_attempts": max_attempts,
            "halted_because": result.halted_because,
            "best_iteration": result.best_iteration,
            "best_score": result.best_score,
            "artifact": result.artifact,
            "history": result.history,
            "escalation": result.escalation,
        });
        reply::error_with(text, value)
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
