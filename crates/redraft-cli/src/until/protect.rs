//! `--protect GLOB`: files the agent must not change (typically the tests).
//!
//! Every file a glob matches — or that lies under a directory it matches — is read before the
//! first agent run: its bytes and mode, or a symlink's target. After each agent run, before
//! any evaluator sees the workspace, a protected file that was changed, deleted, replaced or
//! given another mode is put back, and a file the agent added where a glob matches is removed
//! (in a git repository, files git ignores — caches, build output — are not counted as
//! added); the iteration is then rejected as verifier-gaming (`protected_file_modified`)
//! whatever the verifier says.
//!
//! Nothing here follows a symlink: the tree is walked through real directories only, and a
//! restore replaces whatever stands in the way (a symlink, a directory, a file where a directory
//! was) instead of writing through it, so nothing outside the working directory is written or
//! deleted. Change detection compares bytes and modes, never times or sizes alone.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use redraft::core::{EvalInput, Evaluator, EvaluatorError, Issue, Verdict};

use self::globs::Rule;

mod globs;

/// The issue code of an iteration that changed a protected file.
pub const PROTECTED_FILE_MODIFIED: &str = "protected_file_modified";

/// A protected file as it was before the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    File { bytes: Vec<u8>, mode: u32 },
    Link(PathBuf),
}

/// The protected files, as they were before the loop.
#[derive(Debug)]
pub struct Protected {
    root: PathBuf,
    rules: Vec<Rule>,
    files: BTreeMap<PathBuf, Entry>,
    unmatched: Vec<String>,
}

impl Protected {
    /// Expand `patterns` (relative to `root`, or absolute inside it) and remember every
    /// protected file: its bytes and mode, or a symlink's target.
    pub fn capture(root: &Path, patterns: &[String]) -> Result<Self> {
        let rules = patterns.iter().map(|p| Rule::parse(root, p)).collect::<Result<Vec<_>>>()?;
        let mut files = BTreeMap::new();
        let mut unmatched = Vec::new();
        for rule in &rules {
            let mut found = BTreeSet::new();
            rule.walk(root, &mut found)?;
            let mut any = false;
            for rel in found {
                let path = root.join(&rel);
                let meta = fs::symlink_metadata(&path)
                    .map_err(|e| anyhow!("cannot read protected `{}`: {e}", rel.display()))?;
                let entry = if meta.file_type().is_symlink() {
                    let target =
                        fs::read_link(&path).map_err(|e| anyhow!("cannot read protected `{}`: {e}", rel.display()))?;
                    Entry::Link(target)
                } else if meta.is_file() {
                    let bytes =
                        fs::read(&path).map_err(|e| anyhow!("cannot read protected `{}`: {e}", rel.display()))?;
                    Entry::File { bytes, mode: mode_of(&meta) }
                } else {
                    continue; // sockets, pipes, devices: nothing to put back
                };
                any = true;
                files.entry(rel).or_insert(entry);
            }
            if !any {
                unmatched.push(rule.text.clone());
            }
        }
        Ok(Self { root: root.to_owned(), rules, files, unmatched })
    }

    /// Whether any glob was given.
    pub fn has_rules(&self) -> bool {
        !self.rules.is_empty()
    }

    /// The protected paths, relative to the root.
    #[cfg(test)]
    fn paths(&self) -> Vec<String> {
        self.files.keys().map(|p| p.display().to_string()).collect()
    }

    /// The globs that matched no file when the loop started.
    pub fn unmatched(&self) -> &[String] {
        &self.unmatched
    }

