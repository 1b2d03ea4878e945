//! The bound on what an attempt keeps of its issues: the first [`MAX_ISSUES_PER_ATTEMPT`], in
//! order, each with its text bounded; the rest are counted in one final `too_many_issues`
//! issue. Evaluators that may find many issues gather them in a [`BoundedIssues`] and stop
//! producing them once it is full; the verdict of every attempt is bounded again where it is
//! assembled, so no evaluator (a user's own check included) can exceed it.

use serde_json::Value;

use super::{Issue, Severity, codes};
use crate::diagnostics::cut_middle;

/// At most this many issues are kept per attempt: the first ones, in order.
pub const MAX_ISSUES_PER_ATTEMPT: usize = 1_000;

/// At most this many characters of an issue's message, and of its hint's words, are kept (cut
/// in the middle with a marker saying how many were cut).
pub const MAX_MESSAGE_CHARS: usize = 16_000;

/// At most this many characters of an issue's path and of its code are kept.
pub const MAX_PATH_CHARS: usize = 1_000;

/// An issue's `expected` or `found` value longer than this, written as JSON, is left out.
pub const MAX_VALUE_CHARS: usize = 16_000;

/// Issues gathered with their number bounded: the first [`MAX_ISSUES_PER_ATTEMPT`] are kept,
/// the rest only counted, with the most serious severity among them. [`BoundedIssues::finish`]
/// ends the list with one `too_many_issues` issue saying how many more there were. A
/// `too_many_issues` issue pushed here (from a list bounded before) adds its count.
#[derive(Debug, Default)]
pub struct BoundedIssues {
    kept: Vec<Issue>,
    more: u64,
    /// The most serious severity among the issues not kept, which the `too_many_issues` issue
    /// takes: an attempt that left out an error still fails.
    worst: Rank,
}

/// Severities in order of seriousness.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    #[default]
    Info,
    Warning,
    Error,
}

impl Rank {
    fn of(severity: Option<Severity>) -> Self {
        match severity {
            None | Some(Severity::Error) => Rank::Error,
            Some(Severity::Warning) => Rank::Warning,
            Some(Severity::Info) => Rank::Info,
        }
    }

    fn severity(self) -> Option<Severity> {
        match self {
            Rank::Error => None,
            Rank::Warning => Some(Severity::Warning),
            Rank::Info => Some(Severity::Info),
        }
    }
}

impl BoundedIssues {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the list keeps no more issues: a producer may stop making them and
    /// [`BoundedIssues::count`] the rest.
    pub fn is_full(&self) -> bool {
        self.kept.len() >= MAX_ISSUES_PER_ATTEMPT
    }

    /// Add an issue: kept, with its text bounded, while there is room, else counted.
    pub fn push(&mut self, mut issue: Issue) {
        if let Some(more) = not_kept(&issue) {
            self.count(more, issue.severity);
        } else if self.is_full() {
            self.count(1, issue.severity);
        } else {
            bound_text(&mut issue);
            self.kept.push(issue);
        }
    }

    /// Count `n` issues of `severity` (`None`: errors) that are not kept.
    pub fn count(&mut self, n: u64, severity: Option<Severity>) {
        if n == 0 {
            return;
        }
        self.more = self.more.saturating_add(n);
        self.worst = self.worst.max(Rank::of(severity));
    }

    /// How many issues were counted and not kept.
    pub fn more(&self) -> u64 {
        self.more
    }

    /// The issues kept, then, when some were not, the `too_many_issues` issue counting them.
    pub fn finish(self) -> Vec<Issue> {
        let mut issues = self.kept;
        if self.more > 0 {
            let mut issue = too_many_issues(self.more);
            issue.severity = self.worst.severity();
            issues.push(issue);
        }
        issues
    }
}

impl Extend<Issue> for BoundedIssues {
    fn extend<I: IntoIterator<Item = Issue>>(&mut self, issues: I) {
        for issue in issues {
            self.push(issue);
        }
    }
}

impl FromIterator<Issue> for BoundedIssues {
    fn from_iter<I: IntoIterator<Item = Issue>>(issues: I) -> Self {
        let mut bounded = Self::new();
        bounded.extend(issues);
        bounded
    }
}

/// `issues` bounded: at most [`MAX_ISSUES_PER_ATTEMPT`] of them, each with its text bounded,
/// then the `too_many_issues` issue counting the others.
pub fn bounded(issues: Vec<Issue>) -> Vec<Issue> {
    if issues.len() <= MAX_ISSUES_PER_ATTEMPT && issues.iter().all(within_bounds) {
        return issues;
    }
    BoundedIssues::from_iter(issues).finish()
}

/// The `too_many_issues` issue standing for `more` issues that were not kept; the number is
/// also its `found` value.
pub fn too_many_issues(more: u64) -> Issue {
    Issue::new(
        "",
        codes::TOO_MANY_ISSUES,
        format!(
            "{more} more issues were found and not kept (an attempt keeps its first {MAX_ISSUES_PER_ATTEMPT}): fix the ones above first"
        ),
    )
    .with_values(None, Some(Value::from(more)))
}

/// The number of issues a `too_many_issues` issue stands for (`None` for any other issue).
fn not_kept(issue: &Issue) -> Option<u64> {
    (issue.code == codes::TOO_MANY_ISSUES).then(|| issue.found.as_deref().and_then(Value::as_u64)).flatten()
}

