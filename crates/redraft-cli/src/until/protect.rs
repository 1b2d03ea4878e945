//! `--protect GLOB`: paths the agent must not change (typically the tests), and the promise that
//! the verifier only ever runs against them as they were before the loop.
//!
//! **What is protected.** Everything a glob matches, or that lies under a directory it matches:
//! files, symlinks, directories, dotfiles, caches (`__pycache__`, `.pytest_cache`), files git
//! ignores, any byte sequence as a name; the bytecode of a protected Python source wherever it
//! is (`globs`). Redraft walks the protected trees itself, matching names as bytes; git's view of
//! the workspace plays no part. In every loop, globs or not, redraft's own configuration files
//! are protected too — `./redraft.toml` (there or not: an agent must not create one), and the
//! files `--config` or the XDG directory name when they lie in the working directory, where their
//! names put them (a link there is protected as the link) and where a link there leads — because
//! the next loop would read what the agent wrote there (its sandboxes, the environment its
//! commands get, where the store and the traces go).
//!
//! **Before the loop** every protected path is recorded: a file's bytes, mode and modification
//! time, a symlink's target, a directory's mode.
//!
//! **Before each verifier run** the protected paths are put back exactly as they were (byte for
//! byte, with their modes, types and files' modification times): files added there are removed
//! (directories too), changed ones restored, deleted ones recreated. This happens when the
//! agent's turn ends (when the workspace is read, before any evaluator) and is checked again
//! right before the verifier starts; when it cannot be done, the verifier does not run and the
//! iteration is rejected.
//!
//! **Blame.** What the *agent* changed is what differs between the protected paths when its turn
//! ended and when it began — so what the verifier wrote there on its previous run (pytest's
//! `__pycache__` and `.pytest_cache`, a report) is never blamed on the agent, nor is a path the
//! agent only put back as it was before the loop. A change the agent
//! made rejects the iteration as verifier-gaming (`protected_file_modified`), whatever the
//! verifier says. One exception: changes inside a well-known cache directory ([`CACHE_DIRS`] —
//! an honest agent that runs the tests writes them too) are put back like everything else but
//! not held against the agent; they are logged (at `info`). A forged `.pyc` for a protected
//! test — under `tests/**`, or under `tests/test_*.py`, which protects the tests' bytecode too —
//! is therefore removed before the verifier runs, silently: the verifier judges the real test,
//! and its verdict is the iteration's.
//!
//! **After the loop** (or at its cap) the protected paths are put back once more, so the loop
//! leaves them as it found them; what the verifier left there is named in a warning, unless it
//! is a cache.
//!
//! Nothing here follows a symlink: the trees are walked through real directories only, and a
//! restore replaces whatever stands in the way (a symlink, a directory, a file where a directory
//! was) instead of writing through it, so nothing outside the working directory is written or
//! deleted. Nothing crosses into another file system either: a mount point under a protected
//! path (a bind mount of a directory outside, a FUSE file system) is never walked into, removed
//! through or written into — it cannot be put back, so the verifier does not run while it is
//! there. Change detection compares bytes (SHA-256), modes and types, never times or sizes alone;
//! only a file over 16 MiB where no protected file of its size was before the loop is not read
//! (it cannot be what was there): it is told apart by its size, times and inode, and put back or
//! removed, so a huge sparse file costs nothing.
//!
//! Every operation first checks that the working directory is still the one the loop started in
//! (`root`); when it is not, nothing is done and the loop stops.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{self, ErrorKind, Read as _, Write as _};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use anyhow::{Result, anyhow};
use redraft::core::{EvalInput, Evaluator, EvaluatorError, Issue, Verdict};
use sha2::{Digest, Sha256};

use self::globs::Rule;
use super::inside::{InTheWay, real_dirs};
use super::names::shown;
use super::reading::open_regular;
use super::root::{At, Moved, Root};

mod globs;

/// The issue code of an iteration that changed a protected file.
pub const PROTECTED_FILE_MODIFIED: &str = "protected_file_modified";

/// Cache directories: what changes inside them is put back, but not blamed on the agent.
pub const CACHE_DIRS: [&str; 4] = ["__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"];