    /// Find changes to protected files and undo them: every protected file is compared with
    /// what it was, and each of `changed` (the paths the agent's turn changed, relative) that
    /// a glob matches and that is not a protected file was added, and is removed.
    pub fn check_and_restore(&self, changed: &[String]) -> Vec<Finding> {
        let mut found = Vec::new();
        for (rel, entry) in &self.files {
            let Some(what) = self.change(rel, entry) else { continue };
            let done = match self.put_back(rel, entry) {
                Ok(()) => "it has been put back".to_owned(),
                Err(e) => format!("it could not be put back ({e})"),
            };
            found.push(Finding::new(rel, format!("`{}` is protected and was {what}; {done}.", rel.display())));
        }
        for rel in changed.iter().map(PathBuf::from) {
            if self.files.contains_key(&rel) || !self.rules.iter().any(|r| r.matches(&rel)) {
                continue;
            }
            let Some(path) = self.reachable(&rel) else { continue };
            // A symlink is removed itself, never what it points to; a directory is left alone.
            match fs::symlink_metadata(&path) {
                Ok(meta) if !meta.is_dir() => {}
                _ => continue,
            }
            let done = match fs::remove_file(&path) {
                Ok(()) => "it has been removed".to_owned(),
                Err(e) => format!("it could not be removed ({e})"),
            };
            found.push(Finding::new(
                &rel,
                format!("`{}` matches a protected pattern and was added; {done}.", rel.display()),
            ));
        }
        found
    }

    /// The full path of `rel` when every directory on the way to it is a real directory, not
    /// a symlink.
    fn reachable(&self, rel: &Path) -> Option<PathBuf> {
        let mut path = self.root.clone();
        for part in rel.parent().into_iter().flat_map(Path::iter) {
            path.push(part);
            if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                return None;
            }
        }
        Some(path.join(rel.file_name()?))
    }

    /// How `rel` differs from `entry` now, if it does.
    fn change(&self, rel: &Path, entry: &Entry) -> Option<String> {
        let mut dir = PathBuf::new();
        for part in rel.parent().into_iter().flat_map(Path::iter) {
            dir.push(part);
            match fs::symlink_metadata(self.root.join(&dir)) {
                Ok(meta) if meta.is_dir() => {}
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Some(format!("moved away (its directory `{}` was replaced by a symlink)", dir.display()));
                }
                Ok(_) => return Some(format!("deleted (its directory `{}` was replaced by a file)", dir.display())),
                Err(_) => return Some("deleted".to_owned()),
            }
        }
        let path = self.root.join(rel);
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => return Some("deleted".to_owned()),
            Err(e) => return Some(format!("made unreadable ({e})")),
        };
        let kind = meta.file_type();
        match entry {
            Entry::File { bytes, mode } => {
                if kind.is_symlink() {
                    return Some("replaced by a symlink".to_owned());
                }
                if kind.is_dir() {
                    return Some("replaced by a directory".to_owned());
                }
                if !kind.is_file() {
                    return Some("replaced by a special file".to_owned());
                }
                let same_bytes = meta.len() == bytes.len() as u64 && fs::read(&path).is_ok_and(|now| now == *bytes);
                let now_mode = mode_of(&meta);
                if !same_bytes {
                    Some("changed".to_owned())
                } else if now_mode != *mode {
                    Some(format!("given mode `{now_mode:o}` instead of `{mode:o}`"))
                } else {
                    None
                }
            }
            Entry::Link(target) => {
                let same = kind.is_symlink() && fs::read_link(&path).is_ok_and(|now| now == *target);
                (!same).then(|| "replaced".to_owned())
            }
        }
    }

    /// Put `entry` back at `rel`, replacing whatever is there (a symlink is replaced, never
    /// written through).
    fn put_back(&self, rel: &Path, entry: &Entry) -> std::io::Result<()> {
        let parent = self.real_dirs(rel.parent().unwrap_or(Path::new("")))?;
        let name = rel.file_name().ok_or_else(|| std::io::Error::new(ErrorKind::InvalidInput, "no file name"))?;
        let path = parent.join(name);
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => fs::remove_dir_all(&path)?,
            Ok(_) if matches!(entry, Entry::Link(_)) => fs::remove_file(&path)?,
            _ => {}
        }
        match entry {
            Entry::File { bytes, mode } => {
                // Written beside it, then renamed over it: the rename replaces a symlink or a
                // pipe in the way. The mode is set on the new file, whatever the umask.
                let mut file = tempfile::Builder::new().prefix(".redraft-restore-").tempfile_in(&parent)?;
                file.write_all(bytes)?;
                file.as_file().set_permissions(fs::Permissions::from_mode(*mode))?;
                file.persist(&path).map_err(|e| e.error)?;
            }
            Entry::Link(target) => std::os::unix::fs::symlink(target, &path)?,
        }
        Ok(())
    }

    /// Make every directory of `dir` (relative) a real directory again — a symlink or a file
    /// in the way is removed, never followed — and return its full path.
    fn real_dirs(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let mut path = self.root.clone();
        for part in dir {
            path.push(part);
            match fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_dir() => continue,
                Ok(_) => fs::remove_file(&path)?,
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            fs::create_dir(&path)?;
        }
        Ok(path)
    }
}

