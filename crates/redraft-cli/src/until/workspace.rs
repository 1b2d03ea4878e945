//! Snapshots of the working directory and the differences between them, taken by redraft
//! itself: it reads the files (bytes, the executable bit, a symlink's target — never what a
//! link points to) and hashes them with SHA-256. No program runs: git would read the
//! workspace's own configuration (filters, attributes, textconv drivers, `core.fsmonitor`,
//! hooks, `include.path`), which the agent writes, and run what it names outside any sandbox.
//!
//! Names are kept as bytes (`OsStr`), compared as bytes and shown to people quoted when they are
//! not plain UTF-8 (`names`). A snapshot leaves out `.redraft/` at the root, every `.git`, and
//! in a git repository what its `.gitignore` files and `.git/info/exclude` ignore — read as data
//! by the `ignore` crate, so that `node_modules/` or `target/` do not swamp the reports. That
//! only shapes what the reports show: protection (`protect`) walks the protected paths itself
//! and sees everything.
//!
//! Memory is bounded: contents are kept for diffs only for text files (no NUL byte in the first
//! 8000 bytes) of at most 1 MiB, deduplicated by SHA-256, 64 MiB for the whole loop; other
//! changes are listed with their sizes, as "binary" or "content not kept". Diffs (`diff`) are
//! unified diffs in git's layout, with a stat of the files changed on top.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Result, anyhow};
use sha2::{Digest, Sha256};

mod diff;

/// Redraft's own reports, at the root: never part of a snapshot.
const OWN_DIR: &str = ".redraft";
/// Git's directory (or, in a worktree or submodule, its pointer file): never part of a snapshot.
const GIT_DIR: &str = ".git";

/// Longest file whose content is kept for diffs.
pub(super) const KEEP_PER_FILE: u64 = 1024 * 1024;
/// Most file content kept for diffs over the whole loop.
pub(super) const KEEP_TOTAL: usize = 64 * 1024 * 1024;
/// A file with a NUL byte in its first 8000 bytes is binary (git's rule).
const BINARY_PROBE: usize = 8000;

/// A SHA-256 digest.
pub(super) type Sha = [u8; 32];

/// One file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Entry {
    File {
        executable: bool,
        size: u64,
        sha: Sha,
        binary: bool,
    },
    /// A symbolic link, by its target (never followed).
    Link {
        target: PathBuf,
    },
}

/// The state of the workspace at one moment: every file and symlink (relative path → entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    entries: Arc<BTreeMap<PathBuf, Entry>>,
}

impl Snapshot {
    /// A short fingerprint of the whole tree.
    pub fn fingerprint(&self) -> String {
        let mut hasher = Sha256::new();
        for (path, entry) in self.entries.iter() {
            hasher.update(path.as_os_str().as_bytes());
            hasher.update([0]);
            match entry {
                Entry::File { executable, sha, .. } => {
                    hasher.update(if *executable { b"x" } else { b"f" });
                    hasher.update(sha);
                }
                Entry::Link { target } => {
                    hasher.update(b"l");
                    hasher.update(target.as_os_str().as_bytes());
                }
            }
            hasher.update([0]);
        }
        format!("files sha256 {}", hex(&hasher.finalize()))
    }

    #[cfg(test)]
    fn paths(&self) -> Vec<String> {
        self.entries.keys().map(|p| super::names::shown(p)).collect()
    }
}

/// The working directory an agent edits, and the file contents kept for its diffs.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    blobs: Mutex<Blobs>,
}

/// File contents kept for diffs, by SHA-256, within [`KEEP_TOTAL`].
#[derive(Debug, Default)]
struct Blobs {
    kept: HashMap<Sha, Arc<[u8]>>,
    bytes: usize,
}

impl Blobs {
    fn keep(&mut self, sha: Sha, bytes: Vec<u8>) {
        if self.kept.contains_key(&sha) || self.bytes.saturating_add(bytes.len()) > KEEP_TOTAL {
            return;
        }
        self.bytes += bytes.len();
        self.kept.insert(sha, Arc::from(bytes));
    }
}

/// What a diff can show of an entry's content.
#[derive(Debug)]
pub(super) enum Content {
    Text(Arc<[u8]>),
    Binary,
    /// Text, but larger than [`KEEP_PER_FILE`] or past [`KEEP_TOTAL`].
    NotKept,
}

impl Workspace {
    /// The working directory `root`.
    pub fn open(root: &Path) -> Self {
        Self { root: root.to_owned(), blobs: Mutex::new(Blobs::default()) }
    }

