//! Two snapshots' differences for people: a stat (one line a file: `A`, `M`, `D` or `T`, its
//! name, and its lines added and removed, its size when binary or not kept, a new mode) with a
//! total, then unified diffs in git's layout (`diff --git a/… b/…`, modes, `---`/`+++`, hunks
//! with three lines of context). A symlink shows as its target, in mode 120000, as git shows it.
//!
//! Everything is bounded: each file's diff gets [`DIFF_TIMEOUT`] (then a coarser diff), and once
//! the patches reach [`PATCHES_KEEP`] the rest of the files are only in the stat.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use similar::{Algorithm, ChangeTag, TextDiff};

use super::{Content, Entry, HASH_MAX, KEEP_PER_FILE, KEEP_TOTAL, Workspace, hex};
use crate::until::names::{prefixed, shown};

/// Longest time spent diffing one file.
const DIFF_TIMEOUT: Duration = Duration::from_millis(500);
/// Most patch text rendered; reports and the agent's feedback keep less.
const PATCHES_KEEP: usize = 512 * 1024;
/// Widest `+-` graph in the stat.
const GRAPH_WIDTH: usize = 40;

/// What [`render`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum With {
    StatOnly,
    Patches,
}

/// One changed path: its entry before (`None`: added) and after (`None`: deleted).
struct Change<'a> {
    path: &'a Path,
    old: Option<&'a Entry>,
    new: Option<&'a Entry>,
}

/// What one change adds to the stat.
#[derive(Default)]
struct Counted {
    lines: Option<(usize, usize)>,
    /// A content that is not shown line by line: binary, or not kept.
    sizes: Option<String>,
    mode: Option<(u32, u32)>,
}

pub(super) fn render(ws: &Workspace, a: &BTreeMap<PathBuf, Entry>, b: &BTreeMap<PathBuf, Entry>, with: With) -> String {
    let paths: BTreeSet<&Path> = a.keys().chain(b.keys()).map(PathBuf::as_path).collect();
    let changes: Vec<Change<'_>> = paths
        .into_iter()
        .filter_map(|path| {
            let (old, new) = (a.get(path), b.get(path));
            (old != new).then_some(Change { path, old, new })
        })
        .collect();
    if changes.is_empty() {
        return String::new();
    }
    let mut stat = Vec::with_capacity(changes.len());
    let mut patches = String::new();
    let mut left_out = 0usize;
    for change in &changes {
        let with_patch = with == With::Patches && patches.len() < PATCHES_KEEP;
        if with == With::Patches && !with_patch {
            left_out += 1;
        }
        let mut patch = String::new();
        let counted = one(ws, change, with_patch.then_some(&mut patch));
        patches.push_str(&patch);
        stat.push((letter(change), shown(change.path), counted));
    }
    let mut out = stat_text(&stat);
    if with == With::Patches {
        out.push('\n');
        out.push_str(&patches);
        if left_out > 0 {
            let _ = writeln!(out, "[the diffs of {left_out} more file(s) are not shown]");
        }
    }
    out
}

fn letter(change: &Change<'_>) -> char {
    match (change.old, change.new) {
        (None, _) => 'A',
        (_, None) => 'D',
        (Some(old), Some(new)) if matches!(old, Entry::Link { .. }) != matches!(new, Entry::Link { .. }) => 'T',
        _ => 'M',
    }
}

fn mode(entry: &Entry) -> u32 {
    match entry {
        Entry::File { executable: true, .. } | Entry::Large { executable: true, .. } => 0o100755,
        Entry::File { .. } | Entry::Large { .. } => 0o100644,
        Entry::Link { .. } => 0o120000,
    }
}

