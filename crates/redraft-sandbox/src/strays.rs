//! Processes that got away from the command that started them.
//!
//! Every command runs under a supervisor that kills what the command leaves behind. A command
//! that kills its own supervisor (it runs as the same user) leaves its descendants to the
//! nearest reaper, normally init, out of everyone's reach. A process that calls
//! [`adopt_orphans`] becomes that reaper for everything below it, so such processes stay its
//! descendants, and [`end_strays`] finds and kills them: a caller that is about to run a
//! command whose result must not be tampered with (a verifier after an agent) first makes sure
//! nothing the earlier commands started is still alive. Processes started outside the tree (a
//! service manager, `at`, `ssh localhost`) are beyond this; a PID namespace (bubblewrap) or a
//! cgroup contains those.

use std::time::Duration;

use crate::SandboxError;
use crate::sys::{self, Pid};
use crate::tree;

/// Makes this process the reaper of every orphan below it (`PR_SET_CHILD_SUBREAPER`): a process
/// whose parent dies is re-parented here instead of to init. Dead ones stay as zombies until
/// this process exits (they hold no resources but their process table entry).
pub fn adopt_orphans() -> Result<(), SandboxError> {
    sys::set_child_subreaper()
        .map_err(|e| SandboxError::Io { what: "becoming the reaper of orphaned processes", source: e.into() })
}

/// Keeps this process's memory to itself: no core dump, and no other process of the same user
/// may read its environment or memory (`/proc/PID/environ`, `/proc/PID/mem`) or attach to it
/// (`ptrace`). redraft holds API keys in its environment and memory, and the commands it starts
/// run as the same user: without this, any of them could read the keys from redraft itself,
/// whatever environment it was given. (A process with `CAP_SYS_PTRACE` — root — still can; run
/// redraft as an ordinary user, or its commands under `--sandbox`, whose PID namespace hides
/// redraft.)
pub fn keep_this_process_private() -> Result<(), SandboxError> {
    sys::set_not_dumpable()
        .map_err(|e| SandboxError::Io { what: "keeping this process's memory private", source: e.into() })
}

/// What [`end_strays`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Strays {
    /// Processes it killed.
    pub killed: usize,
    /// Processes still alive when its time was up: ones a `SIGKILL` cannot end (a process in
    /// uninterruptible sleep, say, waiting on a file system that never answers). Whatever must
    /// not run beside them (a verifier) should not run.
    pub alive: usize,
}

/// Kills (`SIGKILL`) every live process below this one, again until none is left or `within`
/// has passed. Call it when no command of this process should be running: it kills them all.
///
/// Once no supervisor is left, everything below this process is an orphan [`adopt_orphans`]
/// made its direct child, and a child's children become its own as the child dies. So the kill
/// runs in a tight loop over this process's tree (`/proc/PID/task/*/children` from here down,
/// a few microseconds a round), which a process that keeps forking and exiting to change its
/// pid cannot outrun: a killed process forks no more, and what it forked is in the tree by the
/// next round. The whole tree is walked, not only the direct children: a child that cannot die
/// does not hand its own children up, and they are killed below it. Where the kernel does not
/// list children, every process is scanned instead (slower).
pub async fn end_strays(within: Duration) -> Strays {
    tokio::task::spawn_blocking(move || kill_below(std::time::Instant::now() + within)).await.unwrap_or_default()
}

fn kill_below(deadline: std::time::Instant) -> Strays {
    let mut killed = std::collections::HashSet::new();
    loop {
        let mut live = live_tree().unwrap_or_else(live_descendants);
        if live.is_empty() {
            // The walk is not one atomic look: a process that died while it went on handed its
            // children here after this process's own list was read. They are in that list by
            // the time the dead one shows as dead, so a second walk sees them.
            live = live_tree().unwrap_or_else(live_descendants);
            if live.is_empty() {
                return Strays { killed: killed.len(), alive: 0 };
            }
        }
        for &pid in &live {
            if sys::send_signal(pid, libc::SIGKILL).is_ok() {
                killed.insert(pid);
            }
        }
        if std::time::Instant::now() >= deadline {
            let alive = live_tree().unwrap_or_else(live_descendants).len();
            return Strays { killed: killed.len().saturating_sub(alive), alive };
        }
        std::thread::yield_now();
    }
}

/// The live processes below this one, from the kernel's lists of children (each thread's
/// `children` file), walked from this process down; `None` when the kernel does not provide
/// them.
fn live_tree() -> Option<Vec<Pid>> {
    let mut frontier = children_of("self")?;
    let mut seen = std::collections::HashSet::new();
    let mut live = Vec::new();
    while let Some(pid) = frontier.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if is_alive(pid) {
            live.push(pid);
        }
        frontier.extend(children_of(&pid.to_string()).unwrap_or_default());
    }
    Some(live)
}