    /// Take a snapshot now. A directory that cannot be read is left out, with a warning.
    pub fn snapshot(&self) -> Result<Snapshot> {
        let mut walk = ignore::WalkBuilder::new(&self.root);
        // Only git's ignore files, read as data; never the user's global git configuration.
        walk.standard_filters(false)
            .hidden(false)
            .ignore(false)
            .parents(true)
            .git_ignore(true)
            .git_exclude(true)
            .git_global(false)
            .require_git(true)
            .follow_links(false)
            .filter_entry(|e| !(e.file_name() == GIT_DIR || (e.depth() == 1 && e.file_name() == OWN_DIR)));
        let mut entries = BTreeMap::new();
        for item in walk.build() {
            let found = match item {
                Ok(found) => found,
                Err(e) => {
                    tracing::warn!("the workspace's snapshot leaves out what it cannot read: {e}");
                    continue;
                }
            };
            let Some(kind) = found.file_type() else { continue };
            let Ok(rel) = found.path().strip_prefix(&self.root) else { continue };
            if rel.as_os_str().is_empty() {
                continue;
            }
            let shown = || super::names::shown(rel);
            if kind.is_file() {
                let read = read_file(found.path()).map_err(|e| anyhow!("cannot read `{}`: {e}", shown()))?;
                if let (false, Some(bytes)) = (read.binary, read.kept) {
                    self.with_blobs(|b| b.keep(read.sha, bytes));
                }
                let entry =
                    Entry::File { executable: read.executable, size: read.size, sha: read.sha, binary: read.binary };
                entries.insert(rel.to_owned(), entry);
            } else if kind.is_symlink() {
                let target = fs::read_link(found.path()).map_err(|e| anyhow!("cannot read `{}`: {e}", shown()))?;
                entries.insert(rel.to_owned(), Entry::Link { target });
            }
        }
        Ok(Snapshot { entries: Arc::new(entries) })
    }

    /// What changed from `before` to `after`, for a person: the stat of the files changed, then
    /// a unified diff of each (binary files and files whose content was not kept by a line).
    pub fn diff(&self, before: &Snapshot, after: &Snapshot) -> Result<String> {
        Ok(diff::render(self, &before.entries, &after.entries, diff::With::Patches))
    }

    /// What changed between two snapshots, for a person: one line a file — added (`A`),
    /// modified (`M`), deleted (`D`) or changed between file and symlink (`T`) — with its lines
    /// added and removed, then a total.
    pub fn stat(&self, before: &Snapshot, after: &Snapshot) -> Result<String> {
        Ok(diff::render(self, &before.entries, &after.entries, diff::With::StatOnly))
    }