/// Count one change and, given a buffer, write its patch. A change between file and symlink is
/// a deletion and an addition, as in git.
fn one(ws: &Workspace, change: &Change<'_>, patch: Option<&mut String>) -> Counted {
    if letter(change) == 'T' {
        let mut patch = patch;
        let gone = Change { path: change.path, old: change.old, new: None };
        let came = Change { path: change.path, old: None, new: change.new };
        let first = one(ws, &gone, patch.as_deref_mut());
        let second = one(ws, &came, patch);
        return Counted {
            lines: match (first.lines, second.lines) {
                (Some((a1, r1)), Some((a2, r2))) => Some((a1 + a2, r1 + r2)),
                _ => None,
            },
            sizes: first.sizes.or(second.sizes),
            mode: None,
        };
    }
    let path = change.path;
    let old = change.old.map(|e| (e, ws.content(path, e)));
    let new = change.new.map(|e| (e, ws.content(path, e)));
    let mut counted = Counted::default();
    let mut head = format!("diff --git {} {}\n", prefixed("a/", path), prefixed("b/", path));
    match (change.old, change.new) {
        (None, Some(e)) => {
            let _ = writeln!(head, "new file mode {:o}", mode(e));
        }
        (Some(e), None) => {
            let _ = writeln!(head, "deleted file mode {:o}", mode(e));
        }
        (Some(o), Some(n)) if mode(o) != mode(n) => {
            let _ = write!(head, "old mode {:o}\nnew mode {:o}\n", mode(o), mode(n));
            counted.mode = Some((mode(o), mode(n)));
        }
        _ => {}
    }
    let size = |e: Option<&(&Entry, Content)>| match e.map(|(e, _)| *e) {
        Some(Entry::File { size, .. } | Entry::Large { size, .. }) => Some(*size),
        Some(Entry::Link { target }) => Some(target.as_os_str().len() as u64),
        None => None,
    };
    let sizes = match (size(old.as_ref()), size(new.as_ref())) {
        (Some(a), Some(b)) => format!("{a} -> {b} bytes"),
        (Some(a), None) => format!("{a} bytes"),
        (None, Some(b)) => format!("{b} bytes"),
        (None, None) => String::new(),
    };
    let text = |e: &Option<(&Entry, Content)>| match e {
        None => Some(None),
        Some((_, Content::Text(bytes))) => Some(Some(bytes.clone())),
        Some(_) => None,
    };
    let binary = |e: &Option<(&Entry, Content)>| matches!(e, Some((_, Content::Binary)));
    let not_read = |e: &Option<(&Entry, Content)>| matches!(e, Some((_, Content::NotRead)));
    let body = match (text(&old), text(&new)) {
        (Some(a), Some(b)) if a.as_deref() == b.as_deref() => String::new(),
        (Some(a), Some(b)) => {
            let (a, b) = (
                String::from_utf8_lossy(a.as_deref().unwrap_or_default()),
                String::from_utf8_lossy(b.as_deref().unwrap_or_default()),
            );
            let diff = TextDiff::configure().algorithm(Algorithm::Myers).timeout(DIFF_TIMEOUT).diff_lines(&*a, &*b);
            let (mut added, mut removed) = (0, 0);
            for c in diff.iter_all_changes() {
                match c.tag() {
                    ChangeTag::Insert => added += 1,
                    ChangeTag::Delete => removed += 1,
                    ChangeTag::Equal => {}
                }
            }
            counted.lines = Some((added, removed));
            let from = if change.old.is_some() { prefixed("a/", path) } else { "/dev/null".to_owned() };
            let to = if change.new.is_some() { prefixed("b/", path) } else { "/dev/null".to_owned() };
            let hunks = diff.unified_diff().context_radius(3).missing_newline_hint(true).to_string();
            format!("--- {from}\n+++ {to}\n{hunks}")
        }
        _ if binary(&old) || binary(&new) => {
            counted.sizes = Some(format!("binary, {sizes}"));
            let what = match (change.old, change.new) {
                (None, _) => "added",
                (_, None) => "deleted",
                _ => "changed",
            };
            let sha = |e: Option<&Entry>| match e {
                Some(Entry::File { sha, .. }) => hex(sha).get(..12).unwrap_or_default().to_owned(),
                _ => "-".to_owned(),
            };
            let hashes = match (change.old, change.new) {
                (Some(_), Some(_)) => format!("{} -> {}", sha(change.old), sha(change.new)),
                (Some(_), None) => sha(change.old),
                _ => sha(change.new),
            };
            format!("Binary file {what}: {sizes} (sha256 {hashes})\n")
        }
        _ if not_read(&old) || not_read(&new) => {
            counted.sizes = Some(format!("{sizes}, content not read"));
            format!(
                "Content not read: larger than {} MiB, compared by size, times and inode ({sizes})\n",
                HASH_MAX / (1024 * 1024)
            )
        }
        _ => {
            counted.sizes = Some(format!("{sizes}, content not kept"));
            let larger = size(old.as_ref()).max(size(new.as_ref())).unwrap_or(0) > KEEP_PER_FILE;
            let why = if larger {
                format!("larger than {} MiB", KEEP_PER_FILE / (1024 * 1024))
            } else {
                format!("the loop keeps at most {} MiB of file contents", KEEP_TOTAL / (1024 * 1024))
            };
            format!("Content not shown: {why} ({sizes})\n")
        }
    };
    if let Some(patch) = patch {
        patch.push_str(&head);
        patch.push_str(&body);
        if !patch.ends_with('\n') {
            patch.push('\n');
        }
    }
    counted
}

/// The stat lines, names aligned, then the total.
fn stat_text(stat: &[(char, String, Counted)]) -> String {
    let width = stat.iter().map(|(_, name, _)| name.chars().count()).max().unwrap_or(0);
    let most = stat.iter().filter_map(|(_, _, c)| c.lines.map(|(a, r)| a + r)).max().unwrap_or(0);
    let (mut added, mut removed) = (0, 0);
    let mut out = String::new();
    for (letter, name, counted) in stat {
        let mut parts = Vec::new();
        if let Some((a, r)) = counted.lines {
            added += a;
            removed += r;
            if a + r > 0 {
                let (pa, pr) = if most > GRAPH_WIDTH { (scaled(a, most), scaled(r, most)) } else { (a, r) };
                parts.push(format!("{} {}{}", a + r, "+".repeat(pa), "-".repeat(pr)));
            }
        }
        if let Some(sizes) = &counted.sizes {
            parts.push(sizes.clone());
        }
        if let Some((from, to)) = counted.mode {
            parts.push(format!("mode {from:o} -> {to:o}"));
        }
        if parts.is_empty() {
            parts.push("0".to_owned());
        }
        let pad = width - name.chars().count();
        let _ = writeln!(out, "{letter} {name}{} | {}", " ".repeat(pad), parts.join(", "));
    }
    let files = if stat.len() == 1 { "1 file changed".to_owned() } else { format!("{} files changed", stat.len()) };
    let plural = |n: usize, one: &str, many: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {many}") };
    let mut total = vec![files];
    if added > 0 {
        total.push(plural(added, "insertion(+)", "insertions(+)"));
    }
    if removed > 0 {
        total.push(plural(removed, "deletion(-)", "deletions(-)"));
    }
    let _ = writeln!(out, "{}", total.join(", "));
    out
}

/// `n` of `most` on a graph [`GRAPH_WIDTH`] wide; at least one mark when `n` is not zero.
fn scaled(n: usize, most: usize) -> usize {
    if n == 0 { 0 } else { (n * GRAPH_WIDTH / most).max(1) }
}