type Sha = [u8; 32];

/// A file larger than this is read only where a protected file of its size was before the loop.
const HASH_MAX: u64 = 16 * 1024 * 1024;

/// A protected path as the listings compare it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File {
        mode: u32,
        sha: Sha,
    },
    /// A file too large to read (see [`HASH_MAX`]): its size, inode, and modification and change
    /// times. Never one recorded before the loop, so always put back or removed.
    Large {
        mode: u32,
        size: u64,
        stamp: (u64, i64, i64, i64, i64),
    },
    Link(PathBuf),
    Dir {
        mode: u32,
    },
    /// A socket, pipe or device: never recreated.
    Special,
    /// A file that could not be read.
    Unreadable,
}

impl Node {
    fn kind(&self) -> &'static str {
        match self {
            Node::File { .. } | Node::Large { .. } | Node::Unreadable => "a file",
            Node::Link(_) => "a symlink",
            Node::Dir { .. } => "a directory",
            Node::Special => "a special file",
        }
    }
}

/// The protected paths at one moment.
#[derive(Debug, Default, Clone)]
struct Listing {
    nodes: BTreeMap<PathBuf, Node>,
    /// Files' modification times.
    mtimes: BTreeMap<PathBuf, SystemTime>,
    /// Directories that could not be listed, and files that could not be read.
    unreadable: Vec<String>,
}

/// The protected paths, as they were before the loop.
#[derive(Debug)]
pub struct Protected {
    root: Arc<Root>,
    rules: Vec<Rule>,
    /// How many of the rules are `--protect` globs (the first ones); the others are redraft's
    /// configuration files.
    globs: usize,
    /// Redraft's configuration files in the working directory, relative to it.
    config: Vec<PathBuf>,
    before: Listing,
    /// The bytes of every protected file before the loop, by SHA-256.
    contents: HashMap<Sha, Vec<u8>>,
    /// The protected paths when the agent's current turn began.
    turn: Mutex<Option<Listing>>,
    unmatched: Vec<String>,
}