    fn with_blobs<T>(&self, f: impl FnOnce(&mut Blobs) -> T) -> T {
        match self.blobs.lock() {
            Ok(mut blobs) => f(&mut blobs),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// The content of `entry` (at `rel`) for a diff: kept, or read again from the workspace when
    /// the file there still has the same SHA-256.
    pub(super) fn content(&self, rel: &Path, entry: &Entry) -> Content {
        match entry {
            Entry::Link { target } => Content::Text(Arc::from(target.as_os_str().as_bytes())),
            Entry::File { binary: true, .. } => Content::Binary,
            Entry::File { sha, size, .. } => {
                if let Some(kept) = self.with_blobs(|b| b.kept.get(sha).cloned()) {
                    return Content::Text(kept);
                }
                if *size > KEEP_PER_FILE {
                    return Content::NotKept;
                }
                let path = self.root.join(rel);
                let again = fs::symlink_metadata(&path)
                    .ok()
                    .filter(fs::Metadata::is_file)
                    .and_then(|_| read_file(&path).ok())
                    .filter(|read| read.sha == *sha)
                    .and_then(|read| read.kept);
                again.map_or(Content::NotKept, |bytes| Content::Text(Arc::from(bytes)))
            }
        }
    }
}

/// A regular file read once: its hash, size, whether it is binary, and its bytes when they are
/// few enough to keep.
struct FileRead {
    sha: Sha,
    size: u64,
    executable: bool,
    binary: bool,
    kept: Option<Vec<u8>>,
}

/// Read a regular file in chunks: the whole of it is hashed, at most [`KEEP_PER_FILE`] bytes
/// are held.
fn read_file(path: &Path) -> io::Result<FileRead> {
    let mut file = fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("it is no longer a regular file"));
    }
    let mut hasher = Sha256::new();
    let cap = KEEP_PER_FILE as usize;
    let mut kept = (meta.len() <= KEEP_PER_FILE).then(|| Vec::with_capacity(meta.len() as usize));
    let mut probe = Vec::with_capacity(BINARY_PROBE.min(meta.len() as usize));
    let mut size = 0u64;
    let mut chunk = vec![0; 64 * 1024];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let read = &chunk[..n];
        hasher.update(read);
        size += n as u64;
        if probe.len() < BINARY_PROBE {
            probe.extend_from_slice(&read[..n.min(BINARY_PROBE - probe.len())]);
        }
        if kept.as_ref().is_some_and(|k| k.len() + n > cap) {
            kept = None;
        }
        if let Some(k) = &mut kept {
            k.extend_from_slice(read);
        }
    }
    Ok(FileRead {
        sha: hasher.finalize().into(),
        size,
        executable: meta.permissions().mode() & 0o111 != 0,
        binary: probe.contains(&0),
        kept,
    })
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    #[test]
    fn snapshots_see_every_change_but_their_own_reports() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "one").unwrap();
        fs::create_dir_all(dir.path().join(".redraft")).unwrap();
        fs::write(dir.path().join(".redraft/x"), "ignored").unwrap();
        let ws = Workspace::open(dir.path());
        let s1 = ws.snapshot().unwrap();
        fs::write(dir.path().join("a.txt"), "two").unwrap();
        let s2 = ws.snapshot().unwrap();
        assert_ne!(s1.fingerprint(), s2.fingerprint());
        assert_eq!(ws.stat(&s1, &s2).unwrap(), "M a.txt | 2 +-\n1 file changed, 1 insertion(+), 1 deletion(-)\n");
        fs::write(dir.path().join(".redraft/x"), "still ignored").unwrap();
        assert_eq!(ws.snapshot().unwrap(), s2);
        fs::set_permissions(dir.path().join("a.txt"), fs::Permissions::from_mode(0o755)).unwrap();
        let s3 = ws.snapshot().unwrap();
        assert_eq!(ws.stat(&s2, &s3).unwrap(), "M a.txt | mode 100644 -> 100755\n1 file changed\n");
    }

    #[test]
    fn symlinks_count_by_their_target() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("a"), "one").unwrap();
        fs::write(outside.path().join("b"), "one").unwrap();
        let ws = Workspace::open(dir.path());
        let s1 = ws.snapshot().unwrap();
        std::os::unix::fs::symlink(outside.path().join("a"), dir.path().join("link")).unwrap();
        let s2 = ws.snapshot().unwrap();
        assert!(ws.stat(&s1, &s2).unwrap().starts_with("A link | 1 +\n"));
        fs::remove_file(dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("b"), dir.path().join("link")).unwrap();
        let s3 = ws.snapshot().unwrap();
        assert!(ws.stat(&s2, &s3).unwrap().starts_with("M link | 2 +-\n"), "same content, another target");
        let diff = ws.diff(&s2, &s3).unwrap();
        assert!(diff.contains("diff --git a/link b/link\n--- a/link\n+++ b/link\n"), "{diff}");
        assert!(
            diff.contains(&format!("+{}\n\\ No newline at end of file", outside.path().join("b").display())),
            "{diff}"
        );
    }

    #[test]
    fn names_that_are_not_utf8_are_kept_as_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path());
        let s1 = ws.snapshot().unwrap();
        // Two names that a lossy conversion would make one.
        fs::write(dir.path().join(OsStr::from_bytes(b"x\xff")), "a\n").unwrap();
        fs::write(dir.path().join(OsStr::from_bytes(b"x\xfe")), "b\n").unwrap();
        let s2 = ws.snapshot().unwrap();
        assert_eq!(s2.paths(), ["\"x\\xfe\"", "\"x\\xff\""]);
        let diff = ws.diff(&s1, &s2).unwrap();
        assert!(diff.contains("diff --git \"a/x\\xff\" \"b/x\\xff\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/x\\xff\"\n@@ -0,0 +1 @@\n+a\n"), "{diff}");
        fs::write(dir.path().join(OsStr::from_bytes(b"x\xff")), "b\n").unwrap();
        let s3 = ws.snapshot().unwrap();
        assert_eq!(ws.stat(&s2, &s3).unwrap(), "M \"x\\xff\" | 2 +-\n1 file changed, 1 insertion(+), 1 deletion(-)\n");
    }

    #[test]
    fn what_git_ignores_is_left_out_in_a_git_repository_only() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(".gitignore"), "build/\n*.log\n").unwrap();
        fs::create_dir_all(dir.path().join("build")).unwrap();
        fs::write(dir.path().join("build/out.bin"), "x").unwrap();
        fs::write(dir.path().join("run.log"), "x").unwrap();
        fs::write(dir.path().join("main.rs"), "x").unwrap();
        let ws = Workspace::open(dir.path());
        assert_eq!(ws.snapshot().unwrap().paths(), [".gitignore", "build/out.bin", "main.rs", "run.log"]);
        // A repository (its `.git` is never read as a program's configuration, only looked for).
        fs::create_dir_all(dir.path().join(".git/info")).unwrap();
        fs::write(dir.path().join(".git/info/exclude"), "main.rs\n").unwrap();
        fs::write(dir.path().join(".git/config"), "[core]\n\tfsmonitor = /bin/false\n").unwrap();
        assert_eq!(ws.snapshot().unwrap().paths(), [".gitignore"]);
    }

    #[test]
    fn binary_and_large_files_are_listed_not_shown() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path());
        let s1 = ws.snapshot().unwrap();
        fs::write(dir.path().join("logo.png"), b"\x89PNG\0\0\0").unwrap();
        fs::write(dir.path().join("big.txt"), "line\n".repeat(300_000)).unwrap();
        let s2 = ws.snapshot().unwrap();
        let diff = ws.diff(&s1, &s2).unwrap();
        assert!(
            diff.starts_with("A big.txt  | 1500000 bytes, content not kept\nA logo.png | binary, 7 bytes\n"),
            "{diff}"
        );
        assert!(
            diff.contains(
                "diff --git a/logo.png b/logo.png\nnew file mode 100644\nBinary file added: 7 bytes (sha256 "
            ),
            "{diff}"
        );
        assert!(diff.contains("Content not shown: larger than 1 MiB"), "{diff}");
    }
}
