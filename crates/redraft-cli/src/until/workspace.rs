//! Snapshots of the working directory and the differences between them, taken by redraft
//! itself: it reads the files (bytes, the executable bit, a symlink's target — never what a
//! link points to) and hashes them with SHA-256. No program runs: git would read the
//! workspace's own configuration (filters, attributes, textconv drivers, `core.fsmonitor`,
//! hooks, `include.path`), which the agent writes, and run what it names outside any sandbox.
//!
//! Names are kept as bytes (`OsStr`), compared as bytes and shown to people quoted when they are
//! not plain UTF-8 (`names`). A snapshot leaves out `.redraft/` at the root, every `.git` that was
//! there when the loop began, and in a git repository what git's ignore files said when the loop
//! began (`rules`: read once, before the agent's first turn, so that the agent cannot hide a
//! change by editing them), so that `node_modules/` or `target/` do not swamp the reports. That
//! only shapes what the reports show: protection (`protect`) walks the protected paths itself
//! and sees everything. Only regular files and symlinks are read; a FIFO, socket or device is
//! never opened. Another file system mounted under the working directory (a bind mount, a FUSE
//! file system) is left out, with a warning: its files are not the workspace's, and reading them
//! could take forever.
//!
//! Time and memory are bounded: a file's content is read and hashed only up to [`HASH_MAX`]; a
//! larger one is compared by its size, modification and change times and inode, never read (so a
//! sparse file of a terabyte costs nothing). Contents are kept for diffs only for text files (no
//! NUL byte in the first 8000 bytes) of at most 1 MiB, deduplicated by SHA-256, 64 MiB for the
//! whole loop; other changes are listed with their sizes, as "binary", "content not kept" or
//! "content not read". Diffs (`diff`) are unified diffs in git's layout, with a stat of the files
//! changed on top.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Result, anyhow};
use sha2::{Digest, Sha256};

use self::rules::Rules;
use super::reading::open_regular;
use super::root::{At, Root};

mod diff;
mod rules;

/// Redraft's own reports, at the root: never part of a snapshot.
const OWN_DIR: &str = ".redraft";
/// Git's directory (or, in a worktree or submodule, its pointer file).
const GIT_DIR: &str = ".git";

/// Longest file whose content is kept for diffs.
pub(super) const KEEP_PER_FILE: u64 = 1024 * 1024;
/// Most file content kept for diffs over the whole loop.
pub(super) const KEEP_TOTAL: usize = 64 * 1024 * 1024;
/// Longest file whose content is read and hashed; a longer one is compared by its [`Stamp`].
pub(super) const HASH_MAX: u64 = 16 * 1024 * 1024;
/// A file with a NUL byte in its first 8000 bytes is binary (git's rule).
const BINARY_PROBE: usize = 8000;

/// A SHA-256 digest.
pub(super) type Sha = [u8; 32];

/// What tells a file too large to read from another: its inode and its modification and change
/// times (seconds and nanoseconds). The change time cannot be set back by its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Self {
        Self { ino: meta.ino(), mtime: (meta.mtime(), meta.mtime_nsec()), ctime: (meta.ctime(), meta.ctime_nsec()) }
    }
}