impl Protected {
    /// Expand `patterns` (relative to `root`, or absolute inside it), add the configuration
    /// files `config` (relative to it), and record every protected path: a file's bytes, mode and
    /// modification time, a symlink's target, a directory's mode.
    pub fn capture(root: Arc<Root>, patterns: &[String], config: &[PathBuf]) -> Result<Self> {
        let mut rules = patterns.iter().map(|p| Rule::parse(root.path(), p)).collect::<Result<Vec<_>>>()?;
        let globs = rules.len();
        rules.extend(config.iter().map(|c| Rule::exact(c)));
        let at = root.check()?;
        let mut unmatched = Vec::new();
        let mut found = BTreeMap::new();
        let mut unreadable = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            let mut mine = BTreeMap::new();
            rule.walk(at, &mut mine, &mut unreadable);
            if i < globs && mine.values().all(fs::Metadata::is_dir) {
                unmatched.push(rule.text.clone());
            }
            found.extend(mine);
        }
        if let Some(first) = unreadable.first() {
            return Err(anyhow!(
                "cannot read the protected {first}\nhint: redraft records protected files before the loop; make them readable, or protect less"
            ));
        }
        let mut contents = HashMap::new();
        let before = listing(at, found, Reading::Capture(&mut contents));
        if let Some(first) = before.unreadable.first() {
            return Err(anyhow!(
                "cannot read the protected {first}\nhint: redraft records protected files before the loop; make them readable, or protect less"
            ));
        }
        let config = config.to_vec();
        Ok(Self { root, rules, globs, config, before, contents, turn: Mutex::new(None), unmatched })
    }

    /// Whether any `--protect` glob was given.
    pub fn has_globs(&self) -> bool {
        self.globs > 0
    }

    fn has_rules(&self) -> bool {
        !self.rules.is_empty()
    }

    /// The globs that matched no file when the loop started.
    pub fn unmatched(&self) -> &[String] {
        &self.unmatched
    }

    #[cfg(test)]
    fn paths(&self) -> Vec<String> {
        self.before.nodes.iter().filter(|(_, n)| !matches!(n, Node::Dir { .. })).map(|(p, _)| shown(p)).collect()
    }

    /// The protected paths now.
    fn now(&self, at: At<'_>) -> Listing {
        let (found, unreadable) = self.walk(at);
        let mut now = listing(at, found, Reading::Compare(self));
        now.unreadable.extend(unreadable);
        now
    }

    /// The protected paths now, with their metadata (nothing read), and what could not be listed.
    fn walk(&self, at: At<'_>) -> (BTreeMap<PathBuf, fs::Metadata>, Vec<String>) {
        let mut found = BTreeMap::new();
        let mut unreadable = Vec::new();
        for rule in &self.rules {
            rule.walk(at, &mut found, &mut unreadable);
        }
        (found, unreadable)
    }

    /// The agent's turn begins: remember the protected paths as they are (as the verifier, or
    /// the capture, left them).
    pub fn begin_turn(&self) -> Result<(), Moved> {
        if !self.has_rules() {
            return Ok(());
        }
        let now = self.now(self.root.check()?);
        if let Ok(mut turn) = self.turn.lock() {
            *turn = Some(now);
        }
        Ok(())
    }

    /// The agent's turn has ended: find what it changed under the protected paths (caches aside,
    /// and what it only put back as it was before the loop), then put every protected path back
    /// as it was before the loop.
    pub fn end_turn(&self) -> Result<Vec<Finding>, Moved> {
        if !self.has_rules() {
            return Ok(Vec::new());
        }
        let at = self.root.check()?;
        let began = self.turn.lock().ok().and_then(|mut t| t.take()).unwrap_or_else(|| self.before.clone());
        let now = self.now(at);
        let (mut changes, caches) = differences(at, &began, &now);
        changes.retain(|(rel, _)| self.before.nodes.get(rel) != now.nodes.get(rel));
        if !caches.is_empty() {
            let paths: Vec<String> = caches.iter().map(|p| shown(p)).collect();
            tracing::info!(paths = %paths.join(", "), "put back the caches the agent's turn changed under protected paths");
        }
        let failed = self.restore(at, &now);
        Ok(self.findings(changes, &failed))
    }

    /// Right before the verifier runs: the protected paths must be as they were before the
    /// loop. What was not (nothing, unless a process outlived its command) is put back and
    /// returned; `Err` says why the verifier must not run.
    pub fn before_verifier(&self) -> Result<Vec<Finding>, String> {
        if !self.has_rules() {
            return Ok(Vec::new());
        }
        let at = self.root.check().map_err(|e| e.to_string())?;
        let now = self.now(at);
        if same(&self.before, &now) {
            return Ok(Vec::new());
        }
        let (changes, _) = differences(at, &self.before, &now);
        let failed = self.restore(at, &now);
        if let Some((path, why)) = failed.iter().next() {
            return Err(format!("`{}` could not be put back as it was before the loop ({why})", shown(path)));
        }
        Ok(self.findings(changes, &failed))
    }

    /// Put every protected path back as it was before the loop, saying what was not (caches
    /// aside): at the end of the loop, and at its cap.
    pub fn restore_all(&self) -> Result<Vec<Finding>, Moved> {
        if !self.has_rules() {
            return Ok(Vec::new());
        }
        let at = self.root.check()?;
        let now = self.now(at);
        if same(&self.before, &now) {
            return Ok(Vec::new());
        }
        let (changes, _) = differences(at, &self.before, &now);
        let failed = self.restore(at, &now);
        Ok(self.findings(changes, &failed))
    }

    /// Whether `rel` is (or is under) one of redraft's configuration files.
    fn is_config(&self, rel: &Path) -> bool {
        self.config.iter().any(|c| rel.starts_with(c))
    }

    /// Each change, with what was done about it.
    fn findings(&self, changes: Vec<(PathBuf, Change)>, failed: &BTreeMap<PathBuf, String>) -> Vec<Finding> {
        changes
            .into_iter()
            .map(|(rel, change)| {
                let failure = failed.iter().find(|(p, _)| p.starts_with(&rel) || rel.starts_with(p)).map(|(_, w)| w);
                let (added, is) = if self.is_config(&rel) {
                    (
                        "would be redraft's configuration (the next loop would read it)",
                        "is redraft's configuration (the next loop reads it)",
                    )
                } else {
                    ("matches a protected pattern", "is protected")
                };
                let text = match (&change, failure) {
                    (Change::Added(kind), None) => {
                        format!("`{}` {added} and was added{}; it has been removed.", shown(&rel), kind_of(kind))
                    }
                    (Change::Added(kind), Some(why)) => format!(
                        "`{}` {added} and was added{}; it could not be removed ({why}).",
                        shown(&rel),
                        kind_of(kind)
                    ),
                    (Change::Changed(what), None) => {
                        format!("`{}` {is} and was {what}; it has been put back.", shown(&rel))
                    }
                    (Change::Changed(what), Some(why)) => {
                        format!("`{}` {is} and was {what}; it could not be put back ({why}).", shown(&rel))
                    }
                };
                Finding { path: shown(&rel), text }
            })
            .collect()
    }

    /// Make the protected paths what they were before the loop; `now` is what they are. Returns
    /// the paths that could not be put back, with why.
    fn restore(&self, at: At<'_>, now: &Listing) -> BTreeMap<PathBuf, String> {
        let mut failed = BTreeMap::new();
        if same(&self.before, now) {
            return failed;
        }
        // Parents first: a directory is there before what goes in it.
        for (rel, node) in &self.before.nodes {
            let mtime = self.before.mtimes.get(rel);
            if now.nodes.get(rel) != Some(node) {
                if let Err(e) = self.put_back(at, rel, node, mtime.copied()) {
                    failed.insert(rel.clone(), e.to_string());
                }
            } else if let Some(was) = mtime
                && now.mtimes.get(rel) != Some(was)
            {
                // The bytes are right, only the time is not. A file with other hard links (one
                // outside, maybe) gets a copy of its own rather than a new time on a shared inode.
                let path = at.join(rel);
                let shared = fs::symlink_metadata(&path).is_ok_and(|m| m.nlink() > 1);
                let result = if shared { self.put_back(at, rel, node, Some(*was)) } else { set_mtime(&path, *was) };
                if let Err(e) = result {
                    // A time this file system will not take is no reason to stop.
                    tracing::debug!(path = %shown(rel), "cannot put back the modification time: {e}");
                }
            }
        }
        // What was not there is removed: the topmost path of each added tree.
        let mut removed: BTreeSet<PathBuf> = BTreeSet::new();
        for rel in self.walk(at).0.keys() {
            if self.before.nodes.contains_key(rel) || rel.ancestors().skip(1).any(|a| removed.contains(a)) {
                continue;
            }
            let result = match reachable(at, rel) {
                Some(path) => remove_tree(&path, at),
                None => Ok(()),
            };
            match result {
                Ok(()) => {
                    removed.insert(rel.clone());
                }
                Err(e) => {
                    failed.insert(rel.clone(), e.to_string());
                }
            }
        }
        // Directories get their own modes last (a read-only one was writable meanwhile).
        for (rel, node) in self.before.nodes.iter().rev() {
            if let Node::Dir { mode } = node {
                let path = at.join(rel);
                let result = match fs::symlink_metadata(&path) {
                    Ok(meta) if meta.is_dir() && !at.foreign(&path, &meta) && mode_of(&meta) != *mode => {
                        fs::set_permissions(&path, fs::Permissions::from_mode(*mode))
                    }
                    _ => Ok(()),
                };
                if let Err(e) = result {
                    failed.insert(rel.clone(), e.to_string());
                }
            }
        }
        // Checked, not assumed.
        let after = self.now(at);
        for (rel, node) in &self.before.nodes {
            if after.nodes.get(rel) != Some(node) && !failed.contains_key(rel) {
                failed.insert(rel.clone(), "it still differs".to_owned());
            }
        }
        for rel in after.nodes.keys() {
            if !self.before.nodes.contains_key(rel) && !failed.contains_key(rel) {
                failed.insert(rel.clone(), "it is still there".to_owned());
            }
        }
        failed
    }

    /// Put `node` back at `rel`, replacing whatever is there (a symlink is replaced, never
    /// written through; nothing on another file system is replaced).
    fn put_back(&self, at: At<'_>, rel: &Path, node: &Node, mtime: Option<SystemTime>) -> io::Result<()> {
        if let Node::Dir { mode } = node {
            let path = real_dirs(at, rel, InTheWay::Replace)?;
            // Writable while its contents are put back; its own mode comes last.
            let meta = fs::symlink_metadata(&path)?;
            let usable = mode | 0o700;
            if mode_of(&meta) != usable {
                fs::set_permissions(&path, fs::Permissions::from_mode(usable))?;
            }
            return Ok(());
        }
        let parent = real_dirs(at, rel.parent().unwrap_or(Path::new("")), InTheWay::Replace)?;
        let name = rel.file_name().ok_or_else(|| io::Error::new(ErrorKind::InvalidInput, "no file name"))?;
        let path = parent.join(name);
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => remove_tree(&path, at)?,
            Ok(_) if !matches!(node, Node::File { .. }) => fs::remove_file(&path)?,
            _ => {}
        }
        match node {
            Node::File { mode, sha } => {
                let bytes = self.contents.get(sha).ok_or_else(|| io::Error::other("its content was not recorded"))?;
                // Written beside it, then renamed over it: the rename replaces a symlink or a
                // pipe in the way. The mode is set on the new file, whatever the umask.
                let mut file = tempfile::Builder::new().prefix(".redraft-restore-").tempfile_in(&parent)?;
                file.write_all(bytes)?;
                file.as_file().set_permissions(fs::Permissions::from_mode(*mode))?;
                if let Some(mtime) = mtime {
                    file.as_file().set_modified(mtime)?;
                }
                file.persist(&path).map_err(|e| e.error)?;
            }
            Node::Link(target) => std::os::unix::fs::symlink(target, &path)?,
            Node::Special | Node::Unreadable | Node::Large { .. } => {
                return Err(io::Error::other("a special file cannot be recreated"));
            }
            Node::Dir { .. } => {}
        }
        Ok(())
    }
}

