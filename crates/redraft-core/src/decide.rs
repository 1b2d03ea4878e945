//! The stateless decide function: given one iteration's test and review results,
//! answer `proceed`, `retry` (with concrete feedback) or `escalate` (with context and a
//! question for a person). Deterministic: no model is asked.

use serde::{Deserialize, Serialize};

use crate::diagnostics::{self, TEST_FAILED};
use crate::issue::Issue;
use crate::prompt::truncate_chars;

/// One iteration's outcome, as an agent or CI reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IterationCheck {
    pub task_id: String,
    pub current_iteration: u32,
    pub max_iterations: u32,
    pub test_result: TestResult,
    #[serde(default)]
    pub review_result: ReviewResult,
    /// Earlier iterations of the same task (with `--store`, read from the store).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<PriorCheck>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestResult {
    pub status: TestStatus,
    #[serde(default)]
    pub output: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TestStatus {
    Pass,
    Fail,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewResult {
    pub status: ReviewStatus,
    #[serde(default)]
    pub feedback: String,
}

impl Default for ReviewResult {
    fn default() -> Self {
        Self { status: ReviewStatus::Pending, feedback: String::new() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReviewStatus {
    Approve,
    Reject,
    Pending,
}

/// An earlier iteration: its number and what was found then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorCheck {
    pub iteration: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_result: Option<TestResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_result: Option<ReviewResult>,
    /// A one-line summary; derived from the results when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// Knobs of the decide function (config keys of the same names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DecideSettings {
    /// A failing test leads to `retry` (else to `escalate`). By default, true.
    pub auto_retry_on_test_fail: bool,
    /// A rejecting review leads to `retry` (else to `escalate`). By default, true.
    pub auto_retry_on_review_reject: bool,
    /// Escalations of agent loops carry the iterations' diffs. By default, false.
    pub escalation_includes_diff: bool,
    /// Longest retry feedback (summary plus items), in characters. By default, 500.
    pub feedback_max_length: usize,
}

impl Default for DecideSettings {
    fn default() -> Self {
        Self {
            auto_retry_on_test_fail: true,
            auto_retry_on_review_reject: true,
            escalation_includes_diff: false,
            feedback_max_length: 500,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Proceed,
    Retry,
    Escalate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    High,
    Medium,
    Low,
}

/// What the next iteration should fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryFeedback {
    pub summary: String,
    pub actionable_items: Vec<String>,
    pub priority: Priority,
}

/// What a person taking over needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EscalationContext {
    pub attempts_summary: Vec<String>,
    pub pattern_detected: String,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub action: Action,
    pub task_id: String,
    /// For `retry`, the next iteration; for `escalate`, the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<RetryFeedback>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<EscalationContext>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Decide. Order: pass + approve → proceed; iteration ≥ max → escalate; test fail → retry;
/// review reject → retry; otherwise (tests pass, review pending) → proceed.
pub fn decide(check: &IterationCheck, settings: &DecideSettings) -> Decision {
    let test_failed = check.test_result.status == TestStatus::Fail;
    let review = &check.review_result;
    let rejected = review.status == ReviewStatus::Reject;
    let base = Decision {
        action: Action::Proceed,
        task_id: check.task_id.clone(),
        iteration: None,
        feedback: None,
        context: None,
        question: None,
        message: None,
    };
    if !test_failed && review.status == ReviewStatus::Approve {
        return Decision { message: Some("Tests pass and the review approved: proceed.".to_owned()), ..base };
    }
    let at_cap = check.current_iteration >= check.max_iterations;
    let blocked =
        (test_failed && !settings.auto_retry_on_test_fail) || (rejected && !settings.auto_retry_on_review_reject);
    if at_cap || blocked {
        return escalate(check, base);
    }
    if test_failed || rejected {
        return Decision {
            action: Action::Retry,
            iteration: Some(check.current_iteration + 1),
            feedback: Some(feedback(check, settings)),
            ..base
        };
    }
    Decision { message: Some("Tests pass; the review is still pending: proceed to review.".to_owned()), ..base }
}

/// The one-line summary of an iteration's results.
pub fn summarize(test: Option<&TestResult>, review: Option<&ReviewResult>) -> String {
    let mut parts = Vec::new();
    if let Some(t) = test.filter(|t| t.status == TestStatus::Fail) {
        parts.push(test_failure(&t.output).0);
    }
    if let Some(r) = review.filter(|r| r.status == ReviewStatus::Reject) {
        parts.push(format!("Review rejected: {}", first_sentence(&r.feedback)));
    }
    if parts.is_empty() {
        match (test.map(|t| t.status), review.map(|r| r.status)) {
            (Some(TestStatus::Pass), Some(ReviewStatus::Approve)) => "Tests pass; review approved".to_owned(),
            (Some(TestStatus::Pass), _) => "Tests pass".to_owned(),
            _ => "No result".to_owned(),
        }
    } else {
        parts.join("; ")
    }
}

fn feedback(check: &IterationCheck, settings: &DecideSettings) -> RetryFeedback {
    let mut summary_parts = Vec::new();
    let mut items = Vec::new();
    let test_failed = check.test_result.status == TestStatus::Fail;
    if test_failed {
        let (summary, test_items) = test_failure(&check.test_result.output);
        summary_parts.push(summary);
        items.extend(test_items);
    }
    if check.review_result.status == ReviewStatus::Reject {
        summary_parts.push(format!("Review rejected: {}", first_sentence(&check.review_result.feedback)));
        items.extend(review_items(&check.review_result.feedback));
    }
    let max = settings.feedback_max_length.max(1);
    let (summary, _) = truncate_chars(&summary_parts.join("; "), max);
    let mut budget = max.saturating_sub(summary.chars().count());
    let mut kept = Vec::new();
    for item in items {
        if budget == 0 {
            break;
        }
        let (text, _) = truncate_chars(&item, budget);
        budget = budget.saturating_sub(text.chars().count());
        kept.push(text);
    }
    RetryFeedback {
        summary,
        actionable_items: kept,
        priority: if test_failed { Priority::High } else { Priority::Medium },
    }
}

/// A test failure's summary and concrete instructions, from the test output.
fn test_failure(output: &str) -> (String, Vec<String>) {
    let issues = diagnostics::issues_from_output(output, 5);
    let mut summary = None;
    let mut items = Vec::new();
    for issue in issues.iter().take(10) {
        let (s, item) = phrase(issue);
        summary.get_or_insert(s);
        if !items.contains(&item) {
            items.push(item);
        }
    }
    (summary.unwrap_or_else(|| "Test failed".to_owned()), items)
}

/// (summary, actionable item) for one issue.
fn phrase(issue: &Issue) -> (String, String) {
    let text = |v: &Option<Box<serde_json::Value>>| v.as_deref().and_then(|v| v.as_str()).map(str::to_owned);
    if let (Some(expected), Some(received)) = (text(&issue.expected), text(&issue.found)) {
        // Jest-style "token to contain userId" / "status to be 200".
        if let Some((subject, rest)) = expected.split_once(" to ") {
            let (verb, object) = rest.split_once(' ').unwrap_or((rest, ""));
            let (summary, item) = match verb {
                "contain" | "include" | "have" => (
                    format!("Test failed: {subject} missing {object}"),
                    format!("Make the {subject} {verb} {object} ({} expects it; it was {received})", issue.path),
                ),
                "be" | "equal" | "match" => (
                    format!("Test failed: {subject} is {received}, expected {object}"),
                    format!("Make {subject} {verb} {object} ({} expects it; it was {received})", issue.path),
                ),
                _ => (
                    format!("Test failed: expected {expected}"),
                    format!("Make {expected} ({} expects it; it was {received})", issue.path),
                ),
            };
            return (summary, item);
        }
        return (
            format!("Test failed: expected {expected}, received {received}"),
            format!("{}: expected {expected}, received {received}", issue.path),
        );
    }
    let first_line = issue.message.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_owned();
    match (issue.code.as_str(), issue.path.as_str()) {
        (_, "") => (format!("Test failed: {first_line}"), format!("Fix the failure: {first_line}")),
        (TEST_FAILED, path) => (format!("Test failed: {first_line}"), format!("Fix {path}: {first_line}")),
        (_, path) => (format!("Build failed: {first_line}"), format!("Fix the error at {path}: {first_line}")),
    }
}

fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let line =
        text.lines().map(|l| l.trim().trim_start_matches(['-', '*']).trim()).find(|l| !l.is_empty()).unwrap_or("");
    let end = line.find(". ").map(|i| i + 1).unwrap_or(line.len());
    let sentence = line.get(..end).unwrap_or(line).trim_end_matches('.');
    if sentence.is_empty() { "no feedback given".to_owned() } else { sentence.to_owned() }
}

/// Review feedback as items: bullet or numbered lines, else sentences.
fn review_items(feedback: &str) -> Vec<String> {
    let bullets: Vec<String> = feedback
        .lines()
        .map(str::trim)
        .filter_map(|l| {
            let stripped = l.trim_start_matches(['-', '*', '•']).trim_start();
            let stripped =
                stripped.trim_start_matches(|c: char| c.is_ascii_digit()).trim_start_matches(['.', ')']).trim();
            (stripped.len() < l.len() && !stripped.is_empty()).then(|| stripped.to_owned())
        })
        .collect();
    if !bullets.is_empty() {
        return bullets;
    }
    feedback.split(". ").map(|s| s.trim().trim_end_matches('.').to_owned()).filter(|s| !s.is_empty()).collect()
}

fn escalate(check: &IterationCheck, base: Decision) -> Decision {
    let mut lines: Vec<(u32, String)> = check
        .history
        .iter()
        .filter(|p| p.iteration < check.current_iteration)
        .map(|p| {
            let s = p.summary.clone().unwrap_or_else(|| summarize(p.test_result.as_ref(), p.review_result.as_ref()));
            (p.iteration, s)
        })
        .collect();
    lines.push((check.current_iteration, summarize(Some(&check.test_result), Some(&check.review_result))));
    lines.sort_by_key(|(i, _)| *i);
    lines.dedup_by_key(|(i, _)| *i);
    let summaries: Vec<&str> = lines.iter().map(|(_, s)| s.as_str()).collect();
    let n = check.current_iteration;
    let last = summaries.last().copied().unwrap_or("");
    let pattern = if summaries.len() >= 2 && summaries.iter().all(|s| *s == last) {
        format!("the same failure in every iteration ({last}): the changes are not reaching the cause")
    } else if summaries.len() >= 3 && summaries.windows(3).any(|w| w[0] == w[2] && w[0] != w[1]) {
        "alternating failures: fixing one problem brings back another".to_owned()
    } else if check.test_result.status == TestStatus::Pass {
        "the tests pass but the review keeps rejecting".to_owned()
    } else {
        format!("no passing iteration within {} iterations", check.max_iterations)
    };
    let question = if check.test_result.status == TestStatus::Fail {
        let detail = last.strip_prefix("Test failed: ").unwrap_or(last);
        format!(
            "After {n} attempts the test still fails ({detail}); which should change, the test or the implementation?"
        )
    } else {
        format!(
            "After {n} attempts the review still rejects ({}); should the requirement or the approach change?",
            first_sentence(&check.review_result.feedback)
        )
    };
    Decision {
        action: Action::Escalate,
        iteration: Some(n),
        context: Some(EscalationContext {
            attempts_summary: lines.iter().map(|(i, s)| format!("Iteration {i}: {s}")).collect(),
            pattern_detected: pattern,
        }),
        question: Some(question),
        ..base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(iteration: u32, test: TestStatus, output: &str, review: ReviewStatus, feedback: &str) -> IterationCheck {
        IterationCheck {
            task_id: "task-003".into(),
            current_iteration: iteration,
            max_iterations: 3,
            test_result: TestResult { status: test, output: output.into() },
            review_result: ReviewResult { status: review, feedback: feedback.into() },
            history: Vec::new(),
        }
    }

    const JEST: &str = "FAIL src/auth/login.test.ts\n  Expected: token to contain userId\n  Received: undefined\n";

    #[test]
    fn the_spec_example_retries_with_concrete_feedback() {
        let d = decide(&check(2, TestStatus::Fail, JEST, ReviewStatus::Pending, ""), &DecideSettings::default());
        assert_eq!(d.action, Action::Retry);
        assert_eq!(d.iteration, Some(3));
        let f = d.feedback.unwrap();
        assert_eq!(f.summary, "Test failed: token missing userId");
        assert_eq!(
            f.actionable_items,
            ["Make the token contain userId (src/auth/login.test.ts expects it; it was undefined)"]
        );
        assert_eq!(f.priority, Priority::High);
    }

    #[test]
    fn the_order_of_the_rules() {
        let s = DecideSettings::default();
        assert_eq!(decide(&check(3, TestStatus::Pass, "", ReviewStatus::Approve, ""), &s).action, Action::Proceed);
        assert_eq!(decide(&check(3, TestStatus::Fail, JEST, ReviewStatus::Pending, ""), &s).action, Action::Escalate);
        assert_eq!(
            decide(&check(1, TestStatus::Pass, "", ReviewStatus::Reject, "Rename x."), &s).action,
            Action::Retry
        );
        assert_eq!(decide(&check(1, TestStatus::Pass, "", ReviewStatus::Pending, ""), &s).action, Action::Proceed);
        let strict = DecideSettings { auto_retry_on_test_fail: false, ..s.clone() };
        assert_eq!(
            decide(&check(1, TestStatus::Fail, JEST, ReviewStatus::Pending, ""), &strict).action,
            Action::Escalate
        );
        let strict = DecideSettings { auto_retry_on_review_reject: false, ..s };
        assert_eq!(
            decide(&check(1, TestStatus::Pass, "", ReviewStatus::Reject, "No."), &strict).action,
            Action::Escalate
        );
    }

    #[test]
    fn escalation_summarises_every_iteration_and_names_a_pattern() {
        let mut c = check(3, TestStatus::Fail, JEST, ReviewStatus::Pending, "");
        c.history = vec![
            PriorCheck { iteration: 1, test_result: Some(c.test_result.clone()), review_result: None, summary: None },
            PriorCheck { iteration: 2, test_result: Some(c.test_result.clone()), review_result: None, summary: None },
        ];
        let d = decide(&c, &DecideSettings::default());
        assert_eq!(d.action, Action::Escalate);
        let ctx = d.context.unwrap();
        assert_eq!(
            ctx.attempts_summary,
            [
                "Iteration 1: Test failed: token missing userId",
                "Iteration 2: Test failed: token missing userId",
                "Iteration 3: Test failed: token missing userId"
            ]
        );
        assert!(ctx.pattern_detected.starts_with("the same failure in every iteration"), "{}", ctx.pattern_detected);
        assert_eq!(
            d.question.unwrap(),
            "After 3 attempts the test still fails (token missing userId); which should change, the test or the implementation?"
        );
    }

    #[test]
    fn review_feedback_becomes_items() {
        let d = decide(
            &check(
                1,
                TestStatus::Pass,
                "",
                ReviewStatus::Reject,
                "- Rename `tmp` to `token`\n- Add a test for expiry\n",
            ),
            &DecideSettings::default(),
        );
        let f = d.feedback.unwrap();
        assert_eq!(f.summary, "Review rejected: Rename `tmp` to `token`");
        assert_eq!(f.actionable_items, ["Rename `tmp` to `token`", "Add a test for expiry"]);
        assert_eq!(f.priority, Priority::Medium);
    }

    #[test]
    fn compiler_and_pytest_output_become_items_and_feedback_is_bounded() {
        let out = "src/lib.rs:3:5: error: cannot find value `x` in this scope\nFAILED tests/test_a.py::test_b - assert 1 == 2\n";
        let d = decide(&check(1, TestStatus::Fail, out, ReviewStatus::Pending, ""), &DecideSettings::default());
        let f = d.feedback.unwrap();
        assert_eq!(f.summary, "Build failed: cannot find value `x` in this scope");
        assert_eq!(
            f.actionable_items,
            [
                "Fix the error at src/lib.rs:3:5: cannot find value `x` in this scope",
                "Fix tests/test_a.py::test_b: assert 1 == 2"
            ]
        );
        let long = "x".repeat(2000);
        let d = decide(&check(1, TestStatus::Fail, &long, ReviewStatus::Pending, ""), &DecideSettings::default());
        let f = d.feedback.unwrap();
        let total: usize =
            f.summary.chars().count() + f.actionable_items.iter().map(|i| i.chars().count()).sum::<usize>();
        assert!(total <= 500, "{total}");
    }
}
