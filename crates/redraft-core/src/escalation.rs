//! Escalation: what a person needs to act on a failed run, derived deterministically from
//! the history. No model is asked.

use std::collections::{HashMap, HashSet};

use crate::chat::FinishReason;
use crate::issue::Issue;
use crate::policy::HaltReason;
use crate::price::{CostEstimate, usd};
use crate::record::{AttemptRecord, AttemptStatus, Escalation, RecurringIssue, RunErrorReport};

/// Facts about the run that the history alone does not hold.
#[derive(Debug, Clone, Copy)]
pub struct RunFacts<'a> {
    pub halted_because: HaltReason,
    pub max_iterations: u32,
    pub max_tokens: Option<u32>,
    pub max_budget_usd: Option<f64>,
    /// What the attempts cost in all.
    pub spent_usd: f64,
    /// The estimate of the attempt the budget could not pay for, when it halted the run.
    pub next_cost: Option<&'a CostEstimate>,
    pub error: Option<&'a RunErrorReport>,
}

/// Analyse a failed run's history.
pub fn escalate(history: &[AttemptRecord], facts: RunFacts<'_>) -> Escalation {
    let recurring = recurring_issues(history);
    let (pattern, question) = diagnose(history, &recurring, facts);
    Escalation {
        summary: summary(history, facts),
        attempts: history.iter().map(attempt_line).collect(),
        recurring_issues: recurring,
        pattern,
        question,
    }
}

fn best(history: &[AttemptRecord]) -> Option<&AttemptRecord> {
    history.iter().filter(|a| a.artifact.is_some()).fold(None, |best: Option<&AttemptRecord>, a| match best {
        Some(b) if b.score > a.score => Some(b),
        _ => Some(a),
    })
}

fn summary(history: &[AttemptRecord], facts: RunFacts<'_>) -> String {
    let n = history.len();
    let attempts = if n == 1 { "1 attempt".to_owned() } else { format!("{n} attempts") };
    let best = match best(history) {
        Some(b) => format!("best score {} at attempt {}", b.score, b.iteration),
        None if n == 0 => "no attempt was made".to_owned(),
        None => "no attempt produced an artifact".to_owned(),
    };
    format!("{attempts}; {best}; halted because {}", facts.halted_because)
}

fn attempt_line(a: &AttemptRecord) -> String {
    if let Some(k) = a.repeat_of {
        return format!("{}: identical to {k}", a.iteration);
    }
    if a.status == AttemptStatus::Accepted {
        return format!("{}: accepted", a.iteration);
    }
    let mut parts: Vec<String> = a.issues.iter().take(2).map(issue_label).collect();
    if a.issues.len() > 2 {
        parts.push(format!("(+{} more)", a.issues.len() - 2));
    }
    if parts.is_empty() {
        parts.push(a.status.as_str().to_owned());
    }
    format!("{}: {}", a.iteration, parts.join("; "))
}

fn issue_label(issue: &Issue) -> String {
    if issue.path.is_empty() { issue.code.clone() } else { format!("{} {}", issue.path, issue.code) }
}

/// An issue's identity across attempts: its path and code.
type Key<'a> = (&'a str, &'a str);

fn key(issue: &Issue) -> Key<'_> {
    (issue.path.as_str(), issue.code.as_str())
}

/// Issues (path + code) found in two or more attempts, most frequent first (ties in the order
/// they first appeared).
pub fn recurring_issues(history: &[AttemptRecord]) -> Vec<RecurringIssue> {
    let mut counts: Vec<RecurringIssue> = Vec::new();
    let mut index: HashMap<Key<'_>, usize> = HashMap::new();
    for a in history {
        let mut seen_here: HashSet<Key<'_>> = HashSet::new();
        for i in &a.issues {
            if !seen_here.insert(key(i)) {
                continue;
            }
            match index.get(&key(i)).and_then(|&at| counts.get_mut(at)) {
                Some(r) => r.count += 1,
                None => {
                    index.insert(key(i), counts.len());
                    counts.push(RecurringIssue { path: i.path.clone(), code: i.code.clone(), count: 1 });
                }
            }
        }
    }
    counts.retain(|r| r.count >= 2);
    counts.sort_by_key(|r| std::cmp::Reverse(r.count));
    counts
}

