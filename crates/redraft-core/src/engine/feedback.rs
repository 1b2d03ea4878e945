//! What the next attempt is told after one is rejected: the feedback message (or the prior
//! attempt for the fresh prompt), the answer the conversation keeps, the example filled in
//! with what the answers gave, a person's reply, and the schema narrowed by the issues' hints.

use std::sync::Arc;

use serde_json::Value;

use super::Engine;
use crate::chat::{FinishReason, Message};
use crate::issue::codes;
use crate::plan::Mode;
use crate::prompt::{Feedback, PriorAttempt, Strategy, pretty, truncate_chars};
use crate::record::{AttemptRecord, AttemptStatus, PersonReply};
use crate::skeleton::{fill_known, prose_pairs, skeleton_value_text};

impl Engine {
    /// Take the schemas of `record`'s hints into the schema the next requests send (see
    /// [`crate::narrow`]): a path keeps its latest, so what an earlier attempt learned still
    /// holds when a later one fails elsewhere.
    pub(super) fn narrow_by(&mut self, record: &AttemptRecord) {
        let Some(schema) = self.plan.schema.as_deref() else { return };
        let mut changed = false;
        for issue in &record.issues {
            let Some(fragment) = issue.hint_schema() else { continue };
            let known = self.narrowing_at.get(&issue.path).and_then(|&at| self.narrowing.get_mut(at));
            match known {
                Some((_, known)) if known == fragment => {}
                Some((_, known)) => {
                    *known = fragment.clone();
                    changed = true;
                }
                None => {
                    self.narrowing_at.insert(issue.path.clone(), self.narrowing.len());
                    self.narrowing.push((issue.path.clone(), fragment.clone()));
                    changed = true;
                }
            }
        }
        if changed {
            let constraints = self.narrowing.iter().map(|(path, fragment)| (path.as_str(), fragment));
            self.narrowed = crate::narrow::narrow(schema, constraints).map(Arc::new);
        }
    }

    /// Prepare what the attempt after `record` is told: a prior attempt for the fresh prompt,
    /// or the kept answer and the feedback message in the conversation.
    pub(super) fn prepare_feedback(&mut self, record: &AttemptRecord) {
        let structured = self.plan.mode == Mode::Structured;
        // An attempt that failed without an answer (its time ran out, the provider failed): in
        // a conversation the same messages go again; a fresh prompt lists it among the priors.
        let no_answer = record.status == AttemptStatus::Error && !answered_unread(record);
        let prior = self.prior_of(record);
        let too_large = too_large_issue(record);
        match self.plan.strategy {
            Strategy::Fresh => self.prior.push(prior),
            Strategy::Conversation => {
                if no_answer {
                    return;
                }
                let example = self.example_again.take();
                let ctx = Feedback {
                    attempt: record.iteration + 1,
                    max_attempts: self.limit,
                    previous: record.iteration,
                    structured,
                    prior: &prior,
                    schema: self.schema_again.take(),
                    example: self.filled_example(record).or(example),
                };
                let text = self.render_feedback(&ctx);
                // Nothing of an answer too large was kept: only the feedback follows.
                if !too_large {
                    self.conversation.push(Message::assistant(kept_answer(&record.raw, self.plan.feedback_max_chars)));
                }
                self.conversation.push(Message::user(text));
            }
        }
    }

    /// `record` as the feedback shows it: its answer (the artifact, else the raw text) and its
    /// issues, both bounded by `feedback_max_chars`.
    fn prior_of(&self, record: &AttemptRecord) -> PriorAttempt {
        let echo = match &record.artifact {
            Some(Value::String(s)) if self.plan.mode == Mode::Text => s.clone(),
            Some(a) => pretty(a),
            None => record.raw.clone(),
        };
        let mut prior = PriorAttempt::new(
            record.iteration,
            &echo,
            self.plan.feedback_max_chars,
            record.issues.clone(),
            record.repeat_of,
        );
        prior.cut_off = record.finish_reason == Some(FinishReason::Length);
        prior
    }

