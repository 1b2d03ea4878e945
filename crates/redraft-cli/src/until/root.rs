//! The working directory of a loop, pinned when the loop starts: its canonical path, its device
//! and inode, and the directory itself held open. An agent may move the directory away and put a
//! symlink (or another directory) under its name; redraft reaches the directory it pinned through
//! the descriptor it holds (`/proc/self/fd/N`), never by its name, and before every operation on
//! the workspace it checks that the name still leads to that directory, with no symlink on the
//! way. When it does not, the loop stops ([`Moved`]): the verifier is not started in whatever the
//! name now leads to, and nothing more is restored, removed or written.

use std::fmt;
use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use anyhow::{Result, anyhow};

/// The working directory, pinned.
#[derive(Debug)]
pub struct Root {
    /// The canonical path: how it is shown, where commands start, what globs are relative to.
    path: PathBuf,
    dev: u64,
    ino: u64,
    /// The directory, held open for the loop.
    _dir: fs::File,
    /// Where redraft reaches it: `/proc/self/fd/N` (the directory held open), or `path` where
    /// `/proc` does not lead to it.
    base: PathBuf,
}

/// The working directory as it was just checked: what to reach it by, and its device.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    base: &'a Path,
    /// The device of the working directory: nothing is removed or restored on another.
    pub dev: u64,
}

impl At<'_> {
    /// The full path of `rel`, relative to the working directory.
    pub fn join(&self, rel: &Path) -> PathBuf {
        self.base.join(rel)
    }

    /// Whether the directory at `path` (with `meta`, its own metadata) lies on another file
    /// system or mount than the working directory: another device, or the root of a mount —
    /// a bind mount of a directory elsewhere has the device of what it shows — where the kernel
    /// tells (`statx`, Linux 5.8).
    pub fn foreign(&self, path: &Path, meta: &fs::Metadata) -> bool {
        meta.dev() != self.dev || mount_root(path)
    }
}

/// Whether `path` is the root of a mount, as far as the kernel tells.
fn mount_root(path: &Path) -> bool {
    use rustix::fs::{AtFlags, CWD, StatxAttributes, StatxFlags, statx};
    match statx(CWD, path, AtFlags::SYMLINK_NOFOLLOW | AtFlags::NO_AUTOMOUNT, StatxFlags::empty()) {
        Ok(found) => {
            found.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT)
                && found.stx_attributes.contains(StatxAttributes::MOUNT_ROOT)
        }
        Err(_) => false,
    }
}

impl Root {
    /// Pin the directory `path` (the current directory) for the loop.
    pub fn pin(path: &Path) -> Result<Self> {
        let cannot = |e: std::io::Error| anyhow!("cannot use the working directory `{}`: {e}", path.display());
        let path = fs::canonicalize(path).map_err(cannot)?;
        let dir = fs::File::open(&path).map_err(cannot)?;
        let meta = dir.metadata().map_err(cannot)?;
        if !meta.is_dir() {
            return Err(anyhow!("the working directory `{}` is not a directory", path.display()));
        }
        let (dev, ino) = (meta.dev(), meta.ino());
        let through = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
        let leads = fs::metadata(&through).is_ok_and(|m| (m.dev(), m.ino()) == (dev, ino));
        let base = if leads { through } else { path.clone() };
        Ok(Self { path, dev, ino, _dir: dir, base })
    }

    /// The canonical path of the working directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `path` relative to the working directory when it is inside it (compared by components:
    /// no `..`); `path` may be relative to it or absolute.
    pub fn relative<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        let rel = if path.is_absolute() { path.strip_prefix(&self.path).ok()? } else { path };
        let plain = rel.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        (plain && rel.components().any(|c| matches!(c, Component::Normal(_)))).then_some(rel)
    }

    /// Check that the working directory's path still leads to the directory pinned, with no
    /// symlink on the way; then reach it.
    pub fn check(&self) -> Result<At<'_>, Moved> {
        let why = match fs::canonicalize(&self.path) {
            Err(e) => format!("it cannot be reached: {e}"),
            Ok(now) if now != self.path => format!("it now leads to `{}`", now.display()),
            Ok(_) => match fs::metadata(&self.path) {
                Ok(meta) if (meta.dev(), meta.ino()) == (self.dev, self.ino) => {
                    return Ok(At { base: &self.base, dev: self.dev });
                }
                Ok(_) => "another directory has taken its name".to_owned(),
                Err(e) => format!("it cannot be reached: {e}"),
            },
        };
        Err(Moved { path: self.path.clone(), why })
    }
}

/// The working directory's path no longer leads to the directory the loop started in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    path: PathBuf,
    why: String,
}

impl fmt::Display for Moved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the working directory `{}` is no longer the directory this loop started in ({}); the loop stopped, and redraft wrote, restored and removed nothing more there\nhint: something — the agent? — moved it or put a link or another directory in its place; look at what is there now (the loop's directory may be beside it under another name), then run the loop again",
            self.path.display(),
            self.why
        )
    }
}

impl std::error::Error for Moved {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_swapped_for_a_link_or_another_is_noticed() {
        let parent = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let ws = parent.path().join("ws");
        fs::create_dir(&ws).unwrap();
        fs::write(ws.join("mine"), "mine").unwrap();
        let root = Root::pin(&ws).unwrap();
        let at = root.check().unwrap();
        assert_eq!(fs::read_to_string(at.join(Path::new("mine"))).unwrap(), "mine");
        assert_eq!(root.relative(&ws.join("a/b")), Some(Path::new("a/b")));
        assert_eq!(root.relative(Path::new("a/b")), Some(Path::new("a/b")));
        assert_eq!(root.relative(&ws.join("../x")), None);
        assert_eq!(root.relative(&ws), None);
        assert_eq!(root.relative(Path::new("/elsewhere/x")), None);

        fs::rename(&ws, parent.path().join("ws.real")).unwrap();
        std::os::unix::fs::symlink(outside.path(), &ws).unwrap();
        let moved = root.check().unwrap_err().to_string();
        assert!(moved.contains("is no longer the directory this loop started in (it now leads to"), "{moved}");
        assert!(moved.contains("hint:"), "{moved}");
        fs::remove_file(&ws).unwrap();
        fs::create_dir(&ws).unwrap();
        let moved = root.check().unwrap_err().to_string();
        assert!(moved.contains("another directory has taken its name"), "{moved}");
        fs::remove_dir(&ws).unwrap();
        assert!(root.check().unwrap_err().to_string().contains("it cannot be reached"));
        // Put back: the same directory again.
        fs::rename(parent.path().join("ws.real"), &ws).unwrap();
        assert!(root.check().is_ok());
    }

    #[test]
    fn the_directory_is_reached_through_what_is_held_open() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::pin(dir.path()).unwrap();
        assert!(root.base.starts_with("/proc/self/fd/"), "{}", root.base.display());
    }
}