/// Whether `issue` is within the bounds of its text (a quick look, to keep a bounded list as it
/// is).
fn within_bounds(issue: &Issue) -> bool {
    not_kept(issue).is_none()
        && issue.path.len() <= MAX_PATH_CHARS
        && issue.code.len() <= MAX_PATH_CHARS
        && issue.message.len() <= MAX_MESSAGE_CHARS
        && issue.hint.as_ref().is_none_or(|h| h.text.len() <= MAX_MESSAGE_CHARS)
        && [&issue.expected, &issue.found].into_iter().all(|v| v.as_deref().is_none_or(small))
}

/// Bound an issue's text: its path, code, message and hint cut in the middle, an `expected` or
/// `found` value too long to show left out.
fn bound_text(issue: &mut Issue) {
    let cut = |text: &mut String, max: usize| {
        // Bytes first: a text of fewer bytes than `max` has fewer characters too.
        if text.len() > max && text.chars().count() > max {
            *text = cut_middle(text, max);
        }
    };
    cut(&mut issue.path, MAX_PATH_CHARS);
    cut(&mut issue.code, MAX_PATH_CHARS);
    cut(&mut issue.message, MAX_MESSAGE_CHARS);
    if let Some(hint) = issue.hint.as_deref_mut() {
        cut(&mut hint.text, MAX_MESSAGE_CHARS);
    }
    for value in [&mut issue.expected, &mut issue.found] {
        if value.as_deref().is_some_and(|v| !small(v)) {
            *value = None;
        }
    }
}

/// Whether `value` written as JSON has at most [`MAX_VALUE_CHARS`] bytes.
fn small(value: &Value) -> bool {
    json_within(value, MAX_VALUE_CHARS)
}

/// Whether `value` written as JSON has at most `bytes` bytes, found without writing more than
/// that: a value that large may be shown, a larger one is better described.
pub fn json_within(value: &Value, bytes: usize) -> bool {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => true,
        Value::String(s) => s.len() < bytes,
        _ => serde_json::to_writer(Counter { left: bytes }, value).is_ok(),
    }
}

/// A writer that fails once more than its bytes are written.
struct Counter {
    left: usize,
}

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.left = self.left.checked_sub(buf.len()).ok_or(std::io::ErrorKind::FileTooLarge)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn many(n: usize) -> Vec<Issue> {
        (0..n).map(|i| Issue::new(format!("/{i}"), "type", format!("item {i} is wrong"))).collect()
    }

    #[test]
    fn the_first_thousand_are_kept_and_the_rest_counted() {
        let issues = bounded(many(200_000));
        assert_eq!(issues.len(), MAX_ISSUES_PER_ATTEMPT + 1);
        assert_eq!(issues[999].path, "/999", "the first ones, in order");
        let last = &issues[MAX_ISSUES_PER_ATTEMPT];
        assert_eq!(last.code, codes::TOO_MANY_ISSUES);
        assert_eq!(
            last.message,
            "199000 more issues were found and not kept (an attempt keeps its first 1000): fix the ones above first"
        );
        assert_eq!(last.found.as_deref(), Some(&Value::from(199_000)));
        assert!(last.is_error());
    }

    #[test]
    fn a_bounded_list_bounded_again_adds_up_its_counts() {
        let mut twice = bounded(many(1_500));
        twice.extend(bounded(many(1_200)));
        let issues = bounded(twice);
        assert_eq!(issues.len(), MAX_ISSUES_PER_ATTEMPT + 1);
        // 500 of the first list, then 1,000 + 200 of the second.
        assert_eq!(issues[MAX_ISSUES_PER_ATTEMPT].found.as_deref(), Some(&Value::from(1_700)));
        assert_eq!(bounded(issues.clone()), issues, "bounding is idempotent");
        let short = many(3);
        assert_eq!(bounded(short.clone()), short, "a short list is left as it is");
    }

    #[test]
    fn issues_left_out_that_were_only_warnings_are_counted_as_a_warning() {
        let warn = |n| (0..n).map(|_| Issue::new("", "style", "meh").with_severity(Severity::Warning));
        let issues = bounded(warn(1_001).collect());
        assert_eq!(issues.last().and_then(|i| i.severity), Some(Severity::Warning));
        let mut mixed: Vec<Issue> = warn(1_001).collect();
        mixed.push(Issue::new("", "type", "wrong"));
        mixed.extend(warn(3));
        let issues = bounded(mixed);
        assert!(issues.last().is_some_and(Issue::is_error), "an error left out keeps the attempt failing");
    }

    #[test]
    fn each_issue_has_its_text_bounded() {
        let huge = "x".repeat(1_000_000);
        let issue = Issue::new(huge.clone(), "type", huge.clone())
            .with_values(Some(Value::String(huge.clone())), Some(serde_json::json!([huge.clone()])))
            .with_hint(huge, Vec::new());
        let issues = bounded(vec![issue, Issue::new("/a", "type", "small").with_values(Some(Value::from(1)), None)]);
        let first = &issues[0];
        assert!(first.path.chars().count() < MAX_PATH_CHARS + 50, "{}", first.path.len());
        assert!(first.message.chars().count() < MAX_MESSAGE_CHARS + 50);
        assert!(first.message.contains("characters cut"), "the cut is marked");
        assert!(first.hint_text().is_some_and(|h| h.chars().count() < MAX_MESSAGE_CHARS + 50));
        assert_eq!((first.expected.as_ref(), first.found.as_ref()), (None, None));
        assert_eq!(issues[1].expected.as_deref(), Some(&Value::from(1)), "small values stay");
    }
}
