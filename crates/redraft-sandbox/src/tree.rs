//! The processes below the supervisor, read from `/proc`.
//!
//! This runs in the supervisor, a forked child of a multi-threaded process, so it allocates
//! nothing: the table and the directory buffer are allocated in the parent before the fork, paths
//! are built in fixed arrays, and sorting is in place.

use crate::sys::{self, Pid};

/// How many processes one scan records. Past that, a scan still signals the supervisor's direct
/// children as it meets them; deeper ones become direct children as their parents die.
const CAPACITY: usize = 16 * 1024;
/// The buffer for `getdents64` records.
const DIRENT_BUFFER: usize = 32 * 1024;
/// Enough of `/proc/PID/stat` to reach the parent's pid: the command name is at most 15 bytes.
const STAT_PREFIX: usize = 128;

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    pid: Pid,
    ppid: Pid,
    below: bool,
}

/// A table of processes, reused by every scan.
#[derive(Debug)]
pub(crate) struct Tree {
    entries: Box<[Entry]>,
    len: usize,
    dirents: Box<[u8]>,
}

impl Tree {
    /// Allocates the buffers; call it in the parent.
    pub(crate) fn new() -> Self {
        Tree {
            entries: vec![Entry::default(); CAPACITY].into_boxed_slice(),
            len: 0,
            dirents: vec![0; DIRENT_BUFFER].into_boxed_slice(),
        }
    }

    /// Sends each of `signals`, in order, to every process below `root`; returns how many
    /// processes were signalled.
    pub(crate) fn signal_below(&mut self, root: Pid, signals: &[i32]) -> usize {
        let mut signalled = self.scan(root, signals);
        mark_below(&mut self.entries[..self.len], root);
        for entry in self.entries[..self.len].iter().filter(|e| e.below) {
            send(entry.pid, root, signals);
            signalled += 1;
        }
        signalled
    }

    /// Fills the table from `/proc`. A process met when the table is full is signalled at once
    /// if it is a child of `root`; returns how many were.
    fn scan(&mut self, root: Pid, signals: &[i32]) -> usize {
        self.len = 0;
        let mut overflow_signalled = 0;
        let Ok(mut dir) = sys::Dir::open(c"/proc") else { return 0 };
        let Tree { entries, len, dirents } = self;
        while let Ok(filled) = dir.read(dirents) {
            if filled == 0 {
                break;
            }
            for name in DirentNames::new(dirents.get(..filled).unwrap_or_default()) {
                let Some(pid) = parse_pid(name) else { continue };
                let Some(ppid) = read_ppid(pid) else { continue };
                if let Some(slot) = entries.get_mut(*len) {
                    *slot = Entry { pid, ppid, below: false };
                    *len += 1;
                } else if ppid == root {
                    send(pid, root, signals);
                    overflow_signalled += 1;
                }
            }
        }
        overflow_signalled
    }
}

fn send(pid: Pid, root: Pid, signals: &[i32]) {
    if pid > 1 && pid != root {
        for &signal in signals {
            let _ = sys::send_signal(pid, signal);
        }
    }
}

/// Marks every entry whose chain of parents reaches `root`.
fn mark_below(entries: &mut [Entry], root: Pid) {
    entries.sort_unstable_by_key(|e| e.pid);
    loop {
        let mut changed = false;
        for i in 0..entries.len() {
            let Entry { pid, ppid, below } = entries[i];
            if below || pid == root {
                continue;
            }
            let parent_below = ppid == root
                || entries
                    .binary_search_by_key(&ppid, |e| e.pid)
                    .is_ok_and(|j| entries.get(j).is_some_and(|e| e.below));
            if parent_below {
                entries[i].below = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
}

/// The names in a buffer of `linux_dirent64` records: `d_ino: u64, d_off: i64, d_reclen: u16,
/// d_type: u8, d_name: NUL-terminated`.
struct DirentNames<'a> {
    buf: &'a [u8],
}

impl<'a> DirentNames<'a> {
    fn new(buf: &'a [u8]) -> Self {
        DirentNames { buf }
    }
}

impl<'a> Iterator for DirentNames<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        const NAME: usize = 19;
        let reclen = self.buf.get(16..18)?;
        let reclen = usize::from(u16::from_ne_bytes([reclen[0], reclen[1]]));
        let record = self.buf.get(..reclen).filter(|_| reclen > NAME)?;
        self.buf = &self.buf[reclen..];
        let name = &record[NAME..];
        Some(name.iter().position(|&b| b == 0).map_or(name, |end| &name[..end]))
    }
}

/// A `/proc` entry name that is a process id.
pub(crate) fn parse_pid(name: &[u8]) -> Option<Pid> {
    if name.is_empty() || name.len() > 10 {
        return None;
    }
    let mut pid: Pid = 0;
    for &b in name {
        if !b.is_ascii_digit() {
            return None;
        }
        pid = pid.checked_mul(10)?.checked_add(Pid::from(b - b'0'))?;
    }
    (pid > 0).then_some(pid)
}