/// What happened to a protected path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    /// Added where a glob matches: "a file", "a directory", …
    Added(&'static str),
    /// Changed, deleted or replaced: "changed", "deleted", "replaced by a symlink", …
    Changed(String),
}

/// Whether two listings are the same paths with the same nodes.
fn same(a: &Listing, b: &Listing) -> bool {
    a.nodes == b.nodes && a.mtimes == b.mtimes && b.unreadable.is_empty()
}

/// Whether `rel` is inside a cache directory.
fn in_cache(rel: &Path) -> bool {
    rel.iter().any(|part| CACHE_DIRS.iter().any(|cache| part == *cache))
}

/// What differs from `was` to `is`, outside caches (a whole added or deleted tree once, by its
/// topmost path), and the paths that differ inside caches.
fn differences(at: At<'_>, was: &Listing, is: &Listing) -> (Vec<(PathBuf, Change)>, Vec<PathBuf>) {
    let paths: BTreeSet<&PathBuf> = was.nodes.keys().chain(is.nodes.keys()).collect();
    let mut changes = Vec::new();
    let mut caches = Vec::new();
    // Paths whose whole tree is already told (added, deleted, or no longer a directory).
    let mut told: BTreeSet<&Path> = BTreeSet::new();
    for rel in paths {
        let (old, new) = (was.nodes.get(rel), is.nodes.get(rel));
        if old == new {
            continue;
        }
        if in_cache(rel) {
            caches.push(rel.clone());
            continue;
        }
        if rel.ancestors().skip(1).any(|a| told.contains(a)) {
            continue;
        }
        let change = match (old, new) {
            (None, Some(node)) => {
                told.insert(rel);
                Change::Added(node.kind())
            }
            (Some(_), None) => {
                told.insert(rel);
                Change::Changed(gone(at, rel))
            }
            (Some(old), Some(new)) => {
                if matches!(old, Node::Dir { .. }) != matches!(new, Node::Dir { .. }) {
                    told.insert(rel);
                }
                Change::Changed(changed(old, new))
            }
            (None, None) => continue,
        };
        changes.push((rel.clone(), change));
    }
    (changes, caches)
}