fn mode_of(meta: &fs::Metadata) -> u32 {
    meta.permissions().mode() & 0o7777
}

/// A protected file that was changed and put back, or a file added where a glob matches and
/// removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Relative to the working directory.
    pub path: String,
    /// What was found and what was done, e.g. "`tests/a.sh` is protected and was changed; it
    /// has been put back."
    pub text: String,
}

impl Finding {
    fn new(rel: &Path, text: String) -> Self {
        Self { path: rel.display().to_string(), text }
    }

    /// The finding as an issue of the iteration, addressed to the agent.
    pub fn issue(&self) -> Issue {
        Issue::new(
            self.path.clone(),
            PROTECTED_FILE_MODIFIED,
            format!("{} Change the code under test, not the tests or the verifier.", self.text),
        )
    }
}

/// The evaluator side of protection. The files were already checked and put back when the
/// workspace was read, before any evaluator ran, so the verifier always judges the code
/// against the original tests; this reports what was found.
#[derive(Debug)]
pub struct ProtectEvaluator {
    pub found: std::sync::Arc<std::sync::Mutex<Vec<Finding>>>,
}

#[async_trait::async_trait]
impl Evaluator for ProtectEvaluator {
    fn name(&self) -> &str {
        "protect"
    }

    async fn evaluate(&self, _: EvalInput<'_>) -> Result<Verdict, EvaluatorError> {
        let found = self.found.lock().map(|mut f| std::mem::take(&mut *f)).unwrap_or_default();
        Ok(Verdict::from_issues(found.iter().map(Finding::issue).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    fn paths(found: &[Finding]) -> Vec<&str> {
        found.iter().map(|f| f.path.as_str()).collect()
    }

    #[test]
    fn restores_changed_and_deleted_files_and_removes_added_ones() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("tests")).unwrap();
        fs::write(dir.path().join("tests/a.sh"), "original a").unwrap();
        fs::write(dir.path().join("tests/b.sh"), "original b").unwrap();
        fs::set_permissions(dir.path().join("tests/b.sh"), fs::Permissions::from_mode(0o750)).unwrap();
        fs::write(dir.path().join("src.txt"), "code").unwrap();
        let p = Protected::capture(dir.path(), &["tests/*.sh".to_owned()]).unwrap();
        assert_eq!(p.paths(), ["tests/a.sh", "tests/b.sh"]);
        assert!(p.check_and_restore(&[]).is_empty());

        fs::write(dir.path().join("tests/a.sh"), "exit 0").unwrap();
        fs::remove_file(dir.path().join("tests/b.sh")).unwrap();
        fs::write(dir.path().join("tests/c.sh"), "new").unwrap();
        fs::write(dir.path().join("src.txt"), "changed code").unwrap();
        let issues = p.check_and_restore(&["tests/c.sh".to_owned(), "src.txt".to_owned(), "tests/a.sh".to_owned()]);
        assert_eq!(paths(&issues), ["tests/a.sh", "tests/b.sh", "tests/c.sh"]);
        let issue = issues[0].issue();
        assert_eq!(issue.code, PROTECTED_FILE_MODIFIED);
        assert!(issue.message.ends_with("Change the code under test, not the tests or the verifier."), "{issue:?}");
        assert!(issues[0].text.contains("was changed; it has been put back"), "{}", issues[0].text);
        assert!(issues[1].text.contains("was deleted; it has been put back"), "{}", issues[1].text);
        assert!(issues[2].text.contains("was added; it has been removed"), "{}", issues[2].text);
        assert_eq!(fs::read_to_string(dir.path().join("tests/a.sh")).unwrap(), "original a");
        assert_eq!(fs::read_to_string(dir.path().join("tests/b.sh")).unwrap(), "original b");
        assert_eq!(mode(&dir.path().join("tests/b.sh")), 0o750);
        assert!(!dir.path().join("tests/c.sh").exists());
        assert_eq!(fs::read_to_string(dir.path().join("src.txt")).unwrap(), "changed code");
        assert!(p.check_and_restore(&[]).is_empty(), "everything is back");
    }

    #[test]
    fn globs_that_match_nothing_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.sh"), "a").unwrap();
        let p = Protected::capture(dir.path(), &["a.sh".to_owned(), "tests/**".to_owned()]).unwrap();
        assert_eq!(p.unmatched(), ["tests/**"]);
    }