    fn render_feedback(&self, ctx: &Feedback<'_>) -> String {
        self.prompts.feedback(ctx).unwrap_or_else(|e| fallback_feedback(ctx, &e.to_string()))
    }

    /// The feedback on `record` when no attempt may follow it — what was wrong with it, from
    /// the run's feedback template, which then says no attempt is left — for a submitter, who
    /// is answered even when the run halts with its submission.
    pub fn last_feedback(&self, record: &AttemptRecord) -> String {
        let prior = self.prior_of(record);
        let ctx = Feedback {
            attempt: record.iteration + 1,
            max_attempts: self.limit,
            previous: record.iteration,
            structured: self.plan.mode == Mode::Structured,
            prior: &prior,
            schema: None,
            example: None,
        };
        self.render_feedback(&ctx)
    }

    /// When `record` lost the shape — prose, a copied placeholder, a schema instead of an
    /// answer — the generated example again, with every placeholder an answer so far filled in
    /// (this one's `Key: value` lines or JSON first, then the earlier answers, latest first).
    fn filled_example(&self, record: &AttemptRecord) -> Option<String> {
        let skeleton = self.skeleton.as_ref()?;
        let lost = record.status == AttemptStatus::InvalidJson
            || record.issues.iter().any(|i| i.code == codes::PLACEHOLDER || i.code == codes::SCHEMA_ECHO);
        if !lost {
            return None;
        }
        // A schema's members (`type`, `properties`) are not answers.
        let prose = if record.artifact.is_none() { prose_pairs(&record.raw, skeleton) } else { Value::Null };
        let mut known: Vec<&Value> = vec![&prose];
        known.extend(answer_given(record));
        known.extend(self.history.iter().rev().filter(|a| a.iteration != record.iteration).filter_map(answer_given));
        Some(skeleton_value_text(&fill_known(skeleton, &known)))
    }
}

/// How a person's answer reaches the model.
pub(super) fn reply_text(reply: &PersonReply) -> String {
    format!(
        "A person answered the question your attempts raised.\nQuestion: {}\nAnswer: {}\nUse their answer in your next answer.",
        reply.question.trim(),
        reply.answer.trim()
    )
}

/// The artifact of an attempt, unless it was a schema given instead of an answer.
fn answer_given(a: &AttemptRecord) -> Option<&Value> {
    a.artifact.as_ref().filter(|_| !a.issues.iter().any(|i| i.code == codes::SCHEMA_ECHO))
}

/// A previous answer as the conversation keeps it for the next attempt: like every echo,
/// at most `max_chars` characters, with the marker the feedback's echo uses when it is cut.
fn kept_answer(raw: &str, max_chars: usize) -> String {
    let (kept, cut) = truncate_chars(raw, max_chars);
    if !cut {
        return kept;
    }
    let shown = kept.chars().count();
    let total = shown + raw[kept.len()..].chars().count();
    format!("{kept}\n[truncated: showing the first {shown} of {total} characters]")
}

fn fallback_feedback(ctx: &Feedback<'_>, error: &str) -> String {
    let mut text = format!("Attempt {} of {}.\n\nYour previous answer was rejected:\n", ctx.attempt, ctx.max_attempts);
    for (i, issue) in ctx.prior.issues.iter().enumerate() {
        text.push_str(&format!("{}. {}: {} [{}]\n", i + 1, issue.path, issue.message, issue.code));
    }
    text.push_str(&format!("\n(the feedback template failed: {error})\n\nReturn only the corrected answer."));
    text
}

/// Whether `record`'s answer was too large to read: an answer all the same, which the proposer
/// is told about.
fn too_large_issue(record: &AttemptRecord) -> bool {
    record.issues.iter().any(|i| i.code == codes::RESPONSE_TOO_LARGE)
}

/// Whether `record` failed on an answer that could not be read or checked (too large, or not
/// checked in time): the proposer is told about it.
fn answered_unread(record: &AttemptRecord) -> bool {
    record.issues.iter().any(|i| i.code == codes::RESPONSE_TOO_LARGE || i.code == codes::CHECK_TIMEOUT)
}
