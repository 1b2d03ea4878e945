//! `--protect` globs: what they match, and the walk that finds it without following a
//! symlink. A glob is relative to the working directory; `*` and `?` stop at `/`, `**` crosses
//! directories, and a glob that matches a directory protects everything under it.

use std::collections::BTreeSet;
use std::fs;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use anyhow::{Result, anyhow};

/// Never protected: redraft's own reports live there.
const OWN_DIR: &str = ".redraft";

/// Not walked into unless a glob names them literally (`.git/hooks/*`).
const SKIPPED: [&str; 2] = [".redraft", ".git"];

/// `*` and `?` stop at `/`; `**` crosses directories.
const MATCH: glob::MatchOptions =
    glob::MatchOptions { case_sensitive: true, require_literal_separator: true, require_literal_leading_dot: false };

/// One `--protect` glob, relative to the working directory.
#[derive(Debug)]
pub struct Rule {
    /// As the user wrote it.
    pub text: String,
    pattern: glob::Pattern,
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
        let pattern = glob::Pattern::new(clean_text).map_err(|e| anyhow!("`--protect {text}` is not a glob: {e}"))?;
        let base = clean.iter().take_while(|part| !part.to_string_lossy().contains(['*', '?', '['])).collect();
        Ok(Self { text: text.to_owned(), pattern, base })
    }

    /// Whether `rel` is protected by this rule: the glob matches it or one of its directories.
    pub fn matches(&self, rel: &Path) -> bool {
        !rel.starts_with(OWN_DIR)
            && rel.ancestors().filter(|a| !a.as_os_str().is_empty()).any(|a| self.pattern.matches_path_with(a, MATCH))
    }

    /// The relative paths of everything but directories this rule protects now, reached
    /// through real directories only.
    pub fn walk(&self, root: &Path, out: &mut BTreeSet<PathBuf>) -> Result<()> {
        let mut rel = PathBuf::new();
        for part in &self.base {
            rel.push(part);
            match fs::symlink_metadata(root.join(&rel)) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    if self.matches(&rel) {
                        out.insert(rel);
                    }
                    return Ok(());
                }
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => return Ok(()),
                Err(e) => return Err(anyhow!("cannot read `{}`: {e}", rel.display())),
            }
        }
        self.visit(root, &rel, out)
    }

    fn visit(&self, root: &Path, dir: &Path, out: &mut BTreeSet<PathBuf>) -> Result<()> {
        let listing = |e: std::io::Error| anyhow!("cannot list `{}`: {e}", shown(dir));
        let entries = match fs::read_dir(root.join(dir)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(listing(e)),
        };
        for entry in entries {
            let entry = entry.map_err(listing)?;
            let name = entry.file_name();
            if dir.as_os_str().is_empty() && SKIPPED.iter().any(|s| name == *s) {
                continue;
            }
            let rel = dir.join(&name);
            // The entry's own type: a symlink to a directory is not a directory.
            let kind = entry.file_type().map_err(|e| anyhow!("cannot read `{}`: {e}", rel.display()))?;
            if kind.is_dir() {
                self.visit(root, &rel, out)?;
            } else if self.matches(&rel) {
                out.insert(rel);
            }
        }
        Ok(())
    }
}

fn shown(dir: &Path) -> String {
    if dir.as_os_str().is_empty() { ".".to_owned() } else { dir.display().to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_a_shell_and_a_directory_protects_what_is_under_it() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["tests/a.sh", "tests/deep/b.sh", "tests/deep/c.txt", "src/d.sh", "e.sh"] {
            let path = dir.path().join(f);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, f).unwrap();
        }
        fs::create_dir_all(dir.path().join(".redraft")).unwrap();
        fs::write(dir.path().join(".redraft/x.sh"), "reports").unwrap();
        let check = |glob: &str, want: &[&str]| {
            let mut found = BTreeSet::new();
            Rule::parse(dir.path(), glob).unwrap().walk(dir.path(), &mut found).unwrap();
            let found: Vec<String> = found.iter().map(|p| p.display().to_string()).collect();
            assert_eq!(found, want, "--protect {glob}");
        };
        check("tests/**", &["tests/a.sh", "tests/deep/b.sh", "tests/deep/c.txt"]);
        check("tests", &["tests/a.sh", "tests/deep/b.sh", "tests/deep/c.txt"]);
        check("tests/", &["tests/a.sh", "tests/deep/b.sh", "tests/deep/c.txt"]);
        check("./tests/*.sh", &["tests/a.sh"]);
        check("*.sh", &["e.sh"]);
        check("**/*.sh", &["e.sh", "src/d.sh", "tests/a.sh", "tests/deep/b.sh"]);
        check("tests/deep/c.txt", &["tests/deep/c.txt"]);
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