/// The most frequent recurring issue whose latest occurrence carried a hint, with that issue.
fn hinted_recurring<'a>(
    history: &'a [AttemptRecord],
    recurring: &'a [RecurringIssue],
) -> Option<(&'a RecurringIssue, &'a Issue)> {
    // The latest occurrence of each issue: the first in the latest attempt that has it.
    let mut latest: HashMap<Key<'_>, &Issue> = HashMap::new();
    for issue in history.iter().rev().flat_map(|a| &a.issues) {
        latest.entry(key(issue)).or_insert(issue);
    }
    recurring.iter().find_map(|r| {
        let latest = *latest.get(&(r.path.as_str(), r.code.as_str()))?;
        latest.hint.as_ref().map(|_| (r, latest))
    })
}

fn first_message<'a>(history: &'a [AttemptRecord], path: &str, code: &str) -> Option<&'a str> {
    history.iter().flat_map(|a| &a.issues).find(|i| i.path == path && i.code == code).map(|i| i.message.as_str())
}

fn place(path: &str) -> String {
    if path.is_empty() { "the whole answer".to_owned() } else { format!("`{path}`") }
}

/// An issue that an attempt fixed and a later attempt brought back: (path, code, fixed at, back at).
fn regression(history: &[AttemptRecord]) -> Option<(String, String, u32, u32)> {
    let keys: Vec<HashSet<Key<'_>>> = history.iter().map(|a| a.issues.iter().map(key).collect()).collect();
    let has = |at: usize, k: &Key<'_>| keys.get(at).is_some_and(|set| set.contains(k));
    for (i, a) in history.iter().enumerate() {
        let mut tried: HashSet<Key<'_>> = HashSet::new();
        for issue in &a.issues {
            let k = key(issue);
            if !tried.insert(k) {
                continue;
            }
            let later = history.iter().enumerate().skip(i + 1);
            let Some((fixed, fixed_at)) = later.clone().find(|(j, b)| b.artifact.is_some() && !has(*j, &k)) else {
                continue;
            };
            if let Some((_, back)) = later.skip_while(|(j, _)| *j <= fixed).find(|(j, _)| has(*j, &k)) {
                return Some((issue.path.clone(), issue.code.clone(), fixed_at.iteration, back.iteration));
            }
        }
    }
    None
}

