//! `decisions.md`: one dated entry per `redraft until` loop, appended when it ends — what was
//! asked, how it was checked, how it ended and why, so that the project keeps a record of the
//! loops it ran ("converged at iteration 2; the fix was …", "hit the cap at iteration 3;
//! escalated; the pattern is …").

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Result, anyhow};
use redraft::RunResult;
use redraft::core::PersonReply;
use redraft::core::prompt::truncate_chars;
use redraft::core::{HaltReason, RunStatus};

use super::root::Root;

/// Longest part of the task's prompt quoted in an entry, in characters.
const PROMPT_KEEP: usize = 600;
/// Longest list of changes in an entry, in characters.
const CHANGES_KEEP: usize = 4 * 1024;

const HEADER: &str =
    "# Decisions\n\nWhat each `redraft until` loop was asked, how it was checked and how it ended, newest last.\n";

/// What one entry tells.
#[derive(Debug)]
pub struct Entry<'a> {
    pub task: &'a str,
    pub prompt: &'a str,
    pub verify: &'a str,
    pub result: &'a RunResult,
    /// The iteration cap the loop started with.
    pub max_iterations: u32,
    /// Why the cap is above the usual 3, when it is.
    pub reason: Option<&'a str>,
    /// What the loop changed since it began: a diff stat, or the changed files.
    pub changes: &'a str,
    /// The report beside the iterations: `final.md` or `escalation.md`.
    pub report: &'a Path,
    /// Answers a person gave when the loop hit its cap (`--on-cap ask`).
    pub answers: &'a [PersonReply],
    /// When it ended, as RFC 3339 in UTC.
    pub at: &'a str,
}

/// Append `entry` to the file at `path`, creating it (with a title) when it does not exist.
/// Inside the working directory `root` the file is rewritten whole as a new file, so a link the
/// agent put in its place is replaced, never written through (`inside`).
pub fn append(root: &Root, path: &Path, entry: &Entry<'_>) -> Result<()> {
    let cannot = |e: std::io::Error| anyhow!("cannot record the loop's outcome in `{}`: {e}", path.display());
    let mut text = super::inside::read_own(root, path).map_err(cannot)?.unwrap_or_default();
    if text.is_empty() {
        text.extend_from_slice(HEADER.as_bytes());
    }
    text.push(b'\n');
    text.extend_from_slice(render(entry).as_bytes());
    super::inside::write(root, path, &text).map_err(cannot)
}

/// The entry as Markdown: a dated heading with the outcome, then the details.
pub fn render(e: &Entry<'_>) -> String {
    let r = e.result;
    let when = e.at.get(..16).map(|t| t.replace('T', " ")).unwrap_or_else(|| e.at.to_owned());
    let headline = match (r.status, r.halted_because) {
        (RunStatus::Succeeded, _) => format!("converged at iteration {}", r.iterations),
        (_, h) if h.awaits_a_person() => {
            format!("hit the cap at iteration {} ({h}); escalated to a person", r.iterations)
        }
        (_, HaltReason::Cancelled) => format!("stopped by the user at iteration {}", r.iterations),
        (_, h) => format!("stopped at iteration {} ({h}); escalated to a person", r.iterations),
    };
    let mut out = format!("## {when} UTC — `{}`: {headline}\n\n", e.task);
    let (prompt, cut) = truncate_chars(e.prompt.trim(), PROMPT_KEEP);
    let more = if cut { " […]" } else { "" };
    let _ = writeln!(out, "- task: {}{more}", one_line(&prompt));
    let _ = writeln!(out, "- verifier: `{}`", e.verify.replace('`', "'"));
    let _ = writeln!(
        out,
        "- outcome: {} after {} of {} iteration(s), halted because {} (run `{}`, {:.1} s)",
        r.status.as_str(),
        r.iterations,
        e.max_iterations,
        r.halted_because,
        r.run_id,
        r.metrics.wall_ms as f64 / 1000.0
    );
    if let Some(reason) = e.reason {
        let _ = writeln!(out, "- why more than 3 iterations: {}", one_line(reason));
    }
    for a in e.answers {
        let _ = writeln!(
            out,
            "- a person answered after iteration {}: {} (asked: {})",
            a.after_iteration,
            one_line(&a.answer),
            one_line(&a.question)
        );
    }
    if r.succeeded() {
        let (changes, cut) = truncate_chars(e.changes.trim(), CHANGES_KEEP);
        if changes.is_empty() {
            out.push_str("- the fix: no file changed (the verifier passed as the workspace was)\n");
        } else {
            out.push_str("- the fix, all changes since the loop began:\n\n");
            for line in changes.lines() {
                let _ = writeln!(out, "      {line}");
            }
            if cut {
                out.push_str("      […]\n");
            }
            out.push('\n');
        }
    } else if let Some(esc) = &r.escalation {
        if !esc.recurring_issues.is_empty() {
            let issues: Vec<String> = esc
                .recurring_issues
                .iter()
                .map(|i| {
                    let place = if i.path.is_empty() { String::new() } else { format!("`{}` ", i.path) };
                    format!("{place}{} ×{}", i.code, i.count)
                })
                .collect();
            let _ = writeln!(out, "- recurring issues: {}", issues.join(", "));
        }
        if let Some(pattern) = &esc.pattern {
            let _ = writeln!(out, "- root cause (pattern): {}", one_line(pattern));
        }
        let _ = writeln!(out, "- question: {}", one_line(&esc.question));
    }
    let _ = writeln!(out, "- report: `{}`", e.report.display());
    out
}

/// Text on one line: line breaks become spaces.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
