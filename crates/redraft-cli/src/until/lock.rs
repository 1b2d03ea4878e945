//! One agent loop per directory: `.redraft/until.lock`, created exclusively, removed on exit.
//! A lock whose process is gone (a crash, `kill -9`) is taken over.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};

/// Held while the loop runs; dropping it removes the lock file.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
}

impl Lock {
    /// Take the lock of `dir` for `task`, or say who holds it.
    pub fn acquire(dir: &Path, task: &str) -> Result<Self> {
        // A real directory: a link an agent left there is replaced, never followed.
        let redraft = super::inside::real_dirs(dir, Path::new(".redraft"), super::inside::InTheWay::ReplaceLinks)
            .map_err(|e| anyhow!("cannot create `{}`: {e}", dir.join(".redraft").display()))?;
        let path = redraft.join("until.lock");
        for _ in 0..2 {
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    let _ = writeln!(file, "{}\n{task}", std::process::id());
                    return Ok(Self { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    let mut lines = text.lines();
                    let pid = lines.next().and_then(|l| l.trim().parse::<u32>().ok());
                    let holder = lines.next().unwrap_or("?").to_owned();
                    match pid {
                        Some(pid) if alive(pid) => {
                            return Err(anyhow!(
                                "another `redraft until` (pid {pid}, task `{holder}`) is running in this directory\nhint: wait for it to finish, or stop it; if it is gone, remove `{}`",
                                path.display()
                            ));
                        }
                        _ => {
                            tracing::warn!(lock = %path.display(), "taking over a stale lock");
                            let _ = std::fs::remove_file(&path);
                        }
                    }
                }
                Err(e) => return Err(anyhow!("cannot create the lock `{}`: {e}", path.display())),
            }
        }
        Err(anyhow!("cannot take the lock `{}`", path.display()))
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
        // Only from a real `.redraft`: one the agent swapped for a link is not followed.
        if self.path.parent().is_some_and(|dir| std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir())) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_second_holder_and_takes_over_a_stale_lock() {
        let dir = tempfile::tempdir().unwrap();
        let first = Lock::acquire(dir.path(), "a").unwrap();
        let err = Lock::acquire(dir.path(), "b").unwrap_err().to_string();
        assert!(err.contains("another `redraft until`") && err.contains("task `a`"), "{err}");
        drop(first);
        let again = Lock::acquire(dir.path(), "b").unwrap();
        drop(again);
        // a lock left by a process that no longer exists
        std::fs::write(dir.path().join(".redraft/until.lock"), "4000000000\nold\n").unwrap();
        assert!(Lock::acquire(dir.path(), "c").is_ok());
    }
}
