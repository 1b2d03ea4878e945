//! `--protect` globs: what they match, and the walk that finds it without following a
//! symlink. A glob is relative to the working directory; `*` and `?` stop at `/`, `**` crosses
//! directories, and a glob that matches a directory protects it and everything under it
//! (`tests/**` protects `tests` itself too). Names are matched as bytes, so a name that is not
//! UTF-8 is matched like any other. Redraft's own configuration files are protected by rules of
//! their own ([`Rule::exact`]), which name one path.
//!
//! Caches of protected files are protected: a protected Python source `DIR/NAME.py` protects its
//! bytecode `DIR/__pycache__/NAME.*.pyc`, which Python (and pytest's rewritten tests) run instead
//! of the source when its stamp matches — so `--protect 'tests/test_*.py'` covers a `.pyc` forged
//! for `tests/test_calc.py` as `tests/**` does. What stands at `DIR/__pycache__` beside a
//! protected source when it is not a directory of its own — a link, which Python follows to
//! bytecode elsewhere, or a mount point — is protected as well.
//!
//! The walk stays on the working directory's file system: a directory on another one (a mount
//! point) is listed, never walked into.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use anyhow::{Result, anyhow};
use globset::{GlobBuilder, GlobMatcher};

use crate::until::names::shown;
use crate::until::root::At;

/// Never protected: redraft's own reports live there.
const OWN_DIR: &str = ".redraft";

/// Not walked into from the root unless a glob starts inside them (`.git/hooks/*`).
const SKIPPED: [&str; 2] = [".redraft", ".git"];

/// Python's bytecode cache directory.
const PYCACHE: &str = "__pycache__";

/// One `--protect` glob, or one configuration file, relative to the working directory.
#[derive(Debug)]
pub struct Rule {
    /// As the user wrote it (or the configuration file's path).
    pub text: String,
    pattern: Pattern,
    /// For a glob `dir/**`: `dir`, which it protects too.
    dir: Option<PathBuf>,
    /// The leading directories without glob characters: where the walk starts.
    base: PathBuf,
}

/// What a rule matches.
#[derive(Debug)]
enum Pattern {
    Glob(GlobMatcher),
    /// One path, and what is under it.
    Exact(PathBuf),
}

