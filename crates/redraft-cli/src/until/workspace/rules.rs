//! What the reports leave out: the ignore rules in force when the loop began, read once before the
//! agent's first turn, and never again. An agent cannot hide a change from the reports by writing
//! a `.gitignore`, appending to `.git/info/exclude` or creating a `.git` during the loop.
//!
//! The rules are git's, read as data (nothing runs): in a git repository — the working directory
//! or one of its parents holds a `.git`, or a directory inside it does for what is under it —
//! each directory's `.gitignore`, the parents' up to the repository's top, and the repository's
//! `info/exclude`; a deeper file's rule wins over a shallower one, a `.gitignore` over the
//! exclude file. An ignore file is read only when it is a regular file of at most
//! [`IGNORE_FILE_MAX`] (anything else is named in a warning and left out), opened so that nothing
//! blocks (`reading`). Every `.git` present when the loop began is left out of the snapshots; a
//! `.git` the agent adds is shown like any other directory.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::{GIT_DIR, OWN_DIR};
use crate::until::names::shown;
use crate::until::reading::{Skipped, bytes, read_small};
use crate::until::root::At;

/// Largest ignore file read.
pub(super) const IGNORE_FILE_MAX: u64 = 1024 * 1024;

/// The ignore rules of the snapshots, as they were when the loop began.
#[derive(Debug, Default)]
pub(super) struct Rules {
    /// `.gitignore` matchers with the directory they apply under (absolute), deepest first.
    gitignores: Vec<(PathBuf, Gitignore)>,
    /// Exclude files (`.git/info/exclude`) with the repository top they apply under, deepest
    /// first.
    excludes: Vec<(PathBuf, Gitignore)>,
    /// Every `.git` in the working directory when the loop began, relative to it.
    git: BTreeSet<PathBuf>,
    /// The working directory's canonical path: what matchers and paths are absolute under.
    root: PathBuf,
}

impl Rules {
    /// Read the rules of the working directory `root` (its canonical path), reached `at`.
    pub(super) fn read(at: At<'_>, root: &Path) -> Self {
        let mut rules = Rules { root: root.to_owned(), ..Rules::default() };
        // The parents: up to the top of the repository the working directory is in, if any.
        let mut parents = Vec::new();
        let mut top = None;
        if !has_git(&root.join(GIT_DIR)) {
            for dir in root.ancestors().skip(1) {
                parents.push(dir.to_owned());
                if has_git(&dir.join(GIT_DIR)) {
                    top = Some(dir.to_owned());
                    break;
                }
            }
        }
        if let Some(top) = &top {
            rules.exclude(&top.join(GIT_DIR), top, &top.join(GIT_DIR).display().to_string());
            for dir in parents.iter().rev() {
                rules.gitignore(&dir.join(".gitignore"), dir, &dir.join(".gitignore").display().to_string());
            }
        }
        // Directories still to read, each with whether it is in a repository (a stack, not
        // recursion: a tree of any depth is walked). A directory's rules are read before its
        // subdirectories are looked at, so an ignored one is not walked into, as in git.
        let mut dirs = vec![(PathBuf::new(), top.is_some())];
        while let Some((dir, in_repo)) = dirs.pop() {
            rules.read_dir(at, &dir, in_repo, &mut dirs);
        }
        rules
    }