/// What was added, after "was added": nothing for a file.
fn kind_of(kind: &str) -> String {
    if kind == "a file" { String::new() } else { format!(" ({kind})") }
}

/// How `old` became `new`.
fn changed(old: &Node, new: &Node) -> String {
    match (old, new) {
        (Node::File { sha: a, .. }, Node::File { sha: b, .. }) if a != b => "changed".to_owned(),
        (Node::File { .. } | Node::Large { .. }, Node::Large { .. }) | (Node::Large { .. }, Node::File { .. }) => {
            "changed".to_owned()
        }
        (Node::File { mode: a, .. }, Node::File { mode: b, .. }) | (Node::Dir { mode: a }, Node::Dir { mode: b }) => {
            format!("given mode `{b:o}` instead of `{a:o}`")
        }
        (Node::Link(_), Node::Link(target)) => format!("replaced by a symlink to `{}`", shown(target)),
        (_, Node::Unreadable) => "made unreadable".to_owned(),
        (_, new) => format!("replaced by {}", new.kind()),
    }
}

/// Why a protected path is gone: deleted, or one of its directories is no longer a directory.
fn gone(at: At<'_>, rel: &Path) -> String {
    let mut dir = PathBuf::new();
    for part in rel.parent().into_iter().flat_map(Path::iter) {
        dir.push(part);
        let path = at.join(&dir);
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() && at.foreign(&path, &meta) => {
                return format!("hidden (its directory `{}` is now another file system)", shown(&dir));
            }
            Ok(meta) if meta.is_dir() => {}
            Ok(meta) if meta.file_type().is_symlink() => {
                return format!("moved away (its directory `{}` was replaced by a symlink)", shown(&dir));
            }
            Ok(_) => return format!("deleted (its directory `{}` was replaced by a file)", shown(&dir)),
            Err(_) => return "deleted".to_owned(),
        }
    }
    "deleted".to_owned()
}

