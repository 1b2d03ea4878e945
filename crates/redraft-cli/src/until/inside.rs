//! Writing inside the working directory, where the agent may have put links. Every directory on
//! the way is made a real directory (a symlink or a file in its place is removed, never
//! followed), and a file is written as a new file renamed over its name, so that a symlink or a
//! hard link the agent put there is replaced, never written through: redraft's reports and
//! `decisions.md` never land outside the working directory.

use std::fs;
use std::io::{self, ErrorKind, Read as _, Write as _};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::names::shown;
use super::reading::open_regular;
use super::root::{At, Root};

/// The mode of a file redraft creates.
const NEW_FILE_MODE: u32 = 0o644;

/// What [`real_dirs`] removes where a directory should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InTheWay {
    /// A symlink or a file: protected paths are put back whatever took their place.
    Replace,
    /// A symlink only; a file is an error (for redraft's own reports: a file cannot redirect
    /// a write, and is not redraft's to delete).
    ReplaceLinks,
}

/// Make every directory of `dir` (relative to the working directory) a real directory redraft can
/// write in — a symlink in the way (and with [`InTheWay::Replace`] a file) is removed, never
/// followed; a directory without its owner's read, write and search bits gets them; a directory
/// of another file system (a mount point) is an error — and return its full path.
pub fn real_dirs(at: At<'_>, dir: &Path, in_the_way: InTheWay) -> io::Result<PathBuf> {
    let mut rel = PathBuf::new();
    for part in dir {
        rel.push(part);
        let path = at.join(&rel);
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() && at.foreign(&path, &meta) => {
                return Err(io::Error::other(format!(
                    "`{}` is another file system (a mount point), which redraft writes nothing into",
                    shown(&rel)
                )));
            }
            Ok(meta) if meta.is_dir() => {
                let mode = meta.permissions().mode() & 0o7777;
                if mode & 0o700 != 0o700 {
                    fs::set_permissions(&path, fs::Permissions::from_mode(mode | 0o700))?;
                }
                continue;
            }
            Ok(meta) if meta.file_type().is_symlink() || in_the_way == InTheWay::Replace => fs::remove_file(&path)?,
            Ok(_) => {
                return Err(io::Error::new(
                    ErrorKind::NotADirectory,
                    format!("`{}` is in the way, not a directory", shown(&rel)),
                ));
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        fs::create_dir(&path)?;
    }
    Ok(at.join(&rel))
}

/// Write `bytes` as the file `path`, with every known secret redacted: what is written this way
/// is a report (an iteration's, the loop's, its decisions), which the agent reads at its next
/// turn. Inside the working directory it is a new file renamed into place (keeping the mode of
/// a regular file it replaces); outside, where the user named it, it is written as usual.
pub fn write(root: &Root, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let bytes = &*redraft::core::secrets::redact_bytes(bytes);
    let Some(rel) = root.relative(path) else {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)?;
        }
        return fs::write(path, bytes);
    };
    let at = root.check().map_err(io::Error::other)?;
    let name = rel.file_name().ok_or_else(|| io::Error::new(ErrorKind::InvalidInput, "no file name"))?;
    let dir = real_dirs(at, rel.parent().unwrap_or(Path::new("")), InTheWay::ReplaceLinks)?;
    let target = dir.join(name);
    let mode = match fs::symlink_metadata(&target) {
        Ok(meta) if meta.is_dir() => return Err(io::Error::new(ErrorKind::IsADirectory, "it is a directory")),
        Ok(meta) if meta.is_file() => meta.permissions().mode() & 0o777,
        _ => NEW_FILE_MODE,
    };
    let mut file = tempfile::Builder::new().prefix(".redraft-write-").tempfile_in(&dir)?;
    file.write_all(bytes)?;
    file.as_file().set_permissions(fs::Permissions::from_mode(mode))?;
    file.persist(&target).map_err(|e| e.error)?;
    Ok(())
}