impl Rule {
    pub fn parse(root: &Path, text: &str) -> Result<Self> {
        let outside = || {
            anyhow!(
                "`--protect {text}` is outside the working directory `{}`\nhint: protected files are inside the working directory, named relative to it, e.g. `--protect 'tests/**'`",
                root.display()
            )
        };
        let path = Path::new(text);
        let relative = if path.is_absolute() { path.strip_prefix(root).map_err(|_| outside())? } else { path };
        let mut clean = PathBuf::new();
        for component in relative.components() {
            match component {
                Component::Normal(part) => clean.push(part),
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => return Err(outside()),
            }
        }
        if clean.as_os_str().is_empty() {
            return Err(anyhow!(
                "`--protect {text}` names the whole working directory\nhint: name what the agent must not change, e.g. `--protect 'tests/**'`"
            ));
        }
        let clean_text = clean.to_str().ok_or_else(|| anyhow!("`--protect {text}` is not valid UTF-8"))?;
        let pattern = GlobBuilder::new(clean_text)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| anyhow!("`--protect {text}` is not a glob: {}", e.kind()))?
            .compile_matcher();
        let glob_chars = |part: &std::ffi::OsStr| part.to_string_lossy().contains(['*', '?', '[', '{', '\\']);
        let base: PathBuf = clean.iter().take_while(|part| !glob_chars(part)).collect();
        let dir = clean_text.strip_suffix("/**").map(PathBuf::from).filter(|d| !d.iter().any(glob_chars));
        Ok(Self { text: text.to_owned(), pattern: Pattern::Glob(pattern), dir, base })
    }

    /// A rule protecting the one path `rel` (relative to the working directory, no `..`), there
    /// or not, and what may be put under it.
    pub fn exact(rel: &Path) -> Self {
        Self { text: shown(rel), pattern: Pattern::Exact(rel.to_owned()), dir: None, base: rel.to_owned() }
    }

    /// Whether `rel` is protected by this rule: it matches `rel` or one of its directories, or
    /// `rel` is the Python bytecode of a source it matches.
    pub fn matches(&self, rel: &Path) -> bool {
        !rel.starts_with(OWN_DIR) && (self.covers(rel) || source_of(rel).iter().any(|source| self.covers(source)))
    }

    /// Whether the rule matches `rel` or one of its directories.
    fn covers(&self, rel: &Path) -> bool {
        match &self.pattern {
            Pattern::Exact(path) => rel.starts_with(path),
            Pattern::Glob(glob) => {
                self.dir.as_deref() == Some(rel)
                    || rel.ancestors().filter(|a| !a.as_os_str().is_empty()).any(|a| glob.is_match(a))
            }
        }
    }

    /// Add what this rule protects now to `out` — files, symlinks, directories, anything —
    /// reached through real directories of the working directory's file system only, with its
    /// metadata (never followed). A directory that cannot be listed is named in `unreadable`, and
    /// the walk goes on.
    pub fn walk(&self, at: At<'_>, out: &mut BTreeMap<PathBuf, fs::Metadata>, unreadable: &mut Vec<String>) {
        self.walk_from(at, &self.base, out, unreadable);
        // The bytecode of a source named without a glob is beside it, where the walk does not go.
        if let Some(cache) = self.cache_dir() {
            self.walk_from(at, &cache, out, unreadable);
        }
    }

    /// For a rule naming one `DIR/NAME.py` (no glob): `DIR/__pycache__`.
    fn cache_dir(&self) -> Option<PathBuf> {
        let named = match &self.pattern {
            Pattern::Exact(path) => path == &self.base,
            Pattern::Glob(glob) => glob.is_match(&self.base),
        };
        let name = self.base.file_name()?;
        (named && name.as_bytes().ends_with(b".py")).then(|| self.base.with_file_name(PYCACHE))
    }

    /// Walk from `base`: through its directories, then what is under it.
    fn walk_from(
        &self,
        at: At<'_>,
        base: &Path,
        out: &mut BTreeMap<PathBuf, fs::Metadata>,
        unreadable: &mut Vec<String>,
    ) {
        let mut rel = PathBuf::new();
        for part in base {
            rel.push(part);
            let path = at.join(&rel);
            match fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_dir() && !at.foreign(&path, &meta) => {}
                Ok(meta) => {
                    // What stands where a named source's bytecode goes, not a directory of its
                    // own (a link Python would follow, a mount point), is protected too while the
                    // source is there.
                    let cache = self.cache_dir().as_deref() == Some(rel.as_path())
                        && fs::symlink_metadata(at.join(&self.base)).is_ok_and(|m| !m.is_dir());
                    if self.matches(&rel) || cache {
                        out.insert(rel, meta);
                    }
                    return;
                }
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => return,
                Err(e) => {
                    unreadable.push(format!("`{}`: {e}", shown(&rel)));
                    return;
                }
            }
        }
        if !rel.as_os_str().is_empty()
            && self.matches(&rel)
            && let Ok(meta) = fs::symlink_metadata(at.join(&rel))
        {
            out.insert(rel.clone(), meta);
        }
        self.visit(at, &rel, out, unreadable);
    }

    /// Add what this rule protects under the directory `top` (a stack, not recursion: a tree of
    /// any depth is walked).
    fn visit(&self, at: At<'_>, top: &Path, out: &mut BTreeMap<PathBuf, fs::Metadata>, unreadable: &mut Vec<String>) {
        let mut dirs = vec![top.to_owned()];
        while let Some(dir) = dirs.pop() {
            self.list(at, &dir, out, unreadable, &mut dirs);
        }
    }

    /// Add what this rule protects in the directory `dir`, and its subdirectories to `dirs`.
    fn list(
        &self,
        at: At<'_>,
        dir: &Path,
        out: &mut BTreeMap<PathBuf, fs::Metadata>,
        unreadable: &mut Vec<String>,
        dirs: &mut Vec<PathBuf>,
    ) {
        let entries = match fs::read_dir(at.join(dir)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return,
            Err(e) => {
                unreadable
                    .push(format!("`{}`: {e}", if dir.as_os_str().is_empty() { ".".to_owned() } else { shown(dir) }));
                return;
            }
        };
        let mut listed = Vec::new();
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    unreadable.push(format!("`{}`: {e}", shown(dir)));
                    continue;
                }
            };
            let name = entry.file_name();
            if dir.as_os_str().is_empty() && SKIPPED.iter().any(|s| name == *s) {
                continue;
            }
            let rel = dir.join(&name);
            // The entry's own metadata: a symlink to a directory is a symlink.
            let path = at.join(&rel);
            match fs::symlink_metadata(&path) {
                Ok(meta) => {
                    // Another file system (a mount point) is listed, not walked into.
                    let walk_into = meta.is_dir() && !at.foreign(&path, &meta);
                    listed.push((rel, meta, walk_into));
                }
                Err(e) => unreadable.push(format!("`{}`: {e}", shown(&rel))),
            }
        }
        // Whether this directory holds a Python source the rule protects: then what stands at
        // `__pycache__`, when it is not a directory of its own (a link Python would follow to
        // bytecode elsewhere, a mount point), is protected too.
        let sources = listed.iter().any(|(rel, meta, _)| {
            !meta.is_dir() && rel.file_name().is_some_and(|n| n.as_bytes().ends_with(b".py")) && self.covers(rel)
        });
        for (rel, meta, walk_into) in listed {
            let cache = sources && !walk_into && rel.file_name() == Some(OsStr::new(PYCACHE));
            if self.matches(&rel) || cache {
                out.insert(rel.clone(), meta);
            }
            if walk_into {
                dirs.push(rel);
            }
        }
    }
}