/// How [`listing`] reads files.
enum Reading<'a> {
    /// Before the loop: every file whole, its bytes kept here.
    Capture(&'a mut HashMap<Sha, Vec<u8>>),
    /// Later: a file larger than [`HASH_MAX`] is read only where a protected file of its size
    /// was before the loop.
    Compare(&'a Protected),
}

/// The listing of the paths `found` (relative to the working directory, with their metadata).
fn listing(at: At<'_>, found: BTreeMap<PathBuf, fs::Metadata>, mut reading: Reading<'_>) -> Listing {
    let mut out = Listing::default();
    for (rel, meta) in found {
        let path = at.join(&rel);
        let kind = meta.file_type();
        let node = if kind.is_symlink() {
            match fs::read_link(&path) {
                Ok(target) => Node::Link(target),
                Err(e) => {
                    out.unreadable.push(format!("`{}`: {e}", shown(&rel)));
                    Node::Unreadable
                }
            }
        } else if kind.is_dir() {
            Node::Dir { mode: mode_of(&meta) }
        } else if kind.is_file() {
            if let Ok(mtime) = meta.modified() {
                out.mtimes.insert(rel.clone(), mtime);
            }
            let read = match &mut reading {
                Reading::Capture(keep) => hash_file(&path, Some(keep)),
                Reading::Compare(protected) if meta.len() > HASH_MAX && !protected.had_size(&rel, meta.len()) => {
                    let stamp = (meta.ino(), meta.mtime(), meta.mtime_nsec(), meta.ctime(), meta.ctime_nsec());
                    out.nodes.insert(rel, Node::Large { mode: mode_of(&meta), size: meta.len(), stamp });
                    continue;
                }
                Reading::Compare(_) => hash_file(&path, None),
            };
            match read {
                Ok(sha) => Node::File { mode: mode_of(&meta), sha },
                Err(e) => {
                    out.unreadable.push(format!("`{}`: {e}", shown(&rel)));
                    Node::Unreadable
                }
            }
        } else {
            Node::Special
        };
        out.nodes.insert(rel, node);
    }
    out
}

impl Protected {
    /// Whether a protected file of `size` bytes was at `rel` before the loop.
    fn had_size(&self, rel: &Path, size: u64) -> bool {
        match self.before.nodes.get(rel) {
            Some(Node::File { sha, .. }) => self.contents.get(sha).is_some_and(|b| b.len() as u64 == size),
            _ => false,
        }
    }
}

/// The SHA-256 of a regular file, read in chunks; with `keep`, its bytes are kept there too.
fn hash_file(path: &Path, keep: Option<&mut HashMap<Sha, Vec<u8>>>) -> io::Result<Sha> {
    let (mut file, _) = open_regular(path)?;
    let mut hasher = Sha256::new();
    let mut bytes = Vec::new();
    let mut chunk = vec![0; 64 * 1024];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&chunk[..n]);
        if keep.is_some() {
            bytes.extend_from_slice(&chunk[..n]);
        }
    }
    let sha: Sha = hasher.finalize().into();
    if let Some(keep) = keep {
        keep.entry(sha).or_insert(bytes);
    }
    Ok(sha)
}

