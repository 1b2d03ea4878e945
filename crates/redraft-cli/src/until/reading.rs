//! Reading a file of the workspace, where the agent may have put anything under any name: a file
//! is opened only when it is a regular file, never through a symlink (`O_NOFOLLOW`) and never
//! waiting (`O_NONBLOCK`: a FIFO or a device put there in the meantime opens at once, and is then
//! refused), so that no file type can make redraft block.

use std::fs;
use std::io::{self, ErrorKind, Read as _};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Open the regular file `path` for reading, with its metadata; an error for anything else.
pub fn open_regular(path: &Path) -> io::Result<(fs::File, fs::Metadata)> {
    if !fs::symlink_metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let file = fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    Ok((file, meta))
}

fn not_regular() -> io::Error {
    io::Error::other("it is not a regular file")
}

/// Why a small file was not read.
#[derive(Debug)]
pub enum Skipped {
    /// Nothing is there.
    Absent,
    /// Something is, but not a regular file of at most the limit, or it could not be read.
    Unusable(String),
}

/// The bytes of the regular file `path` when it holds at most `limit` bytes.
pub fn read_small(path: &Path, limit: u64) -> Result<Vec<u8>, Skipped> {
    let (file, meta) = match open_regular(path) {
        Ok(opened) => opened,
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(Skipped::Absent),
        Err(e) => return Err(Skipped::Unusable(e.to_string())),
    };
    let too_big = || Skipped::Unusable(format!("it is larger than {}", bytes(limit)));
    if meta.len() > limit {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| Skipped::Unusable(e.to_string()))?;
    if bytes.len() as u64 > limit {
        return Err(too_big());
    }
    Ok(bytes)
}

/// A size for people: `1 MiB`, `64 KiB`, `100 bytes`.
pub fn bytes(n: u64) -> String {
    match n {
        n if n >= 1024 * 1024 && n % (1024 * 1024) == 0 => format!("{} MiB", n / (1024 * 1024)),
        n if n >= 1024 && n % 1024 == 0 => format!("{} KiB", n / 1024),
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_read_and_nothing_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        fs::write(path("small"), "small").unwrap();
        fs::write(path("big"), "x".repeat(2048)).unwrap();
        std::os::unix::fs::symlink(path("small"), path("link")).unwrap();
        let made = std::process::Command::new("mkfifo").arg(path("fifo")).status().unwrap();
        assert!(made.success());
        assert_eq!(read_small(&path("small"), 1024).unwrap(), b"small");
        assert!(matches!(read_small(&path("absent"), 1024), Err(Skipped::Absent)));
        let why = |name: &str| match read_small(&path(name), 1024) {
            Err(Skipped::Unusable(why)) => why,
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(why("big"), "it is larger than 1 KiB");
        assert_eq!(why("link"), "it is not a regular file");
        assert_eq!(why("fifo"), "it is not a regular file");
        assert_eq!(why(""), "it is not a regular file", "a directory");
        assert!(open_regular(&path("fifo")).is_err());
        assert_eq!(bytes(1024 * 1024), "1 MiB");
        assert_eq!(bytes(16 * 1024 * 1024), "16 MiB");
        assert_eq!(bytes(100), "100 bytes");
    }
}