/// What `path` holds now, to be added to: inside the working directory, only a regular file of
/// its own (not a symlink, not a file with other hard links — their content is someone else's)
/// reached through real directories; `None` when there is no such file.
pub fn read_own(root: &Root, path: &Path) -> io::Result<Option<Vec<u8>>> {
    let Some(rel) = root.relative(path) else {
        return match fs::read(path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        };
    };
    let at = root.check().map_err(io::Error::other)?;
    let mut dir = PathBuf::new();
    for part in rel.parent().into_iter().flat_map(Path::iter) {
        dir.push(part);
        let path = at.join(&dir);
        if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && !at.foreign(&path, &m)) {
            return Ok(None);
        }
    }
    let path = at.join(rel);
    match fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_file() && meta.nlink() == 1 => {
            let (mut file, _) = open_regular(&path)?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            Ok(Some(bytes))
        }
        Ok(meta) if meta.is_dir() => Err(io::Error::new(ErrorKind::IsADirectory, "it is a directory")),
        Ok(_) => {
            tracing::warn!(path = %shown(rel), "not a file of its own (a symlink, or a file with other hard links): replaced by a new file");
            Ok(None)
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_in_the_way_are_replaced_never_written_through() {
        let root = tempfile::tempdir().unwrap();
        let pinned = Root::pin(root.path()).unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        // A linked directory on the way, a symlinked file, a hard-linked file.
        std::os::unix::fs::symlink(outside.path(), root.path().join("dir")).unwrap();
        write(&pinned, &root.path().join("dir/report.md"), b"report").unwrap();
        assert!(fs::symlink_metadata(root.path().join("dir")).unwrap().is_dir());
        assert_eq!(fs::read_to_string(root.path().join("dir/report.md")).unwrap(), "report");
        std::os::unix::fs::symlink(&victim, root.path().join("link.md")).unwrap();
        assert_eq!(read_own(&pinned, &root.path().join("link.md")).unwrap(), None);
        write(&pinned, &root.path().join("link.md"), b"mine").unwrap();
        fs::hard_link(&victim, root.path().join("hard.md")).unwrap();
        assert_eq!(read_own(&pinned, &root.path().join("hard.md")).unwrap(), None);
        write(&pinned, &root.path().join("hard.md"), b"mine").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1);
        assert_eq!(read_own(&pinned, &root.path().join("hard.md")).unwrap(), Some(b"mine".to_vec()));
        let mode = fs::metadata(root.path().join("hard.md")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, NEW_FILE_MODE);
    }

    #[test]
    fn a_report_never_holds_a_known_secret() {
        // An issue quoting a verifier that printed its environment, say.
        redraft::core::secrets::register("sk-until-report-test-5f4e3d");
        let root = tempfile::tempdir().unwrap();
        let pinned = Root::pin(root.path()).unwrap();
        let report = root.path().join(".redraft/iterations/t/1.md");
        write(&pinned, &report, b"1. verifier sk-until-report-test-5f4e3d [exit_status]").unwrap();
        assert_eq!(fs::read_to_string(&report).unwrap(), "1. verifier [redacted] [exit_status]");
    }

    #[test]
    fn a_file_in_the_way_of_a_report_is_an_error_and_stays() {
        let root = tempfile::tempdir().unwrap();
        let pinned = Root::pin(root.path()).unwrap();
        fs::write(root.path().join("reports"), "in the way").unwrap();
        let err = write(&pinned, &root.path().join("reports/1.md"), b"report").unwrap_err();
        assert!(err.to_string().contains("is in the way, not a directory"), "{err}");
        assert_eq!(fs::read_to_string(root.path().join("reports")).unwrap(), "in the way");
        // Protected paths are put back whatever is in their way.
        real_dirs(pinned.check().unwrap(), Path::new("reports"), InTheWay::Replace).unwrap();
        assert!(root.path().join("reports").is_dir());
    }
}
