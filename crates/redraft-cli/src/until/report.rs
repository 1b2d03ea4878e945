//! The files an agent loop leaves in `.redraft/iterations/<task>/`: one `<i>.md` per
//! iteration, then `final.md` on success or `escalation.md` on failure.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use redraft::core::prompt::{fence_for, truncate_chars};
use redraft::{AttemptRecord, RunResult};
use redraft_sandbox::Output;

use super::root::Root;

/// Longest verifier or agent output kept in an iteration file, in characters.
pub const OUTPUT_KEEP: usize = 64 * 1024;
/// Longest diff kept in a report, in characters.
pub const DIFF_KEEP: usize = 256 * 1024;

/// Everything known about one iteration.
#[derive(Debug, Default, Clone)]
pub struct IterationReport {
    pub diff: String,
    pub agent_command: String,
    pub agent: Option<Output>,
    pub verifier_command: String,
    pub verifier: Option<Output>,
}

/// The directory of a task's reports.
pub fn task_dir(root: &Path, task: &str) -> PathBuf {
    root.join(".redraft").join("iterations").join(task)
}

/// Write a report in the working directory, never through a link the agent put in its way.
fn write(root: &Root, path: &Path, text: &str) -> Result<()> {
    super::inside::write(root, path, text.as_bytes()).map_err(|e| anyhow!("cannot write `{}`: {e}", path.display()))
}

fn block(out: &mut String, lang: &str, text: &str, keep: usize) {
    let (shown, cut) = truncate_chars(text, keep);
    let fence = fence_for(&shown);
    let _ = writeln!(out, "{fence}{lang}\n{}\n{fence}", shown.trim_end());
    if cut {
        let _ = writeln!(out, "\n[truncated: showing the first {keep} of {} characters]", text.chars().count());
    }
}

fn run_line(out: &mut String, what: &str, command: &str, o: Option<&Output>) {
    let _ = match o {
        Some(o) => {
            let status = match (o.timed_out, o.status, o.signal) {
                (true, _, _) => "timed out (killed)".to_owned(),
                (_, Some(c), _) => format!("exit {c}"),
                (_, None, Some(s)) => format!("killed by signal {s}"),
                _ => "unknown status".to_owned(),
            };
            writeln!(out, "- {what}: `{command}` — {status} in {:.1} s", o.duration.as_secs_f64())
        }
        None => writeln!(out, "- {what}: `{command}` — did not run"),
    };
}

/// `.redraft/iterations/<task>/<i>.md`.
pub fn write_iteration(
    root: &Root,
    dir: &Path,
    task: &str,
    max: u32,
    a: &AttemptRecord,
    r: &IterationReport,
) -> Result<PathBuf> {
    let mut out = format!("# Iteration {} of {max} — {}\n\n", a.iteration, a.status.as_str());
    let _ = writeln!(out, "- task: `{task}`");
    run_line(&mut out, "agent", &r.agent_command, r.agent.as_ref());
    run_line(&mut out, "verifier", &r.verifier_command, r.verifier.as_ref());
    let _ = writeln!(out, "- iteration time: {:.1} s", a.wall_ms as f64 / 1000.0);
    if let Some(k) = a.repeat_of {
        let _ = writeln!(out, "- the workspace is identical to iteration {k}");
    }
    if !a.issues.is_empty() {
        out.push_str("\n## Issues\n\n");
        for (n, i) in a.issues.iter().enumerate() {
            let place = if i.path.is_empty() { String::new() } else { format!("`{}`: ", i.path) };
            let _ = writeln!(out, "{}. {place}{} [{}]", n + 1, i.message.replace('\n', "\n   "), i.code);
        }
    }
    out.push_str("\n## Changes in this iteration\n\n");
    if r.diff.trim().is_empty() {
        out.push_str("(none)\n");
    } else {
        block(&mut out, "diff", &r.diff, DIFF_KEEP);
    }
    if let Some(v) = &r.verifier {
        out.push_str("\n## Verifier output\n\n");
        block(&mut out, "text", &v.combined(), OUTPUT_KEEP);
    }
    if let Some(agent) = &r.agent {
        out.push_str("\n## Agent output\n\n");
        block(&mut out, "text", &agent.combined(), OUTPUT_KEEP);
    }
    let path = dir.join(format!("{}.md", a.iteration));
    write(root, &path, &out)?;
    Ok(path)
}

