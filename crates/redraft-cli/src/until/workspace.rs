//! Snapshots of the working directory and the differences between them: `git` trees (through a
//! temporary index, so the user's index is never touched) inside a git repository, else a
//! listing of files with their SHA-256 (a symlink by its target, never followed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use redraft::core::canonical::{sha256_hex, sha256_hex_bytes};

/// Files and directories never part of the workspace.
const SKIPPED: [&str; 2] = [".redraft", ".git"];

/// The state of the workspace at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snapshot {
    /// A git tree id.
    Git(String),
    /// Relative path → SHA-256 of the content.
    Files(BTreeMap<String, String>),
}

impl Snapshot {
    /// A short fingerprint of the whole tree.
    pub fn fingerprint(&self) -> String {
        match self {
            Snapshot::Git(tree) => format!("git tree {tree}"),
            Snapshot::Files(files) => {
                let listing: String = files.iter().map(|(p, h)| format!("{h}  {p}\n")).collect();
                format!("files sha256 {}", sha256_hex(&listing))
            }
        }
    }
}

/// The working directory an agent edits.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    git: bool,
    index: tempfile::TempDir,
}

impl Workspace {
    /// Open `root`; git is used when `root` is inside a work tree and `git` runs.
    pub fn open(root: &Path) -> Result<Self> {
        let git = std::process::Command::new("git")
            .args(["rev-parse", "--is-inside-work-tree"])
            .current_dir(root)
            .output()
            .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "true")
            .unwrap_or(false);
        let index = tempfile::Builder::new()
            .prefix("redraft-index-")
            .tempdir()
            .map_err(|e| anyhow!("cannot create a temporary directory: {e}"))?;
        Ok(Self { root: root.to_owned(), git, index })
    }

    /// Take a snapshot now.
    pub fn snapshot(&self) -> Result<Snapshot> {
        if self.git {
            let index = self.index.path().join("index");
            let _ = std::fs::remove_file(&index);
            self.git(&["add", "-A", "--", ".", ":(exclude).redraft"], Some(&index))?;
            let tree = self.git(&["write-tree"], Some(&index))?;
            Ok(Snapshot::Git(tree.trim().to_owned()))
        } else {
            let mut files = BTreeMap::new();
            walk(&self.root, &self.root, &mut files)?;
            Ok(Snapshot::Files(files))
        }
    }

    /// What changed from `before` to `after`: a git diff, or a file list with hashes.
    pub fn diff(&self, before: &Snapshot, after: &Snapshot) -> Result<String> {
        match (before, after) {
            (Snapshot::Git(a), Snapshot::Git(b)) if a == b => Ok(String::new()),
            (Snapshot::Git(a), Snapshot::Git(b)) => self.git(&["diff", "--no-color", "--no-ext-diff", a, b], None),
            (Snapshot::Files(a), Snapshot::Files(b)) => Ok(file_diff(a, b)),
            _ => Err(anyhow!("snapshots of different kinds cannot be compared")),
        }
    }

    /// What changed between two snapshots, for a person: git's diff stat (files with their
    /// added and removed lines), or without git the files added (`A`), modified (`M`) and
    /// deleted (`D`).
    pub fn stat(&self, before: &Snapshot, after: &Snapshot) -> Result<String> {
        match (before, after) {
            (Snapshot::Git(a), Snapshot::Git(b)) if a == b => Ok(String::new()),
            (Snapshot::Git(a), Snapshot::Git(b)) => {
                self.git(&["diff", "--stat=100", "--no-color", "--no-ext-diff", a, b], None)
            }
            (Snapshot::Files(a), Snapshot::Files(b)) => {
                Ok(file_changes(a, b).into_iter().map(|(kind, path, _, _)| format!("{kind} {path}\n")).collect())
            }
            _ => Err(anyhow!("snapshots of different kinds cannot be compared")),
        }
    }

    /// The paths that differ between two snapshots.
    pub fn changed_paths(&self, before: &Snapshot, after: &Snapshot) -> Result<Vec<String>> {
        match (before, after) {
            (Snapshot::Git(a), Snapshot::Git(b)) => {
                // NUL-separated: paths come as they are, not quoted.
                let out = self.git(&["diff", "--name-only", "--no-renames", "-z", a, b], None)?;
                Ok(out.split('\0').filter(|p| !p.is_empty()).map(str::to_owned).collect())
            }
            (Snapshot::Files(a), Snapshot::Files(b)) => {
                let mut paths: Vec<String> =
                    a.keys().chain(b.keys()).filter(|p| a.get(*p) != b.get(*p)).cloned().collect();
                paths.dedup();
                Ok(paths)
            }
            _ => Err(anyhow!("snapshots of different kinds cannot be compared")),
        }
    }

    fn git(&self, args: &[&str], index: Option<&Path>) -> Result<String> {
        let mut cmd = std::process::Command::new("git");
        cmd.args(args).current_dir(&self.root);
        if let Some(index) = index {
            cmd.env("GIT_INDEX_FILE", index);
        }
        let out = cmd.output().map_err(|e| anyhow!("cannot run `git {}`: {e}", args.join(" ")))?;
        if !out.status.success() {
            return Err(anyhow!("`git {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

fn walk(root: &Path, dir: &Path, files: &mut BTreeMap<String, String>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| anyhow!("cannot list `{}`: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| anyhow!("cannot list `{}`: {e}", dir.display()))?;
        let path = entry.path();
        let name = entry.file_name();
        if dir == root && SKIPPED.iter().any(|s| name == *s) {
            continue;
        }
        let kind = entry.file_type().map_err(|e| anyhow!("cannot read `{}`: {e}", path.display()))?;
        if kind.is_dir() {
            walk(root, &path, files)?;
        } else if kind.is_file() {
            let bytes = std::fs::read(&path).map_err(|e| anyhow!("cannot read `{}`: {e}", path.display()))?;
            let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
            files.insert(rel, sha256_hex_bytes(&bytes));
        } else if kind.is_symlink() {
            // A link counts by where it points (as in git), never by what it points to.
            let target = std::fs::read_link(&path).map_err(|e| anyhow!("cannot read `{}`: {e}", path.display()))?;
            let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
            files.insert(rel, sha256_hex(&format!("symlink {}", target.display())));
        }
    }
    Ok(())
}

fn file_diff(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> String {
    let short = |h: &str| h.get(..12).unwrap_or(h).to_owned();
    let mut out = String::new();
    for (kind, path, old, new) in file_changes(a, b) {
        match (old, new) {
            (Some(old), Some(new)) => out.push_str(&format!("{kind} {path} {} -> {}\n", short(old), short(new))),
            (_, Some(hash)) | (Some(hash), _) => out.push_str(&format!("{kind} {path} {}\n", short(hash))),
            (None, None) => {}
        }
    }
    out
}

/// The files added (`A`), modified (`M`) and then deleted (`D`) between two listings, with
/// their hashes before and after.
fn file_changes<'a>(
    a: &'a BTreeMap<String, String>,
    b: &'a BTreeMap<String, String>,
) -> Vec<(char, &'a str, Option<&'a str>, Option<&'a str>)> {
    let mut changes = Vec::new();
    for (path, hash) in b {
        match a.get(path) {
            None => changes.push(('A', path.as_str(), None, Some(hash.as_str()))),
            Some(old) if old != hash => changes.push(('M', path.as_str(), Some(old.as_str()), Some(hash.as_str()))),
            Some(_) => {}
        }
    }
    for (path, hash) in a {
        if !b.contains_key(path) {
            changes.push(('D', path.as_str(), Some(hash.as_str()), None));
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_listing_diffs() {
        let a: BTreeMap<String, String> =
            [("a.txt", "1111111111111111"), ("b.txt", "2222222222222222")].map(|(p, h)| (p.into(), h.into())).into();
        let b: BTreeMap<String, String> =
            [("a.txt", "1111111111111111"), ("b.txt", "3333333333333333"), ("c.txt", "4444444444444444")]
                .map(|(p, h)| (p.into(), h.into()))
                .into();
        assert_eq!(file_diff(&a, &b), "M b.txt 222222222222 -> 333333333333\nA c.txt 444444444444\n");
        assert_eq!(file_diff(&b, &a), "M b.txt 333333333333 -> 222222222222\nD c.txt 444444444444\n");
    }

    #[test]
    fn snapshots_without_git_see_every_change() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one").unwrap();
        std::fs::create_dir_all(dir.path().join(".redraft")).unwrap();
        std::fs::write(dir.path().join(".redraft/x"), "ignored").unwrap();
        let ws = Workspace { root: dir.path().to_owned(), git: false, index: tempfile::tempdir().unwrap() };
        let s1 = ws.snapshot().unwrap();
        std::fs::write(dir.path().join("a.txt"), "two").unwrap();
        let s2 = ws.snapshot().unwrap();
        assert_ne!(s1.fingerprint(), s2.fingerprint());
        assert_eq!(ws.changed_paths(&s1, &s2).unwrap(), ["a.txt"]);
        std::fs::write(dir.path().join(".redraft/x"), "still ignored").unwrap();
        assert_eq!(ws.snapshot().unwrap(), s2);
    }

    #[test]
    fn snapshots_without_git_see_symlinks_by_their_target() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("a"), "one").unwrap();
        std::fs::write(outside.path().join("b"), "one").unwrap();
        let ws = Workspace { root: dir.path().to_owned(), git: false, index: tempfile::tempdir().unwrap() };
        let s1 = ws.snapshot().unwrap();
        std::os::unix::fs::symlink(outside.path().join("a"), dir.path().join("link")).unwrap();
        let s2 = ws.snapshot().unwrap();
        assert_eq!(ws.changed_paths(&s1, &s2).unwrap(), ["link"]);
        std::fs::remove_file(dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("b"), dir.path().join("link")).unwrap();
        let s3 = ws.snapshot().unwrap();
        assert_eq!(ws.changed_paths(&s2, &s3).unwrap(), ["link"], "same content, another target");
    }
}