/// One file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Entry {
    File {
        executable: bool,
        size: u64,
        sha: Sha,
        binary: bool,
    },
    /// A file larger than [`HASH_MAX`]: not read.
    Large {
        executable: bool,
        size: u64,
        stamp: Stamp,
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
                Entry::Large { executable, size, stamp } => {
                    hasher.update(if *executable { b"X" } else { b"F" });
                    for n in [size.to_le_bytes(), stamp.ino.to_le_bytes()] {
                        hasher.update(n);
                    }
                    for n in [stamp.mtime.0, stamp.mtime.1, stamp.ctime.0, stamp.ctime.1] {
                        hasher.update(n.to_le_bytes());
                    }
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

/// The working directory an agent edits, the ignore rules of its snapshots, and the file contents
/// kept for its diffs.
#[derive(Debug)]
pub struct Workspace {
    root: Arc<Root>,
    rules: Rules,
    blobs: Mutex<Blobs>,
    /// The mount points under the working directory already said to be left out.
    mounts: Mutex<BTreeSet<PathBuf>>,
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
    /// Larger than [`HASH_MAX`]: never read.
    NotRead,
}

impl Workspace {
    /// The working directory `root`, with the ignore rules in force now: the snapshots of the
    /// whole loop use them.
    pub fn open(root: Arc<Root>) -> Result<Self> {
        let at = root.check()?;
        let rules = Rules::read(at, root.path());
        Ok(Self { root, rules, blobs: Mutex::new(Blobs::default()), mounts: Mutex::new(BTreeSet::new()) })
    }

    /// Take a snapshot now. A directory that cannot be read is left out, with a warning.
    pub fn snapshot(&self) -> Result<Snapshot> {
        let at = self.root.check()?;
        let mut entries = BTreeMap::new();
        // Directories still to list (a stack, not recursion: a tree of any depth is walked).
        let mut dirs = vec![PathBuf::new()];
        while let Some(dir) = dirs.pop() {
            self.list(at, &dir, &mut entries, &mut dirs)?;
        }
        Ok(Snapshot { entries: Arc::new(entries) })
    }

    /// Add the files and symlinks of the directory `rel` to `entries`, and its directories to
    /// `dirs`, never following a symlink.
    fn list(
        &self,
        at: At<'_>,
        rel: &Path,
        entries: &mut BTreeMap<PathBuf, Entry>,
        dirs: &mut Vec<PathBuf>,
    ) -> Result<()> {
        let listed = match fs::read_dir(at.join(rel)) {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!("the workspace's snapshot leaves out `{}`, which it cannot read: {e}", shown(rel));
                return Ok(());
            }
        };
        for item in listed {
            let item = match item {
                Ok(item) => item,
                Err(e) => {
                    tracing::warn!("the workspace's snapshot leaves out what it cannot read in `{}`: {e}", shown(rel));
                    continue;
                }
            };
            let name = item.file_name();
            let path = rel.join(&name);
            if (rel.as_os_str().is_empty() && name == OWN_DIR) || self.rules.is_git(&path) {
                continue;
            }
            // The entry's own type: a symlink is a symlink.
            let Ok(kind) = item.file_type() else { continue };
            if self.rules.ignored(&path, kind.is_dir()) {
                continue;
            }
            let shown = || shown(&path);
            if kind.is_dir() {
                let full = at.join(&path);
                if fs::symlink_metadata(&full).is_ok_and(|meta| at.foreign(&full, &meta)) {
                    self.mount_left_out(&path);
                } else {
                    dirs.push(path);
                }
            } else if kind.is_file() {
                let read = read_file(&at.join(&path)).map_err(|e| anyhow!("cannot read `{}`: {e}", shown()))?;
                let entry = match read {
                    Scanned::Large { executable, size, stamp } => Entry::Large { executable, size, stamp },
                    Scanned::Whole(read) => {
                        if let (false, Some(bytes)) = (read.binary, read.kept) {
                            self.with_blobs(|b| b.keep(read.sha, bytes));
                        }
                        Entry::File { executable: read.executable, size: read.size, sha: read.sha, binary: read.binary }
                    }
                };
                entries.insert(path, entry);
            } else if kind.is_symlink() {
                let target = fs::read_link(at.join(&path)).map_err(|e| anyhow!("cannot read `{}`: {e}", shown()))?;
                entries.insert(path, Entry::Link { target });
            }
        }
        Ok(())
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

    /// The directory `rel` is another file system (a mount point): it is left out of the
    /// snapshots, which is said once a loop.
    fn mount_left_out(&self, rel: &Path) {
        let first = match self.mounts.lock() {
            Ok(mut told) => told.insert(rel.to_owned()),
            Err(_) => false,
        };
        if first {
            eprintln!(
                "warning: the reports leave out `{}`: it is another file system (a mount point), which redraft does not read",
                shown(rel)
            );
        }
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
            Entry::Large { .. } => Content::NotRead,
            Entry::File { binary: true, .. } => Content::Binary,
            Entry::File { sha, size, .. } => {
                if let Some(kept) = self.with_blobs(|b| b.kept.get(sha).cloned()) {
                    return Content::Text(kept);
                }
                if *size > KEEP_PER_FILE {
                    return Content::NotKept;
                }
                let Ok(at) = self.root.check() else { return Content::NotKept };
                let again = match read_file(&at.join(rel)) {
                    Ok(Scanned::Whole(read)) if read.sha == *sha => read.kept,
                    _ => None,
                };
                again.map_or(Content::NotKept, |bytes| Content::Text(Arc::from(bytes)))
            }
        }
    }
}

fn shown(rel: &Path) -> String {
    if rel.as_os_str().is_empty() { ".".to_owned() } else { super::names::shown(rel) }
}

/// A regular file read once.
enum Scanned {
    Whole(FileRead),
    /// Larger than [`HASH_MAX`]: not read.
    Large {
        executable: bool,
        size: u64,
        stamp: Stamp,
    },
}

/// A regular file read whole: its hash, size, whether it is binary, and its bytes when they are
/// few enough to keep.
struct FileRead {
    sha: Sha,
    size: u64,
    executable: bool,
    binary: bool,
    kept: Option<Vec<u8>>,
}

/// Read a regular file in chunks, at most [`HASH_MAX`] bytes of it: the whole of it is hashed, at
/// most [`KEEP_PER_FILE`] bytes are held. A larger file is not read.
fn read_file(path: &Path) -> io::Result<Scanned> {
    let (file, meta) = open_regular(path)?;
    let executable = meta.permissions().mode() & 0o111 != 0;
    let large = |meta: &fs::Metadata| Scanned::Large { executable, size: meta.len(), stamp: Stamp::of(meta) };
    if meta.len() > HASH_MAX {
        return Ok(large(&meta));
    }
    let mut hasher = Sha256::new();
    let cap = KEEP_PER_FILE as usize;
    let mut kept = (meta.len() <= KEEP_PER_FILE).then(|| Vec::with_capacity(meta.len() as usize));
    let mut probe = Vec::with_capacity(BINARY_PROBE.min(meta.len() as usize));
    let mut size = 0u64;
    let mut chunk = vec![0; 64 * 1024];
    let mut file = file.take(HASH_MAX + 1);
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
    if size > HASH_MAX {
        // It grew while it was read.
        return Ok(large(&file.into_inner().metadata()?));
    }
    Ok(Scanned::Whole(FileRead { sha: hasher.finalize().into(), size, executable, binary: probe.contains(&0), kept }))
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    fn open(dir: &Path) -> Workspace {
        Workspace::open(Arc::new(Root::pin(dir).unwrap())).unwrap()
    }

    #[test]
    fn snapshots_see_every_change_but_their_own_reports() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "one").unwrap();
        fs::create_dir_all(dir.path().join(".redraft")).unwrap();
        fs::write(dir.path().join(".redraft/x"), "ignored").unwrap();
        let ws = open(dir.path());
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
        let ws = open(dir.path());
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
        let ws = open(dir.path());
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
        let ws = open(dir.path());
        assert_eq!(ws.snapshot().unwrap().paths(), [".gitignore", "build/out.bin", "main.rs", "run.log"]);
        // A repository (its `.git` is never read as a program's configuration, only looked for).
        fs::create_dir_all(dir.path().join(".git/info")).unwrap();
        fs::write(dir.path().join(".git/info/exclude"), "main.rs\n").unwrap();
        fs::write(dir.path().join(".git/config"), "[core]\n\tfsmonitor = /bin/false\n").unwrap();
        let ws = open(dir.path());
        assert_eq!(ws.snapshot().unwrap().paths(), [".gitignore"]);
        // A parent's ignore file counts, up to the repository's top.
        let sub = dir.path().join("sub");
        fs::create_dir_all(&sub).unwrap();
        fs::write(dir.path().join(".gitignore"), "*.log\nsub/b.txt\n").unwrap();
        fs::write(sub.join("a.log"), "x").unwrap();
        fs::write(sub.join("b.txt"), "x").unwrap();
        fs::write(sub.join("c.txt"), "x").unwrap();
        fs::write(sub.join(".gitignore"), "!a.log\n").unwrap();
        assert_eq!(open(&sub).snapshot().unwrap().paths(), [".gitignore", "a.log", "c.txt"]);
    }

    #[test]
    fn the_rules_are_those_of_when_the_loop_began() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(".git/info")).unwrap();
        fs::write(dir.path().join(".gitignore"), "build/\n").unwrap();
        fs::create_dir_all(dir.path().join("build")).unwrap();
        fs::write(dir.path().join("build/out.bin"), "x").unwrap();
        fs::write(dir.path().join("main.rs"), "x").unwrap();
        fs::create_dir_all(dir.path().join("lib")).unwrap();
        let ws = open(dir.path());
        let before = ws.snapshot().unwrap();
        assert_eq!(before.paths(), [".gitignore", "main.rs"]);
        // Ignore files edited or added during the loop, a `.git` added: nothing more is hidden,
        // and what was ignored stays so.
        fs::write(dir.path().join(".gitignore"), "*\n").unwrap();
        fs::write(dir.path().join(".git/info/exclude"), "main.rs\n").unwrap();
        fs::write(dir.path().join("main.rs"), "changed").unwrap();
        fs::create_dir_all(dir.path().join("lib/.git")).unwrap();
        fs::write(dir.path().join("lib/.git/hidden"), "x").unwrap();
        fs::write(dir.path().join("lib/.gitignore"), "*\n").unwrap();
        fs::write(dir.path().join("lib/code.rs"), "x").unwrap();
        fs::write(dir.path().join("build/more.bin"), "x").unwrap();
        let after = ws.snapshot().unwrap();
        assert_eq!(after.paths(), [".gitignore", "lib/.git/hidden", "lib/.gitignore", "lib/code.rs", "main.rs"]);
        assert!(ws.stat(&before, &after).unwrap().contains("M main.rs"));
    }

    #[test]
    fn ignore_files_that_are_not_small_regular_files_are_never_read() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(".git/info")).unwrap();
        fs::create_dir_all(dir.path().join("sub")).unwrap();
        for fifo in [".gitignore", ".git/info/exclude"] {
            let made = std::process::Command::new("mkfifo").arg(dir.path().join(fifo)).status().unwrap();
            assert!(made.success());
        }
        fs::write(dir.path().join("sub/.gitignore"), "#".repeat(rules::IGNORE_FILE_MAX as usize + 1)).unwrap();
        fs::write(dir.path().join("sub/a.txt"), "x").unwrap();
        // A FIFO in the tree is not a file of the snapshot either; nothing blocks.
        let ws = open(dir.path());
        assert_eq!(ws.snapshot().unwrap().paths(), ["sub/.gitignore", "sub/a.txt"]);
    }

    #[test]
    fn a_tree_of_any_depth_is_walked_on_a_small_stack() {
        let dir = tempfile::tempdir().unwrap();
        let deep: PathBuf = std::iter::repeat_n("d", 600).collect();
        fs::create_dir_all(dir.path().join(&deep)).unwrap();
        fs::write(dir.path().join(&deep).join("f"), "x").unwrap();
        let path = dir.path().to_owned();
        let paths = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || open(&path).snapshot().unwrap().paths())
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(paths, [deep.join("f").display().to_string()]);
    }

    #[test]
    fn files_larger_than_the_bound_are_compared_without_being_read() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.bin");
        let file = fs::File::create(&big).unwrap();
        file.set_len(HASH_MAX + 1).unwrap();
        let ws = open(dir.path());
        let s1 = ws.snapshot().unwrap();
        assert_eq!(ws.snapshot().unwrap(), s1, "the same file, the same entry");
        // Written in place, same size: its times and change time differ.
        let mut file = fs::OpenOptions::new().write(true).open(&big).unwrap();
        std::io::Write::write_all(&mut file, b"x").unwrap();
        drop(file);
        let s2 = ws.snapshot().unwrap();
        assert_ne!(s1, s2);
        let diff = ws.diff(&s1, &s2).unwrap();
        assert!(diff.starts_with(&format!("M big.bin | {0} -> {0} bytes, content not read\n", HASH_MAX + 1)), "{diff}");
        assert!(diff.contains("Content not read: larger than 16 MiB"), "{diff}");
    }

    #[test]
    fn binary_and_large_files_are_listed_not_shown() {
        let dir = tempfile::tempdir().unwrap();
        let ws = open(dir.path());
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
