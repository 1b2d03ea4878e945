//! An attempt's record, built from how it ended: its status, score and issues (the built-in
//! answer checks' among them), tokens and cost, and the earlier attempt it repeats (counted
//! for stagnation).

use serde_json::Value;

use super::{ArtifactRead, Engine};
use crate::answer_checks::{copied_placeholders, schema_echo};
use crate::canonical::canonical_json;
use crate::chat::ChatResponse;
use crate::issue::{Issue, Score, Verdict, bounded, codes};
use crate::price::estimate_tokens;
use crate::record::{AttemptRecord, AttemptStatus};

/// An answer given so far, by its canonical text, for stagnation.
#[derive(Debug)]
pub(super) struct Seen {
    key: String,
    /// The attempt that first gave the answer.
    pub(super) first: u32,
    /// How often it has been given.
    pub(super) count: u32,
}

impl Engine {
    pub(super) fn failed_record(&self, iteration: u32, wall_ms: u64, issue: Issue) -> AttemptRecord {
        AttemptRecord {
            iteration,
            status: AttemptStatus::Error,
            raw: String::new(),
            artifact: None,
            extraction: None,
            repairs: Vec::new(),
            score: Score::ZERO,
            issues: vec![issue],
            tokens_in: 0,
            tokens_out: 0,
            tokens_estimated: false,
            cost_usd: Some(0.0).filter(|_| self.plan.proposer(self.proposer).1.is_some()),
            judge_cost_usd: None,
            wall_ms,
            started_at: None,
            finished_at: None,
            finish_reason: None,
            repeat_of: None,
            model: Some(self.plan.proposer(self.proposer).0.to_owned()),
            served_model: None,
            temperature: self.temperature,
            reply: None,
            prompt: None,
        }
    }

    pub(super) fn answered_record(
        &mut self,
        iteration: u32,
        request_chars: usize,
        wall_ms: u64,
        response: ChatResponse,
        read: ArtifactRead,
        verdict: Option<Verdict>,
    ) -> AttemptRecord {
        let (tokens_in, tokens_out, tokens_estimated) = match response.usage {
            Some(u) => (u.input_tokens, u.output_tokens, false),
            None => (estimate_tokens(request_chars), estimate_tokens(response.text.chars().count()), true),
        };
        let (model, price) = self.plan.proposer(self.proposer);
        let model = model.to_owned();
        let cost_usd = response.cost_usd.or_else(|| price.map(|p| p.cost(tokens_in, tokens_out)));
        let judge_cost_usd = verdict.as_ref().and_then(|v| v.cost_usd);
        let (mut status, score, mut issues) = match (&read.artifact, verdict) {
            (Some(_), Some(v)) => {
                let ok = v.score.get() >= self.threshold && !v.issues.iter().any(Issue::is_error);
                (if ok { AttemptStatus::Accepted } else { AttemptStatus::Rejected }, v.score, v.issues)
            }
            (Some(_), None) => (AttemptStatus::Accepted, Score::ONE, Vec::new()),
            (None, _) => {
                let status = match &read.issue {
                    Some(i) if i.code != codes::INVALID_JSON => AttemptStatus::Error,
                    _ => AttemptStatus::InvalidJson,
                };
                (status, Score::ZERO, read.issue.into_iter().collect())
            }
        };
        if let Some(artifact) = &read.artifact {
            let copied = copied_placeholders(artifact, &self.placeholders);
            if !copied.is_empty() {
                status = AttemptStatus::Rejected;
                issues.extend(copied);
            }
        }
        if status == AttemptStatus::Rejected
            && let (Some(artifact), Some(schema)) = (&read.artifact, self.plan.schema.as_deref())
            && let Some(issue) = schema_echo(artifact, schema)
        {
            issues.insert(0, issue);
        }
        // However the verdict was made (a submission, a runner's evaluators), the record keeps
        // at most its first issues.
        let issues = bounded(issues);
        let repeat_of = self.note_seen(read.artifact.as_ref(), &response.text, iteration);
        AttemptRecord {
            iteration,
            status,
            raw: response.text,
            artifact: read.artifact,
            extraction: read.extraction,
            repairs: read.repairs,
            score,
            issues,
            tokens_in,
            tokens_out,
            tokens_estimated,
            cost_usd,
            judge_cost_usd,
            wall_ms,
            started_at: None,
            finished_at: None,
            finish_reason: response.finish_reason,
            repeat_of,
            model: Some(model),
            served_model: response.served_model,
            temperature: self.temperature,
            reply: None,
            prompt: None,
        }
    }

    /// Count an answer for stagnation: the earlier attempt it repeats, if any. Answers compare
    /// by canonical artifact, or by raw text when no artifact was found.
    pub(super) fn note_seen(&mut self, artifact: Option<&Value>, raw: &str, iteration: u32) -> Option<u32> {
        let key = match artifact {
            Some(a) => canonical_json(a),
            None => format!("raw:{raw}"),
        };
        match self.seen.iter_mut().find(|s| s.key == key) {
            Some(s) => {
                s.count += 1;
                Some(s.first)
            }
            None => {
                self.seen.push(Seen { key, first: iteration, count: 1 });
                None
            }
        }
    }
}
