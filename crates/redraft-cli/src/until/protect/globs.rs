//! `--protect` globs: what they match, and the walk that finds it without following a
//! symlink. A glob is relative to the working directory; `*` and `?` stop at `/`, `**` crosses
//! directories, and a glob that matches a directory protects it and everything under it
//! (`tests/**` protects `tests` itself too). Names are matched as bytes, so a name that is not
//! UTF-8 is matched like any other.

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use anyhow::{Result, anyhow};
use globset::{GlobBuilder, GlobMatcher};

use crate::until::names::shown;

/// Never protected: redraft's own reports live there.
const OWN_DIR: &str = ".redraft";

/// Not walked into from the root unless a glob starts inside them (`.git/hooks/*`).
const SKIPPED: [&str; 2] = [".redraft", ".git"];

/// One `--protect` glob, relative to the working directory.
#[derive(Debug)]
pub struct Rule {
    /// As the user wrote it.
    pub text: String,
    pattern: GlobMatcher,
    /// For a glob `dir/**`: `dir`, which it protects too.
    dir: Option<PathBuf>,
    /// The leading directories without glob characters: where the walk starts.
    base: PathBuf,
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
        Ok(Self { text: text.to_owned(), pattern, dir, base })
    }

    /// Whether `rel` is protected by this rule: the glob matches it or one of its directories.
    pub fn matches(&self, rel: &Path) -> bool {
        !rel.starts_with(OWN_DIR)
            && (self.dir.as_deref() == Some(rel)
                || rel.ancestors().filter(|a| !a.as_os_str().is_empty()).any(|a| self.pattern.is_match(a)))
    }

    /// Add what this rule protects now to `out` — files, symlinks, directories, anything —
    /// reached through real directories only, with its metadata (never followed). A directory
    /// that cannot be listed is named in `unreadable`, and the walk goes on.
    pub fn walk(&self, root: &Path, out: &mut BTreeMap<PathBuf, fs::Metadata>, unreadable: &mut Vec<String>) {
        let mut rel = PathBuf::new();
        for part in &self.base {
            rel.push(part);
            match fs::symlink_metadata(root.join(&rel)) {
                Ok(meta) if meta.is_dir() => {}
                Ok(meta) => {
                    if self.matches(&rel) {
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
            && let Ok(meta) = fs::symlink_metadata(root.join(&rel))
        {
            out.insert(rel.clone(), meta);
        }
        self.visit(root, &rel, out, unreadable);
    }

    fn visit(&self, root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, fs::Metadata>, unreadable: &mut Vec<String>) {
        let entries = match fs::read_dir(root.join(dir)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return,
            Err(e) => {
                unreadable
                    .push(format!("`{}`: {e}", if dir.as_os_str().is_empty() { ".".to_owned() } else { shown(dir) }));
                return;
            }
        };
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
            let meta = match fs::symlink_metadata(root.join(&rel)) {
                Ok(meta) => meta,
                Err(e) => {
                    unreadable.push(format!("`{}`: {e}", shown(&rel)));
                    continue;
                }
            };
            let is_dir = meta.is_dir();
            if self.matches(&rel) {
                out.insert(rel.clone(), meta);
            }
            if is_dir {
                self.visit(root, &rel, out, unreadable);
            }
        }
    }
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
        let check = |glob: &str, want: &[&str]| {
            let (mut found, mut unreadable) = (BTreeMap::new(), Vec::new());
            Rule::parse(dir.path(), glob).unwrap().walk(dir.path(), &mut found, &mut unreadable);
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
        let absolute = dir.path().join("src/*.sh");
        check(absolute.to_str().unwrap(), &["src/d.sh"]);
        check("*.md", &[]);
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