/// The children of the process `pid` (`self` for this one), from every thread's `children`
/// file; `None` when the kernel does not provide them.
fn children_of(pid: &str) -> Option<Vec<Pid>> {
    let mut children = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).ok()?;
        children.extend(text.split_ascii_whitespace().filter_map(|pid| pid.parse::<Pid>().ok()));
    }
    Some(children)
}

/// Whether `pid` is a process that has not died: one of its threads is neither a zombie nor
/// gone. (A process whose main thread exited on its own reads as a zombie in its own `stat`
/// while its other threads run on.)
fn is_alive(pid: Pid) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().any(|task| {
        std::fs::read(task.path().join("stat"))
            .ok()
            .and_then(|stat| tree::parse_state_and_ppid(&stat))
            .is_some_and(|(state, _)| !matches!(state, b'Z' | b'X' | b'x'))
    })
}

/// The processes below this one that are not yet dead (zombies excluded).
fn live_descendants() -> Vec<Pid> {
    let me = sys::own_pid();
    let mut table: Vec<(Pid, Pid, bool)> = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = tree::parse_pid(std::os::unix::ffi::OsStrExt::as_bytes(name.as_os_str())) else { continue };
        let Ok(stat) = std::fs::read(entry.path().join("stat")) else { continue };
        let Some((state, ppid)) = tree::parse_state_and_ppid(&stat) else { continue };
        table.push((pid, ppid, matches!(state, b'Z' | b'X' | b'x') && !is_alive(pid)));
    }
    let mut below: Vec<Pid> = vec![me];
    let mut live = Vec::new();
    // Parents before children is not guaranteed by pid order: widen until nothing changes.
    loop {
        let before = below.len();
        for &(pid, ppid, dead) in &table {
            if below.contains(&ppid) && !below.contains(&pid) {
                below.push(pid);
                if !dead && pid != me {
                    live.push(pid);
                }
            }
        }
        if below.len() == before {
            return live;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_whose_main_thread_exited_alone_is_alive() {
        let script = "import ctypes, threading, time\n\
            threading.Thread(target=lambda: time.sleep(60)).start()\n\
            ctypes.CDLL(None).syscall(60, 0)\n";
        let Ok(mut child) = std::process::Command::new("python3").args(["-c", script]).spawn() else {
            eprintln!("SKIP strays::a_process_whose_main_thread_exited_alone_is_alive: no python3 to start one");
            return;
        };
        let pid = Pid::try_from(child.id()).unwrap();
        let state = || {
            std::fs::read(format!("/proc/{pid}/stat")).ok().and_then(|s| tree::parse_state_and_ppid(&s)).map(|s| s.0)
        };
        let until = std::time::Instant::now() + Duration::from_secs(20);
        while state() != Some(b'Z') && std::time::Instant::now() < until {
            std::thread::yield_now();
        }
        assert_eq!(state(), Some(b'Z'), "the main thread did not exit alone");
        assert!(is_alive(pid), "its other thread runs on");
        assert!(live_descendants().contains(&pid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!is_alive(pid));
    }

    #[test]
    fn the_tree_below_a_child_is_walked_not_only_the_children() {
        // A child that cannot be killed would not hand its children up: they are found below it.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        let grandchild: Pid = line.trim().parse().unwrap();
        let tree = live_tree().expect("the kernel lists children");
        assert!(tree.contains(&Pid::try_from(child.id()).unwrap()), "{tree:?}");
        assert!(tree.contains(&grandchild), "{tree:?}");
        sys::send_signal(grandchild, libc::SIGKILL).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_child_is_found_below_this_process_until_it_is_dead() {
        // (`end_strays` itself would kill what other tests in this process run: the CLI's
        // agent-mode tests run it in a process of its own.)
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = Pid::try_from(child.id()).unwrap();
        assert!(live_descendants().contains(&pid));
        child.kill().unwrap();
        // Killed but not yet waited for: a zombie, which is not alive.
        let mut zombie = false;
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < until {
            let stat = std::fs::read(format!("/proc/{pid}/stat")).unwrap();
            if tree::parse_state_and_ppid(&stat).is_some_and(|(state, _)| state == b'Z') {
                zombie = true;
                break;
            }
            std::thread::yield_now();
        }
        assert!(zombie && !live_descendants().contains(&pid));
        child.wait().unwrap();
    }
}