    /// Read the rules of the directory `rel`, and add its subdirectories that are not ignored to
    /// `dirs`.
    fn read_dir(&mut self, at: At<'_>, rel: &Path, in_repo: bool, dirs: &mut Vec<(PathBuf, bool)>) {
        let dir = self.root.join(rel);
        let git = at.join(&rel.join(GIT_DIR));
        let in_repo = if has_git(&git) {
            self.git.insert(rel.join(GIT_DIR));
            self.exclude(&git, &dir, &shown(&rel.join(GIT_DIR)));
            true
        } else {
            in_repo
        };
        if in_repo {
            self.gitignore(&at.join(&rel.join(".gitignore")), &dir, &shown(&rel.join(".gitignore")));
        }
        let Ok(entries) = fs::read_dir(at.join(rel)) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name == GIT_DIR || (rel.as_os_str().is_empty() && name == OWN_DIR) {
                continue;
            }
            // The entry's own type: a symlink to a directory is not walked into.
            let sub = rel.join(name);
            if entry.file_type().is_ok_and(|t| t.is_dir()) && !self.ignored(&sub, true) {
                // Another file system (a mount point) is not the workspace's: not walked into.
                let path = at.join(&sub);
                if !fs::symlink_metadata(&path).is_ok_and(|meta| at.foreign(&path, &meta)) {
                    dirs.push((sub, in_repo));
                }
            }
        }
    }

    /// Add the `.gitignore` at `path` (shown as `name`), whose rules apply under `dir`.
    fn gitignore(&mut self, path: &Path, dir: &Path, name: &str) {
        if let Some(matcher) = matcher(path, dir, name) {
            insert_deepest_first(&mut self.gitignores, dir, matcher);
        }
    }

    /// Add the exclude file of the git directory (or `.git` file) `git`, whose rules apply under
    /// `top`.
    fn exclude(&mut self, git: &Path, top: &Path, name: &str) {
        let Some(common) = common_dir(git) else { return };
        let exclude = common.join("info").join("exclude");
        if let Some(matcher) = matcher(&exclude, top, &format!("{name}/info/exclude")) {
            insert_deepest_first(&mut self.excludes, top, matcher);
        }
    }

    /// Whether the path `rel` (a directory when `is_dir`) is ignored.
    pub(super) fn ignored(&self, rel: &Path, is_dir: bool) -> bool {
        let path = self.root.join(rel);
        for (dir, matcher) in self.gitignores.iter().chain(&self.excludes) {
            if !path.starts_with(dir) {
                continue;
            }
            match matcher.matched(&path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }

    /// Whether `rel` is a `.git` that was there when the loop began.
    pub(super) fn is_git(&self, rel: &Path) -> bool {
        self.git.contains(rel)
    }
}

/// Add `matcher`, for the paths under `dir`, to `matchers`, kept deepest directory first.
fn insert_deepest_first(matchers: &mut Vec<(PathBuf, Gitignore)>, dir: &Path, matcher: Gitignore) {
    let depth = dir.components().count();
    let at = matchers.partition_point(|(d, _)| d.components().count() >= depth);
    matchers.insert(at, (dir.to_owned(), matcher));
}

/// Whether `path` (a `.git`) is there: a directory, or the file of a worktree or submodule.
fn has_git(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_dir() || m.is_file())
}

/// The directory holding `info/exclude` for the `.git` at `git`: the directory itself, or for a
/// `.git` file (`gitdir: PATH`) the git directory it names — or its `commondir`, for a worktree.
fn common_dir(git: &Path) -> Option<PathBuf> {
    let meta = fs::symlink_metadata(git).ok()?;
    if meta.is_dir() {
        return Some(git.to_owned());
    }
    let text = read_small(git, 4096).ok()?;
    let text = String::from_utf8(text).ok()?;
    let named = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
    let gitdir = git.parent().map(|p| p.join(&named)).unwrap_or(named);
    match read_small(&gitdir.join("commondir"), 4096) {
        Ok(common) => {
            let common = String::from_utf8(common).ok()?;
            Some(gitdir.join(common.trim()))
        }
        Err(_) => Some(gitdir),
    }
}

/// The matcher of the ignore file at `path`, for the paths under `dir`; `None` when there is no
/// file, or one that is not read (said in a warning, naming it `name`).
fn matcher(path: &Path, dir: &Path, name: &str) -> Option<Gitignore> {
    let text = match read_small(path, IGNORE_FILE_MAX) {
        Ok(text) => text,
        Err(Skipped::Absent) => return None,
        Err(Skipped::Unusable(why)) => {
            eprintln!(
                "warning: the ignore file `{name}` is left out of what the reports leave out: {why} (only a regular file of at most {} is read)",
                bytes(IGNORE_FILE_MAX)
            );
            return None;
        }
    };
    let mut builder = GitignoreBuilder::new(dir);
    for line in String::from_utf8_lossy(&text).lines() {
        if let Err(e) = builder.add_line(Some(path.to_owned()), line) {
            tracing::debug!(file = name, "an ignore rule that is not a glob is left out: {e}");
        }
    }
    match builder.build() {
        Ok(matcher) => Some(matcher),
        Err(e) => {
            tracing::warn!(file = name, "the ignore file cannot be used: {e}");
            None
        }
    }
}
