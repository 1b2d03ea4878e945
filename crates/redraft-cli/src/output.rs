//! What people read on stderr: a progress line per attempt, and the escalation of a failed run.

use std::fmt::Write as _;
use std::io::Write as _;

use redraft::core::RunStatus;
use redraft::{AttemptRecord, RunObserver, RunResult};
use serde_json::Value;

use crate::commands::Outcome;

/// Prints one line per attempt on stderr.
#[derive(Debug)]
pub struct ProgressLines {
    pub max_iterations: u32,
}

#[async_trait::async_trait]
impl RunObserver for ProgressLines {
    async fn attempt_finished(&self, _run_id: &str, a: &AttemptRecord) {
        let _ = writeln!(crate::redacted::stderr(), "{}", progress_line(a, self.max_iterations));
    }
}

/// `attempt 2/3  rejected  score 0.00  1 issue  0.4s  /city rule:city_matches`
pub fn progress_line(a: &AttemptRecord, max: u32) -> String {
    let issues = match a.issues.len() {
        1 => "1 issue".to_owned(),
        n => format!("{n} issues"),
    };
    let mut line = format!(
        "attempt {}/{}  {:<12}  score {:.2}  {:<9}  {:.1}s",
        a.iteration,
        max,
        a.status.as_str(),
        a.score.get(),
        issues,
        a.wall_ms as f64 / 1000.0
    );
    if let Some(k) = a.repeat_of {
        let _ = write!(line, "  identical to {k}");
    } else if let Some(first) = a.issues.first() {
        let place = if first.path.is_empty() { String::new() } else { format!("{} ", first.path) };
        let _ = write!(line, "  {place}{}", first.code);
    }
    line
}

/// The escalation of a failed run, for a person.
pub fn escalation_text(r: &RunResult) -> String {
    let mut out = if r.status == RunStatus::AwaitingInput {
        format!(
            "redraft: the run awaits your answer (halted because {}) — run {}\nanswer with: redraft runs answer {} \"…\"   or end it: redraft runs abort {}\n",
            r.halted_because, r.run_id, r.run_id, r.run_id
        )
    } else {
        format!("redraft: the run failed (halted because {}) — run {}\n", r.halted_because, r.run_id)
    };
    if let Some(e) = &r.error {
        let _ = writeln!(out, "error: {}", e.message);
    }
    if let Some(esc) = &r.escalation {
        let _ = writeln!(out, "summary: {}", esc.summary);
        if !esc.attempts.is_empty() {
            out.push_str("attempts:\n");
            for line in &esc.attempts {
                let _ = writeln!(out, "  {line}");
            }
        }
        if !esc.recurring_issues.is_empty() {
            out.push_str("recurring issues:\n");
            for r in &esc.recurring_issues {
                let place = if r.path.is_empty() { "(root)" } else { r.path.as_str() };
                let _ = writeln!(out, "  {place} {} ×{}", r.code, r.count);
            }
        }
        if let Some(p) = &esc.pattern {
            let _ = writeln!(out, "pattern: {p}");
        }
        let _ = writeln!(out, "question: {}", esc.question);
    }
    if let (Some(artifact), Some(i)) = (&r.artifact, r.best_iteration) {
        let score = r.best_score.map(|s| s.get()).unwrap_or(0.0);
        let _ = writeln!(out, "best so far (attempt {i}, score {score}): {artifact}");
        if !r.validation.issues.is_empty() {
            for (n, issue) in r.validation.issues.iter().enumerate() {
                let place = if issue.path.is_empty() { "(root)" } else { issue.path.as_str() };
                let _ = writeln!(out, "  {}. {place}: {} [{}]", n + 1, issue.message, issue.code);
                if let Some(hint) = issue.hint_text() {
                    let _ = writeln!(out, "     hint: {hint}");
                }
            }
        }
    }
    out
}

/// Print a run's outcome: the whole result with `json`, else the accepted artifact (raw text in
/// text mode); a failed run's escalation goes to stderr and makes the outcome `Failed`.
pub fn report(result: &RunResult, json: bool, text: bool) -> anyhow::Result<Outcome> {
    let mut stdout = crate::redacted::stdout();
    if json {
        serde_json::to_writer_pretty(&mut stdout, result)?;
        writeln!(stdout)?;
    } else if result.succeeded()
        && let Some(artifact) = &result.artifact
    {
        match artifact {
            Value::String(t) if text => writeln!(stdout, "{t}")?,
            other => writeln!(stdout, "{}", serde_json::to_string_pretty(other)?)?,
        }
    }
    stdout.flush()?;
    if result.succeeded() {
        Ok(Outcome::Success)
    } else {
        eprint!("{}", escalation_text(result));
        Ok(Outcome::Failed)
    }
}