fn diagnose(history: &[AttemptRecord], recurring: &[RecurringIssue], facts: RunFacts<'_>) -> (Option<String>, String) {
    let n = history.len();
    if facts.halted_because == HaltReason::ProviderError {
        let msg = facts.error.map(|e| e.message.as_str()).unwrap_or("the provider failed");
        return (
            Some(format!("the proposer could not be reached or refused the request: {msg}")),
            "Is the model name, API key and server address right, and is the server up?".to_owned(),
        );
    }
    if facts.halted_because == HaltReason::Cancelled {
        return (
            Some("the run was cancelled before an attempt passed".to_owned()),
            "Resume the run, or take the best-so-far artifact as it is?".to_owned(),
        );
    }
    if let Some((r, issue)) = hinted_recurring(history, recurring) {
        let (hint, tables) = issue.hint.as_deref().map_or(("", &[][..]), |h| (h.text.as_str(), &h.tables[..]));
        let tables = tables.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ");
        let from = if tables.is_empty() { String::new() } else { format!(" from table {tables}") };
        return (
            Some(format!(
                "{} ({}) kept failing in {} attempts although the feedback named what would satisfy it{from}: {hint}",
                place(&r.path),
                r.code,
                r.count
            )),
            if tables.is_empty() {
                format!(
                    "The model was told what would satisfy {} and still failed it: {}. Should the requirement change, or does the task need to say more?",
                    place(&r.path),
                    issue.message
                )
            } else {
                format!(
                    "The model was shown the reference data{from} and still failed {}: {}. Is the right entry in the table (add or correct it there), or should the requirement change?",
                    place(&r.path),
                    issue.message
                )
            },
        );
    }
    let top = recurring.first();
    let top_text = top.map(|r| {
        let msg = first_message(history, &r.path, &r.code).unwrap_or("");
        format!("{} ({}: {msg})", place(&r.path), r.code)
    });

    if let Some(rep) = history.iter().find(|a| a.repeat_of.is_some())
        && let Some(k) = rep.repeat_of
    {
        let why = history
            .iter()
            .find(|a| a.iteration == k)
            .and_then(|a| a.issues.first())
            .map(|i| format!("{}: {}", place(&i.path), i.message))
            .unwrap_or_else(|| "its problems".to_owned());
        return (
            Some(format!(
                "the same answer was proposed twice (attempts {k} and {}): the model lacks the information to change it",
                rep.iteration
            )),
            format!(
                "The model keeps answering the same way despite {why}. Give it the missing information, or change the requirement?"
            ),
        );
    }
    if let Some(cut) = history.iter().find(|a| {
        a.finish_reason == Some(FinishReason::Length)
            || a.repairs.contains(&crate::extract::Repair::TruncatedTail.into())
    }) {
        let limit = facts.max_tokens.map(|m| format!(" (max_tokens = {m})")).unwrap_or_default();
        return (
            Some(format!("the output was cut at the token limit{limit} at attempt {}", cut.iteration)),
            "Raise max_tokens, or ask for a shorter answer?".to_owned(),
        );
    }
    if n > 0 && history.iter().all(|a| a.status == AttemptStatus::InvalidJson) {
        return (
            Some("no attempt contained JSON at all: the model answers in prose".to_owned()),
            "Use a model that follows JSON instructions, or put an example answer in the prompt?".to_owned(),
        );
    }
    if n > 0 && history.iter().all(|a| a.issues.iter().any(|i| i.code == crate::issue::codes::TIMEOUT)) {
        return (
            Some("every attempt timed out".to_owned()),
            "Raise attempt_timeout, or use a faster model?".to_owned(),
        );
    }
    if n >= 2
        && let Some(r) = recurring.iter().find(|r| r.count as usize == n)
    {
        let msg = first_message(history, &r.path, &r.code).unwrap_or("");
        return (
            Some(format!("{} failed in every attempt ({})", place(&r.path), r.code)),
            format!(
                "Every attempt failed at {}: {msg}. Can that requirement be met with the information given, or should it change?",
                place(&r.path)
            ),
        );
    }
    if let Some((path, code, fixed, back)) = regression(history) {
        return (
            Some(format!(
                "a regression: {} ({code}) was fixed at attempt {fixed} and came back at attempt {back}",
                place(&path)
            )),
            format!(
                "Fixing one problem brings back another at {}; should the requirements be stated together, or relaxed?",
                place(&path)
            ),
        );
    }
    let pattern = match facts.halted_because {
        HaltReason::Budget => Some(match facts.next_cost {
            Some(next) => format!(
                "the budget{} ran out after {n} attempts: ${} was spent and the next attempt was estimated at {}",
                facts.max_budget_usd.map(|b| format!(" of ${}", usd(b))).unwrap_or_default(),
                usd(facts.spent_usd),
                next.describe()
            ),
            None => format!(
                "the budget{} ran out after {n} attempts",
                facts.max_budget_usd.map(|b| format!(" of ${}", usd(b))).unwrap_or_default()
            ),
        }),
        HaltReason::WallTime => Some(format!("the time limit ran out after {n} attempts")),
        HaltReason::Patience => Some("the score stopped improving".to_owned()),
        HaltReason::MaxIterations if n > 0 => {
            Some(format!("the answers did not pass within {} attempts", facts.max_iterations))
        }
        _ => None,
    };
    let question = match (facts.halted_because, top_text) {
        (HaltReason::Budget, _) => "Raise max_budget_usd, or accept the best-so-far artifact?".to_owned(),
        (HaltReason::WallTime, _) => "Raise max_wall_time, or accept the best-so-far artifact?".to_owned(),
        (_, Some(t)) => format!(
            "The most frequent problem is {t}. Can it be fixed with the information given, or should the requirement change?"
        ),
        _ => "Accept the best-so-far artifact, allow more attempts, or change the task?".to_owned(),
    };
    (pattern, question)
}