/// The parent of `pid`, from `/proc/PID/stat`.
fn read_ppid(pid: Pid) -> Option<Pid> {
    let mut path = [0u8; 32];
    let len = stat_path(pid, &mut path)?;
    let path = std::ffi::CStr::from_bytes_with_nul(path.get(..len)?).ok()?;
    let mut stat = [0u8; STAT_PREFIX];
    let n = sys::read_file(path, &mut stat).ok()?;
    parse_ppid(stat.get(..n)?)
}

/// Writes `/proc/PID/stat` and a NUL into `buf`; returns the length including the NUL.
fn stat_path(pid: Pid, buf: &mut [u8; 32]) -> Option<usize> {
    let mut digits = [0u8; 10];
    let mut n = 0;
    let mut rest = u32::try_from(pid).ok()?;
    loop {
        *digits.get_mut(n)? = b'0' + (rest % 10) as u8;
        n += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let mut len = 0;
    let mut push = |bytes: &[u8]| -> Option<()> {
        buf.get_mut(len..len + bytes.len())?.copy_from_slice(bytes);
        len += bytes.len();
        Some(())
    };
    push(b"/proc/")?;
    for i in (0..n).rev() {
        push(&digits[i..=i])?;
    }
    push(b"/stat\0")?;
    Some(len)
}

/// The parent pid in the text of `/proc/PID/stat`: `PID (COMM) STATE PPID …`, where COMM may hold
/// spaces and parentheses (so the last `)` ends it: nothing after it does). A ppid not followed by
/// a space (cut off by the end of the buffer) is rejected rather than misread.
fn parse_ppid(stat: &[u8]) -> Option<Pid> {
    parse_state_and_ppid(stat).map(|(_, ppid)| ppid)
}

/// The one-letter state (`R`, `S`, `Z`, …) and the parent pid in the text of `/proc/PID/stat`.
pub(crate) fn parse_state_and_ppid(stat: &[u8]) -> Option<(u8, Pid)> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = stat.get(close + 1..)?.strip_prefix(b" ")?;
    let state = *rest.first()?;
    let rest = rest.get(1..)?.strip_prefix(b" ")?;
    let ppid = rest.get(..rest.iter().position(|&b| b == b' ')?)?;
    Some((state, if ppid == b"0" { 0 } else { parse_pid(ppid)? }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_the_parent_even_with_odd_command_names() {
        assert_eq!(parse_ppid(b"42 (sh) S 7 42 42 0 -1 4194560"), Some(7));
        assert_eq!(parse_ppid(b"43 (a) b (c)) Z 42 42 42 0"), Some(42));
        assert_eq!(parse_ppid(b"1 (init) S 0 1 1 0"), Some(0));
        assert_eq!(parse_ppid(b"garbage"), None);
        assert_eq!(parse_ppid(b"5 (x) S"), None);
    }

    #[test]
    fn this_process_has_its_parent() {
        let ppid = read_ppid(sys::own_pid()).unwrap();
        assert_eq!(ppid, sys::parent_pid());
    }

    #[test]
    fn stat_paths_are_nul_terminated() {
        let mut buf = [0u8; 32];
        let len = stat_path(4_194_304, &mut buf).unwrap();
        assert_eq!(&buf[..len], b"/proc/4194304/stat\0");
        let len = stat_path(7, &mut buf).unwrap();
        assert_eq!(&buf[..len], b"/proc/7/stat\0");
    }

    #[test]
    fn only_numbers_are_pids() {
        assert_eq!(parse_pid(b"123"), Some(123));
        for name in [&b"self"[..], b"", b"0", b"12a", b"99999999999"] {
            assert_eq!(parse_pid(name), None, "{name:?}");
        }
    }

    #[test]
    fn descendants_are_marked_whatever_the_order() {
        // root 10: 10 -> 30 -> 20 -> 40 (pids out of order, as after wrap-around); 50 is not ours.
        let mut entries =
            [(40, 20), (20, 30), (50, 1), (30, 10), (10, 1)].map(|(pid, ppid)| Entry { pid, ppid, below: false });
        mark_below(&mut entries, 10);
        let below: Vec<Pid> = entries.iter().filter(|e| e.below).map(|e| e.pid).collect();
        assert_eq!(below, vec![20, 30, 40]);
    }

    #[test]
    fn a_scan_of_proc_sees_this_process() {
        let mut tree = Tree::new();
        tree.scan(-1, &[]);
        let me = sys::own_pid();
        assert!(tree.entries[..tree.len].iter().any(|e| e.pid == me && e.ppid == sys::parent_pid()));
    }
}