/// The Python sources whose bytecode `rel` may be: for `DIR/__pycache__/NAME.TAG.pyc`,
/// `DIR/NAME.py` for each way of reading `NAME.TAG` (a tag is `cpython-311`, `cpython-311.opt-1`,
/// `cpython-311-pytest-8.3.2`…; a script's name may hold dots too).
fn source_of(rel: &Path) -> Vec<PathBuf> {
    let (Some(name), Some(cache)) = (rel.file_name(), rel.parent()) else { return Vec::new() };
    if cache.file_name() != Some(OsStr::new(PYCACHE)) {
        return Vec::new();
    }
    let Some(stem) = name.as_bytes().strip_suffix(b".pyc") else { return Vec::new() };
    let dir = cache.parent().unwrap_or(Path::new(""));
    stem.iter()
        .enumerate()
        .filter(|&(i, &b)| b == b'.' && i > 0)
        .map(|(i, _)| {
            let mut source = stem[..i].to_vec();
            source.extend_from_slice(b".py");
            dir.join(OsStr::from_bytes(&source))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    #[test]
    fn globs_match_like_a_shell_and_a_directory_protects_what_is_under_it() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["tests/a.sh", "tests/deep/b.sh", "tests/deep/c.txt", "src/d.sh", "e.sh"] {
            let path = dir.path().join(f);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, f).unwrap();
        }
        fs::write(dir.path().join(OsStr::from_bytes(b"tests/f\xff.sh")), "not UTF-8").unwrap();
        fs::create_dir_all(dir.path().join(".redraft")).unwrap();
        fs::write(dir.path().join(".redraft/x.sh"), "reports").unwrap();
        let root = crate::until::root::Root::pin(dir.path()).unwrap();
        let check = |glob: &str, want: &[&str]| {
            let (mut found, mut unreadable) = (BTreeMap::new(), Vec::new());
            Rule::parse(root.path(), glob).unwrap().walk(root.check().unwrap(), &mut found, &mut unreadable);
            let found: Vec<String> = found.keys().map(|p| shown(p)).collect();
            assert_eq!(found, want, "--protect {glob}");
            assert!(unreadable.is_empty());
        };
        let all = ["tests", "tests/a.sh", "tests/deep", "tests/deep/b.sh", "tests/deep/c.txt", "\"tests/f\\xff.sh\""];
        check("tests/**", &all);
        check("tests", &all);
        check("tests/", &all);
        check("./tests/*.sh", &["tests/a.sh", "\"tests/f\\xff.sh\""]);
        check("*.sh", &["e.sh"]);
        check("**/*.sh", &["e.sh", "src/d.sh", "tests/a.sh", "tests/deep/b.sh", "\"tests/f\\xff.sh\""]);
        check("tests/deep/c.txt", &["tests/deep/c.txt"]);
        check("tests/deep/**", &["tests/deep", "tests/deep/b.sh", "tests/deep/c.txt"]);
        let absolute = root.path().join("src/*.sh");
        check(absolute.to_str().unwrap(), &["src/d.sh"]);
        check("*.md", &[]);
    }

    #[test]
    fn a_protected_python_source_protects_its_bytecode() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "tests/test_calc.py",
            "tests/helper.py",
            "tests/__pycache__/test_calc.cpython-311.pyc",
            "tests/__pycache__/test_calc.cpython-311.opt-1.pyc",
            "tests/__pycache__/test_calc.cpython-311-pytest-8.3.2.pyc",
            "tests/__pycache__/helper.cpython-311.pyc",
            "tests/__pycache__/test_other.cpython-311.pyc",
            "tests/__pycache__/test_calc.txt",
            "src/__pycache__/test_calc.cpython-311.pyc",
        ] {
            let path = dir.path().join(f);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, f).unwrap();
        }
        let root = crate::until::root::Root::pin(dir.path()).unwrap();
        let check = |rule: Rule, want: &[&str]| {
            let (mut found, mut unreadable) = (BTreeMap::new(), Vec::new());
            rule.walk(root.check().unwrap(), &mut found, &mut unreadable);
            let found: Vec<String> = found.keys().map(|p| shown(p)).collect();
            assert_eq!(found, want, "{}", rule.text);
        };
        let calc = [
            "tests/__pycache__/test_calc.cpython-311-pytest-8.3.2.pyc",
            "tests/__pycache__/test_calc.cpython-311.opt-1.pyc",
            "tests/__pycache__/test_calc.cpython-311.pyc",
            "tests/test_calc.py",
        ];
        check(Rule::parse(root.path(), "tests/test_calc.py").unwrap(), &calc);
        check(Rule::exact(Path::new("tests/test_calc.py")), &calc);
        // By name: the bytecode of any source the glob matches, there or not.
        let mut tests = calc[..3].to_vec();
        tests.extend(["tests/__pycache__/test_other.cpython-311.pyc", "tests/test_calc.py"]);
        check(Rule::parse(root.path(), "tests/test_*.py").unwrap(), &tests);
        let mut all = vec!["tests/__pycache__/helper.cpython-311.pyc"];
        all.extend(&tests[..4]);
        all.extend(["tests/helper.py", "tests/test_calc.py"]);
        check(Rule::parse(root.path(), "tests/*.py").unwrap(), &all);
        check(Rule::parse(root.path(), "tests/**/*.py").unwrap(), &all);
        assert_eq!(
            source_of(Path::new("a/__pycache__/x.y.cpython-311.pyc")),
            [Path::new("a/x.py"), Path::new("a/x.y.py")]
        );
        assert!(source_of(Path::new("a/x.cpython-311.pyc")).is_empty());
        assert!(source_of(Path::new("__pycache__/.cpython-311.pyc")).is_empty());
    }

    #[test]
    fn a_link_where_a_protected_sources_bytecode_goes_is_protected() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        for f in ["tests/test_calc.py", "src/calc.py"] {
            let path = dir.path().join(f);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, f).unwrap();
        }
        std::os::unix::fs::symlink(outside.path(), dir.path().join("tests/__pycache__")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("src/__pycache__")).unwrap();
        let root = crate::until::root::Root::pin(dir.path()).unwrap();
        let check = |rule: Rule, want: &[&str]| {
            let (mut found, mut unreadable) = (BTreeMap::new(), Vec::new());
            rule.walk(root.check().unwrap(), &mut found, &mut unreadable);
            let found: Vec<String> = found.keys().map(|p| shown(p)).collect();
            assert_eq!(found, want, "{}", rule.text);
        };
        let both = ["tests/__pycache__", "tests/test_calc.py"];
        check(Rule::parse(root.path(), "tests/test_*.py").unwrap(), &both);
        check(Rule::parse(root.path(), "tests/test_calc.py").unwrap(), &both);
        check(Rule::exact(Path::new("tests/test_calc.py")), &both);
        // Beside no protected source, it is not protected.
        check(Rule::parse(root.path(), "tests/*.txt").unwrap(), &[]);
        check(Rule::parse(root.path(), "src/other.py").unwrap(), &[]);
    }

    #[test]
    fn globs_outside_the_working_directory_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = Rule::parse(dir.path(), "tests/[").unwrap_err().to_string();
        assert!(err.contains("`--protect tests/[` is not a glob"), "{err}");
        for outside in ["../x", "tests/../../x", "/etc/hostname"] {
            let err = Rule::parse(dir.path(), outside).unwrap_err().to_string();
            assert!(err.contains(&format!("`--protect {outside}` is outside the working directory")), "{err}");
            assert!(err.contains("hint:"), "{err}");
        }
        let err = Rule::parse(dir.path(), ".").unwrap_err().to_string();
        assert!(err.contains("names the whole working directory"), "{err}");
    }
}
