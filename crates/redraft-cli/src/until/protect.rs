//! `--protect GLOB`: files the agent must not change (typically the tests). They are read
//! before the loop; an iteration that changes, deletes or adds one is rejected as
//! verifier-gaming (`protected_file_modified`) whatever the verifier says, and the file is
//! put back.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use redraft::core::canonical::sha256_hex_bytes;
use redraft::core::{EvalInput, Evaluator, EvaluatorError, Issue, Verdict};

/// The issue code of an iteration that changed a protected file.
pub const PROTECTED_FILE_MODIFIED: &str = "protected_file_modified";

#[derive(Debug)]
struct Guarded {
    relative: String,
    path: PathBuf,
    bytes: Vec<u8>,
    sha256: String,
}

/// The protected files, as they were before the loop.
#[derive(Debug)]
pub struct Protected {
    root: PathBuf,
    patterns: Vec<glob::Pattern>,
    files: Vec<Guarded>,
}

impl Protected {
    /// Expand `patterns` (relative to `root`) and remember every matching file.
    pub fn capture(root: &Path, patterns: &[String]) -> Result<Self> {
        let mut files = Vec::new();
        let mut compiled = Vec::new();
        for pattern in patterns {
            compiled
                .push(glob::Pattern::new(pattern).map_err(|e| anyhow!("`--protect {pattern}` is not a glob: {e}"))?);
            let full = root.join(pattern);
            let matches =
                glob::glob(&full.to_string_lossy()).map_err(|e| anyhow!("`--protect {pattern}` is not a glob: {e}"))?;
            for path in matches.flatten().filter(|p| p.is_file()) {
                if files.iter().any(|g: &Guarded| g.path == path) {
                    continue;
                }
                let bytes =
                    std::fs::read(&path).map_err(|e| anyhow!("cannot read protected `{}`: {e}", path.display()))?;
                let relative = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
                files.push(Guarded { relative, sha256: sha256_hex_bytes(&bytes), path, bytes });
            }
        }
        Ok(Self { root: root.to_owned(), patterns: compiled, files })
    }

    /// How many files are protected.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// The protected paths, relative to the root.
    pub fn paths(&self) -> Vec<&str> {
        self.files.iter().map(|g| g.relative.as_str()).collect()
    }

    /// Find changes to protected files, undo them, and describe each as an issue.
    pub fn check_and_restore(&self, changed: &[String]) -> Vec<Issue> {
        let mut issues = Vec::new();
        for g in &self.files {
            let now = std::fs::read(&g.path).ok();
            let what = match &now {
                None => "deleted",
                Some(bytes) if sha256_hex_bytes(bytes) != g.sha256 => "changed",
                Some(_) => continue,
            };
            let restored = std::fs::write(&g.path, &g.bytes).is_ok();
            issues.push(Issue::new(
                g.relative.clone(),
                PROTECTED_FILE_MODIFIED,
                format!(
                    "`{}` is protected and was {what}; {}. Change the code under test, not the tests or the verifier.",
                    g.relative,
                    if restored { "it has been put back" } else { "it could not be put back" }
                ),
            ));
        }
        // Files the agent added that match a protected pattern.
        for path in changed {
            if self.files.iter().any(|g| &g.relative == path) || !self.patterns.iter().any(|p| p.matches(path)) {
                continue;
            }
            let full = self.root.join(path);
            if full.is_file() {
                let removed = std::fs::remove_file(&full).is_ok();
                issues.push(Issue::new(
                    path.clone(),
                    PROTECTED_FILE_MODIFIED,
                    format!(
                        "`{path}` matches a protected pattern and was added; {}. Change the code under test, not the tests or the verifier.",
                        if removed { "it has been removed" } else { "it could not be removed" }
                    ),
                ));
            }
        }
        issues
    }
}

/// The evaluator side of protection: runs before the verifier, so the verifier always judges
/// the code against the original tests.
#[derive(Debug)]
pub struct ProtectEvaluator {
    pub protected: Protected,
    pub changed: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl Evaluator for ProtectEvaluator {
    fn name(&self) -> &str {
        "protect"
    }

    async fn evaluate(&self, _: EvalInput<'_>) -> Result<Verdict, EvaluatorError> {
        let changed = self.changed.lock().map(|c| c.clone()).unwrap_or_default();
        Ok(Verdict::from_issues(self.protected.check_and_restore(&changed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restores_changed_and_deleted_files_and_removes_added_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tests")).unwrap();
        std::fs::write(dir.path().join("tests/a.sh"), "original a").unwrap();
        std::fs::write(dir.path().join("tests/b.sh"), "original b").unwrap();
        std::fs::write(dir.path().join("src.txt"), "code").unwrap();
        let p = Protected::capture(dir.path(), &["tests/*.sh".to_owned()]).unwrap();
        assert_eq!(p.len(), 2);
        assert!(p.check_and_restore(&[]).is_empty());

        std::fs::write(dir.path().join("tests/a.sh"), "exit 0").unwrap();
        std::fs::remove_file(dir.path().join("tests/b.sh")).unwrap();
        std::fs::write(dir.path().join("tests/c.sh"), "new").unwrap();
        std::fs::write(dir.path().join("src.txt"), "changed code").unwrap();
        let issues = p.check_and_restore(&["tests/c.sh".to_owned(), "src.txt".to_owned()]);
        let got: Vec<(&str, &str)> = issues.iter().map(|i| (i.path.as_str(), i.code.as_str())).collect();
        assert_eq!(
            got,
            [
                ("tests/a.sh", PROTECTED_FILE_MODIFIED),
                ("tests/b.sh", PROTECTED_FILE_MODIFIED),
                ("tests/c.sh", PROTECTED_FILE_MODIFIED)
            ]
        );
        assert_eq!(std::fs::read_to_string(dir.path().join("tests/a.sh")).unwrap(), "original a");
        assert_eq!(std::fs::read_to_string(dir.path().join("tests/b.sh")).unwrap(), "original b");
        assert!(!dir.path().join("tests/c.sh").exists());
        assert_eq!(std::fs::read_to_string(dir.path().join("src.txt")).unwrap(), "changed code");
    }

    #[test]
    fn a_bad_glob_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = Protected::capture(dir.path(), &["tests/[".to_owned()]).unwrap_err().to_string();
        assert!(err.contains("`--protect tests/[`"), "{err}");
    }
}
