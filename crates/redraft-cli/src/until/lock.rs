//! One agent loop per directory: `.redraft/until.lock`, created exclusively, removed on exit.
//! A lock whose process is gone (a crash, `kill -9`) is taken over; so is anything at its path
//! that redraft did not write and that cannot be a lock — a symlink, a FIFO, a socket — which is
//! removed, never read through (reading a FIFO would wait forever). A directory there is refused
//! with a hint: it is not redraft's to delete.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Result, anyhow};

use super::reading::{Skipped, read_small};
use super::root::Root;

/// The lock, relative to the working directory.
const LOCK: &str = ".redraft/until.lock";

/// Held while the loop runs; dropping it removes the lock file.
#[derive(Debug)]
pub struct Lock {
    root: Arc<Root>,
}

impl Lock {
    /// Take the lock of the working directory for `task`, or say who holds it.
    pub fn acquire(root: Arc<Root>, task: &str) -> Result<Self> {
        let shown = root.path().join(LOCK);
        let at = root.check()?;
        // A real directory: a link an agent left there is replaced, never followed.
        super::inside::real_dirs(at, Path::new(".redraft"), super::inside::InTheWay::ReplaceLinks)
            .map_err(|e| anyhow!("cannot create `{}`: {e}", root.path().join(".redraft").display()))?;
        let path: PathBuf = at.join(Path::new(LOCK));
        for _ in 0..2 {
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    let _ = writeln!(file, "{}\n{task}", std::process::id());
                    drop(file);
                    return Ok(Self { root });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let meta = std::fs::symlink_metadata(&path)
                        .map_err(|e| anyhow!("cannot read the lock `{}`: {e}", shown.display()))?;
                    if meta.is_dir() {
                        return Err(anyhow!(
                            "`{}` is a directory, not the lock of a loop, so no loop can run in this directory\nhint: remove it (`rm -r {}`) when no `redraft until` is running here",
                            shown.display(),
                            shown.display()
                        ));
                    }
                    let text = match read_small(&path, 4096) {
                        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                        Err(Skipped::Absent) => continue,
                        Err(Skipped::Unusable(why)) => {
                            tracing::warn!(lock = %shown.display(), "replacing what is not a lock ({why})");
                            String::new()
                        }
                    };
                    let mut lines = text.lines();
                    let pid = lines.next().and_then(|l| l.trim().parse::<u32>().ok());
                    let holder = lines.next().unwrap_or("?").to_owned();
                    match pid {
                        Some(pid) if alive(pid) => {
                            return Err(anyhow!(
                                "another `redraft until` (pid {pid}, task `{holder}`) is running in this directory\nhint: wait for it to finish, or stop it; if it is gone, remove `{}`",
                                shown.display()
                            ));
                        }
                        _ => {
                            tracing::warn!(lock = %shown.display(), "taking over a stale lock");
                            let _ = std::fs::remove_file(&path);
                        }
                    }
                }
                Err(e) => return Err(anyhow!("cannot create the lock `{}`: {e}", shown.display())),
            }
        }
        Err(anyhow!(
            "cannot take the lock `{}`\nhint: another loop may be starting here; try again, or remove it when no `redraft until` is running here",
            shown.display()
        ))
    }
}

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie (state `Z`) is gone for our purposes.
        Ok(stat) => stat.rsplit(')').next().map(|rest| !rest.trim_start().starts_with('Z')).unwrap_or(true),
        Err(_) => Path::new(&format!("/proc/{pid}")).exists(),
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Only in the working directory the loop started in, from a real `.redraft`: one the
        // agent swapped for a link is not followed.
        let Ok(at) = self.root.check() else { return };
        if std::fs::symlink_metadata(at.join(Path::new(".redraft"))).is_ok_and(|m| m.is_dir()) {
            let _ = std::fs::remove_file(at.join(Path::new(LOCK)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_second_holder_and_takes_over_a_stale_lock() {
        let dir = tempfile::tempdir().unwrap();
        let root = Arc::new(Root::pin(dir.path()).unwrap());
        let first = Lock::acquire(root.clone(), "a").unwrap();
        let err = Lock::acquire(root.clone(), "b").unwrap_err().to_string();
        assert!(err.contains("another `redraft until`") && err.contains("task `a`"), "{err}");
        drop(first);
        let again = Lock::acquire(root.clone(), "b").unwrap();
        drop(again);
        // a lock left by a process that no longer exists
        std::fs::write(dir.path().join(".redraft/until.lock"), "4000000000\nold\n").unwrap();
        assert!(Lock::acquire(root.clone(), "c").is_ok());
    }

    #[test]
    fn what_cannot_be_a_lock_is_replaced_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = Arc::new(Root::pin(dir.path()).unwrap());
        let lock = dir.path().join(".redraft/until.lock");
        std::fs::create_dir_all(dir.path().join(".redraft")).unwrap();
        let made = std::process::Command::new("mkfifo").arg(&lock).status().unwrap();
        assert!(made.success());
        drop(Lock::acquire(root.clone(), "a").unwrap());
        std::os::unix::fs::symlink("/dev/zero", &lock).unwrap();
        drop(Lock::acquire(root.clone(), "a").unwrap());
        std::fs::create_dir(&lock).unwrap();
        let err = Lock::acquire(root.clone(), "a").unwrap_err().to_string();
        assert!(err.contains("until.lock` is a directory, not the lock of a loop"), "{err}");
        assert!(err.contains("hint: remove it (`rm -r "), "{err}");
        assert!(lock.is_dir());
    }
}