/// `final.md`: the task passed.
pub fn write_final(
    root: &Root,
    dir: &Path,
    task: &str,
    verify: &str,
    result: &RunResult,
    cumulative: &str,
) -> Result<PathBuf> {
    let n = result.iterations;
    let mut out = format!("# Task `{task}`: passed at iteration {n}\n\n");
    let _ = writeln!(out, "- verifier: `{verify}` passes (exit 0)");
    let _ = writeln!(out, "- run: `{}`; {:.1} s in all", result.run_id, result.metrics.wall_ms as f64 / 1000.0);
    out.push_str("\n## Iterations\n\n");
    for a in &result.history {
        let first =
            a.issues.first().map(|i| format!(" — {}", i.message.lines().next().unwrap_or(""))).unwrap_or_default();
        let _ = writeln!(out, "- [{0}]({0}.md): {1}{first}", a.iteration, a.status.as_str());
    }
    out.push_str("\n## All changes since the start\n\n");
    if cumulative.trim().is_empty() {
        out.push_str("(none)\n");
    } else {
        block(&mut out, "diff", cumulative, DIFF_KEEP);
    }
    let path = dir.join("final.md");
    write(root, &path, &out)?;
    Ok(path)
}

/// `escalation.md`: the loop stopped without a pass; what a person needs to take over.
pub fn write_escalation(
    root: &Root,
    dir: &Path,
    task: &str,
    verify: &str,
    result: &RunResult,
    diffs: Option<&[(u32, String)]>,
) -> Result<PathBuf> {
    let mut out = format!(
        "# Task `{task}`: escalated after {} iteration(s) (halted because {})\n\n",
        result.iterations, result.halted_because
    );
    let _ = writeln!(out, "- verifier: `{verify}`");
    let _ = writeln!(out, "- run: `{}`", result.run_id);
    if let Some(e) = &result.error {
        let _ = writeln!(out, "- error: {}", e.message);
    }
    if let Some(esc) = &result.escalation {
        let _ = writeln!(out, "\n## Summary\n\n{}", esc.summary);
        out.push_str("\n## Attempts\n\n");
        for line in &esc.attempts {
            let _ = writeln!(out, "- {line}");
        }
        if !esc.recurring_issues.is_empty() {
            out.push_str("\n## Recurring issues\n\n");
            for r in &esc.recurring_issues {
                let place = if r.path.is_empty() { "(whole)".to_owned() } else { format!("`{}`", r.path) };
                let _ = writeln!(out, "- {place} {} ×{}", r.code, r.count);
            }
        }
        if let Some(p) = &esc.pattern {
            let _ = writeln!(out, "\n## Pattern\n\n{p}");
        }
        let _ = writeln!(out, "\n## Question\n\n{}", esc.question);
    }
    if let Some(last) = result.history.last()
        && !last.issues.is_empty()
    {
        out.push_str("\n## Last issues\n\n");
        for (n, i) in last.issues.iter().enumerate() {
            let place = if i.path.is_empty() { String::new() } else { format!("`{}`: ", i.path) };
            let _ = writeln!(out, "{}. {place}{} [{}]", n + 1, i.message.replace('\n', "\n   "), i.code);
        }
    }
    if let Some(diffs) = diffs {
        out.push_str("\n## Changes per iteration\n");
        for (i, diff) in diffs {
            let _ = writeln!(out, "\n### Iteration {i}\n");
            if diff.trim().is_empty() {
                out.push_str("(none)\n");
            } else {
                block(&mut out, "diff", diff, DIFF_KEEP);
            }
        }
    }
    let _ = writeln!(out, "\nEach iteration's details are in `<i>.md` beside this file.");
    let path = dir.join("escalation.md");
    write(root, &path, &out)?;
    Ok(path)
}