    #[test]
    fn a_symlink_is_replaced_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("tests")).unwrap();
        fs::write(dir.path().join("tests/a.sh"), "original").unwrap();
        fs::write(outside.path().join("a.sh"), "outside").unwrap();
        let p = Protected::capture(dir.path(), &["tests".to_owned()]).unwrap();

        // The file itself becomes a link to a file outside.
        fs::remove_file(dir.path().join("tests/a.sh")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("a.sh"), dir.path().join("tests/a.sh")).unwrap();
        let issues = p.check_and_restore(&[]);
        assert_eq!(paths(&issues), ["tests/a.sh"]);
        assert!(issues[0].text.contains("replaced by a symlink"), "{}", issues[0].text);
        assert!(fs::symlink_metadata(dir.path().join("tests/a.sh")).unwrap().is_file());
        assert_eq!(fs::read_to_string(dir.path().join("tests/a.sh")).unwrap(), "original");
        assert_eq!(fs::read_to_string(outside.path().join("a.sh")).unwrap(), "outside");

        // The directory becomes a link to a directory outside, with a file the glob matches.
        fs::remove_dir_all(dir.path().join("tests")).unwrap();
        fs::write(outside.path().join("b.sh"), "outside b").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("tests")).unwrap();
        let issues = p.check_and_restore(&[]);
        assert_eq!(paths(&issues), ["tests/a.sh"]);
        assert!(issues[0].text.contains("its directory `tests` was replaced by a symlink"), "{}", issues[0].text);
        assert!(fs::symlink_metadata(dir.path().join("tests")).unwrap().is_dir());
        assert_eq!(fs::read_to_string(dir.path().join("tests/a.sh")).unwrap(), "original");
        assert_eq!(fs::read_to_string(outside.path().join("a.sh")).unwrap(), "outside");
        assert_eq!(fs::read_to_string(outside.path().join("b.sh")).unwrap(), "outside b");

        // An added link under a protected directory is removed, not what it points to.
        std::os::unix::fs::symlink(outside.path().join("b.sh"), dir.path().join("tests/b.sh")).unwrap();
        let issues = p.check_and_restore(&["tests/b.sh".to_owned()]);
        assert_eq!(paths(&issues), ["tests/b.sh"]);
        assert!(fs::symlink_metadata(dir.path().join("tests/b.sh")).is_err());
        assert_eq!(fs::read_to_string(outside.path().join("b.sh")).unwrap(), "outside b");
    }

    #[test]
    fn protected_symlinks_and_modes_come_back() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("tests")).unwrap();
        fs::write(dir.path().join("tests/run.sh"), "run").unwrap();
        fs::set_permissions(dir.path().join("tests/run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("run.sh", dir.path().join("tests/alias.sh")).unwrap();
        let p = Protected::capture(dir.path(), &["tests/**".to_owned()]).unwrap();
        assert_eq!(p.paths(), ["tests/alias.sh", "tests/run.sh"]);

        fs::set_permissions(dir.path().join("tests/run.sh"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::remove_file(dir.path().join("tests/alias.sh")).unwrap();
        fs::write(dir.path().join("tests/alias.sh"), "run").unwrap();
        let issues = p.check_and_restore(&[]);
        assert_eq!(issues.len(), 2);
        assert!(issues[0].text.contains("`tests/alias.sh` is protected and was replaced"), "{}", issues[0].text);
        assert!(issues[1].text.contains("given mode `644` instead of `755`"), "{}", issues[1].text);
        assert_eq!(fs::read_link(dir.path().join("tests/alias.sh")).unwrap(), Path::new("run.sh"));
        assert_eq!(mode(&dir.path().join("tests/run.sh")), 0o755);
    }
}