/// Set a regular file's modification time (opened for reading: the owner may set times).
fn set_mtime(path: &Path, mtime: SystemTime) -> io::Result<()> {
    open_regular(path)?.0.set_modified(mtime)
}

/// The full path of `rel` when every directory on the way to it is a real directory of the
/// working directory's file system, not a symlink.
fn reachable(at: At<'_>, rel: &Path) -> Option<PathBuf> {
    let mut dir = PathBuf::new();
    for part in rel.parent().into_iter().flat_map(Path::iter) {
        dir.push(part);
        let path = at.join(&dir);
        if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && !at.foreign(&path, &m)) {
            return None;
        }
    }
    Some(at.join(&dir.join(rel.file_name()?)))
}

/// Remove `path` and, when it is a real directory, everything under it — made writable on the
/// way — never following a symlink, and never into another file system or mount than the
/// working directory's (a mount point is an error, left as it is).
fn remove_tree(path: &Path, at: At<'_>) -> io::Result<()> {
    if !fs::symlink_metadata(path)?.is_dir() {
        return fs::remove_file(path);
    }
    // Directories to empty (`false`), then to remove once emptied (`true`): a stack, not
    // recursion, so a tree of any depth is removed.
    let mut dirs = vec![(path.to_owned(), false)];
    while let Some((dir, emptied)) = dirs.pop() {
        if emptied {
            fs::remove_dir(&dir)?;
            continue;
        }
        let meta = fs::symlink_metadata(&dir)?;
        if at.foreign(&dir, &meta) {
            return Err(io::Error::other(
                "it is another file system (a mount point), which redraft does not remove or delete anything in; unmount it",
            ));
        }
        if mode_of(&meta) & 0o700 != 0o700 {
            fs::set_permissions(&dir, fs::Permissions::from_mode(mode_of(&meta) | 0o700))?;
        }
        dirs.push((dir.clone(), true));
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                dirs.push((entry.path(), false));
            } else {
                fs::remove_file(entry.path())?;
            }
        }
    }
    Ok(())
}

fn mode_of(meta: &fs::Metadata) -> u32 {
    meta.permissions().mode() & 0o7777
}

/// A change to the protected paths and what was done about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Relative to the working directory, as shown to people.
    pub path: String,
    /// What was found and what was done, e.g. "`tests/a.sh` is protected and was changed; it
    /// has been put back."
    pub text: String,
}

impl Finding {
    /// The finding as an issue of the iteration, addressed to the agent.
    pub fn issue(&self) -> Issue {
        Issue::new(
            self.path.clone(),
            PROTECTED_FILE_MODIFIED,
            format!("{} Change the code under test, not the tests or the verifier.", self.text),
        )
    }
}

/// The evaluator side of protection. The protected paths were already checked and put back
/// when the workspace was read, before any evaluator ran, so the verifier always judges the code
/// against the original tests; this reports what the agent changed.
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
mod tests;
