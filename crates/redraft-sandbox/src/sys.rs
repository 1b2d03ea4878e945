//! The system calls behind the supervisor, each wrapped once: the crate's only `unsafe`.
//!
//! Most of these run in a forked child of a multi-threaded process: between `fork` and `exec`,
//! or in the supervisor, which never execs. There, only async-signal-safe functions may be
//! called, because another thread of the parent may have held any lock (the allocator's among
//! them) at the moment of the fork. So every wrapper here is one system call, or one function
//! POSIX lists as async-signal-safe; none takes a lock or allocates, and failures come back as a
//! bare [`Errno`]. The parent uses the signal functions too. One wrapper runs only in the
//! parent and may allocate: [`memory_file`], which holds the network filter for `bwrap`.
//!
//! Every `unsafe` block below is a call into libc with arguments that are plain integers or
//! pointers to live, correctly typed values owned by the caller; the SAFETY notes say what else
//! each one relies on.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::io::{self, Seek, Write};
use std::mem::MaybeUninit;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

pub(crate) use libc::{SIGCHLD, SIGCONT, SIGKILL, SIGTERM, SIGUSR1, SIGUSR2};

use crate::supervisor::Plan;

/// A process id.
pub(crate) type Pid = libc::pid_t;

/// The `errno` of a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Errno(pub(crate) i32);

impl Errno {
    fn last() -> Self {
        // Reads the thread's `errno`; allocates nothing.
        Errno(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
    }
}

impl From<Errno> for io::Error {
    fn from(errno: Errno) -> Self {
        // An OS error code is stored inline: no allocation.
        io::Error::from_raw_os_error(errno.0)
    }
}

fn check(ret: libc::c_int) -> Result<libc::c_int, Errno> {
    if ret == -1 { Err(Errno::last()) } else { Ok(ret) }
}

/// Makes the child `command` spawns run [`Plan::enter`] between `fork` and `exec`.
pub(crate) fn supervise_in_child(command: &mut tokio::process::Command, mut plan: Plan) {
    // SAFETY: the hook runs in the forked child of a (possibly) multi-threaded process, where
    // only async-signal-safe operations are sound. `Plan::enter` and everything it reaches
    // (`supervisor.rs`, `tree.rs`, `Limits::apply`) call only the wrappers in this module and
    // `rlimit::setrlimit` (one `setrlimit(2)`), and otherwise compute on memory the plan already
    // owns: buffers allocated in the parent before the fork, fixed-size arrays on the stack.
    // No allocation, no lock, no formatting, no std I/O.
    unsafe {
        command.pre_exec(move || plan.enter());
    }
}

fn prctl(option: libc::c_int, arg: libc::c_ulong) -> Result<(), Errno> {
    // SAFETY: the options used here take one integer argument; the rest are ignored zeros.
    check(unsafe { libc::prctl(option, arg, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong) }).map(drop)
}

/// Orphans anywhere below this process are re-parented to it rather than to init.
pub(crate) fn set_child_subreaper() -> Result<(), Errno> {
    prctl(libc::PR_SET_CHILD_SUBREAPER, 1)
}

/// `signal` is sent to this process when the thread that forked it exits (and again whenever it
/// is re-parented).
pub(crate) fn set_parent_death_signal(signal: i32) -> Result<(), Errno> {
    prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong)
}

/// No core dumps, and no `ptrace` by processes of the same user without `CAP_SYS_PTRACE`.
/// `exec` resets it.
pub(crate) fn set_not_dumpable() -> Result<(), Errno> {
    prctl(libc::PR_SET_DUMPABLE, 0)
}

/// The parent's process id.
pub(crate) fn parent_pid() -> Pid {
    // SAFETY: no arguments; cannot fail.
    unsafe { libc::getppid() }
}

/// This process's id.
pub(crate) fn own_pid() -> Pid {
    // SAFETY: no arguments; cannot fail.
    unsafe { libc::getpid() }
}

/// A set of signals.
#[derive(Clone, Copy)]
pub(crate) struct SignalSet(libc::sigset_t);

impl SignalSet {
    /// The set holding `signals`.
    pub(crate) fn of(signals: &[i32]) -> Self {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: `sigemptyset` initialises the set, `sigaddset` only sets bits in it (an invalid
        // signal number is refused with EINVAL and changes nothing).
        unsafe {
            libc::sigemptyset(set.as_mut_ptr());
            for &signal in signals {
                libc::sigaddset(set.as_mut_ptr(), signal);
            }
            SignalSet(set.assume_init())
        }
    }

    fn full() -> Self {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: `sigfillset` initialises the set.
        unsafe {
            libc::sigfillset(set.as_mut_ptr());
            SignalSet(set.assume_init())
        }
    }
}

fn sigprocmask(how: libc::c_int, set: &SignalSet, old: Option<&mut MaybeUninit<libc::sigset_t>>) -> Result<(), Errno> {
    let old = old.map_or(std::ptr::null_mut(), MaybeUninit::as_mut_ptr);
    // SAFETY: `set` is initialised; `old` is null or points to writable storage for a sigset_t.
    // The process is single-threaded where this is called, so `sigprocmask` is well defined.
    check(unsafe { libc::sigprocmask(how, &set.0, old) }).map(drop)
}

/// Blocks every signal that can be blocked; returns the mask as it was.
pub(crate) fn block_all_signals() -> Result<SignalSet, Errno> {
    let mut old = MaybeUninit::<libc::sigset_t>::uninit();
    sigprocmask(libc::SIG_SETMASK, &SignalSet::full(), Some(&mut old))?;
    // SAFETY: `sigprocmask` succeeded, so it wrote the old mask.
    Ok(SignalSet(unsafe { old.assume_init() }))
}

/// Sets the signal mask.
pub(crate) fn set_signal_mask(mask: &SignalSet) -> Result<(), Errno> {
    sigprocmask(libc::SIG_SETMASK, mask, None)
}

/// Gives `signal` its default action (a parent may have ignored it, or installed a handler that
/// makes no sense in a forked child).
pub(crate) fn default_action(signal: i32) -> Result<(), Errno> {
    // SAFETY: an all-zero `sigaction` is a valid value (SIG_DFL, no flags); its mask is then
    // initialised by `sigemptyset`; `sigaction` reads it and writes nothing back (null `old`).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut action.sa_mask);
        check(libc::sigaction(signal, &action, std::ptr::null_mut())).map(drop)
    }
}

/// Which side of a [`fork`] this is.
pub(crate) enum Forked {
    Child,
    Parent(Pid),
}

/// `fork(2)`.
pub(crate) fn fork() -> Result<Forked, Errno> {
    // SAFETY: called only from the supervisor, a single-threaded process. The at-fork handlers
    // (the allocator's, stdio's, any library's) already ran around the fork that created it,
    // which left the locks they guard consistent, and no other thread exists here to hold one,
    // so running them again cannot deadlock. Each side then continues with async-signal-safe code
    // only (and `exec`, in the child).
    match unsafe { libc::fork() } {
        -1 => Err(Errno::last()),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid)),
    }
}

fn close_range(first: libc::c_uint, last: libc::c_uint) -> Result<(), Errno> {
    // SAFETY: `close_range(2)` (Linux 5.9+) takes three integers and only closes descriptors.
    let ret = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0 as libc::c_uint) };
    if ret == -1 { Err(Errno::last()) } else { Ok(()) }
}

/// Closes every file descriptor but `keep` (which must be above 2).
pub(crate) fn close_all_fds_except(keep: RawFd) {
    let Ok(keep) = libc::c_uint::try_from(keep) else { return };
    let ranges = [(0, keep.saturating_sub(1)), (keep.saturating_add(1), libc::c_uint::MAX)];
    for (first, last) in ranges {
        if first > last {
            continue;
        }
        if close_range(first, last).is_ok() {
            continue;
        }
        // Before Linux 5.9: one by one, up to the highest descriptor this process may have.
        for fd in first..=last.min(fd_limit()) {
            // SAFETY: closing a descriptor that is not open fails harmlessly with EBADF.
            unsafe { libc::close(fd as libc::c_int) };
        }
    }
}

/// Makes every descriptor above stderr close-on-exec except `keep`: across the coming `exec` the
/// program inherits stdio and `keep`, whatever else this process has open (a descriptor opened
/// without `O_CLOEXEC` by a library, or inherited by redraft from whoever started it).
pub(crate) fn inherit_only(keep: Option<RawFd>) -> Result<(), Errno> {
    // SAFETY: `close_range(2)` with CLOSE_RANGE_CLOEXEC (Linux 5.11+) takes three integers and
    // only sets the close-on-exec flag of open descriptors.
    let ret = unsafe {
        libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, libc::c_uint::MAX, libc::CLOSE_RANGE_CLOEXEC)
    };
    if ret == -1 {
        // Before Linux 5.11: one by one, up to the highest descriptor this process may have.
        for fd in 3..=fd_limit() {
            // SAFETY: F_SETFD on a descriptor that is not open fails harmlessly with EBADF.
            unsafe { libc::fcntl(fd as libc::c_int, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
    if let Some(fd) = keep {
        // SAFETY: F_SETFD takes an integer flag; it changes only `fd`'s close-on-exec flag.
        check(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) })?;
    }
    Ok(())
}

/// The soft `RLIMIT_NOFILE`, at most 2^20.
fn fd_limit() -> libc::c_uint {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid, writable rlimit.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    let cur = if ok { limit.rlim_cur } else { 1 << 20 };
    libc::c_uint::try_from(cur.min(1 << 20)).unwrap_or(1 << 20)
}

/// What `waitpid(-1, …, WNOHANG)` found.
pub(crate) enum Waited {
    /// A child ended with this wait status.
    Exited { pid: Pid, status: i32 },
    /// Children exist and none has ended yet.
    Running,
    /// No child is left.
    NoChildren,
}

/// Reaps one ended child, if there is one.
pub(crate) fn wait_any() -> Waited {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid, writable int.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        match pid {
            0 => return Waited::Running,
            pid if pid > 0 => return Waited::Exited { pid, status },
            _ => match Errno::last() {
                Errno(libc::EINTR) => continue,
                Errno(libc::ECHILD) => return Waited::NoChildren,
                // Not expected; the caller's loop tries again.
                _ => return Waited::Running,
            },
        }
    }
}

/// A signal taken by [`wait_signal`].
pub(crate) struct Received {
    pub(crate) signal: i32,
    /// The sending process (for `kill`), or the child (for `SIGCHLD`).
    pub(crate) sender: Pid,
}

/// Takes one pending signal of `set` (which must be blocked), waiting at most `timeout`.
pub(crate) fn wait_signal(set: &SignalSet, timeout: Duration) -> Option<Received> {
    let timeout = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: timeout.subsec_nanos() as libc::c_long, // below 10^9: fits everywhere
    };
    let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
    // SAFETY: all three pointers point to live values of the right types.
    let signal = unsafe { libc::sigtimedwait(&set.0, info.as_mut_ptr(), &timeout) };
    if signal < 0 {
        return None; // timed out (EAGAIN) or interrupted
    }
    // SAFETY: `sigtimedwait` filled `info`; every signal taken here (kill, SIGCHLD, the parent
    // death signal) carries a sender pid.
    let sender = unsafe { info.assume_init_ref().si_pid() };
    Some(Received { signal, sender })
}

/// Sends `signal` to process `pid` (never to a group: `pid` must be positive).
pub(crate) fn send_signal(pid: Pid, signal: i32) -> Result<(), Errno> {
    if pid <= 0 {
        return Err(Errno(libc::EINVAL));
    }
    // SAFETY: `kill(2)` with a positive pid addresses that one process.
    check(unsafe { libc::kill(pid, signal) }).map(drop)
}

/// Sends `signal` to every process in group `pgid` (which must be above 1).
pub(crate) fn signal_group(pgid: Pid, signal: i32) -> Result<(), Errno> {
    if pgid <= 1 {
        return Err(Errno(libc::EINVAL));
    }
    // SAFETY: `kill(2)` with a negative pid below -1 addresses that process group only.
    check(unsafe { libc::kill(-pgid, signal) }).map(drop)
}

/// The monotonic clock.
pub(crate) fn monotonic_now() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    Duration::new(u64::try_from(now.tv_sec).unwrap_or(0), u32::try_from(now.tv_nsec).unwrap_or(0))
}

/// Writes `bytes` to `fd`, ignoring failure (the reader may be gone).
pub(crate) fn write_ignoring_errors(fd: RawFd, bytes: &[u8]) {
    // SAFETY: `bytes` is valid for reads of its length.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
}

/// Ends this process with `code` at once (no destructors, no atexit handlers, no flushing).
pub(crate) fn exit(code: i32) -> ! {
    // SAFETY: `_exit(2)` is async-signal-safe and never returns.
    unsafe { libc::_exit(code) }
}

/// Ends this process by `signal`, so that its parent sees the same wait status as if the signal
/// had struck it; no core file is written.
pub(crate) fn die_by(signal: i32) -> ! {
    let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `none` is a valid rlimit; lowering a limit is always allowed.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &none) };
    let _ = default_action(signal);
    let _ = sigprocmask(libc::SIG_UNBLOCK, &SignalSet::of(&[signal]), None);
    let _ = send_signal(own_pid(), signal);
    // Only a signal that does not terminate gets here.
    exit(128 + signal)
}

/// An open directory, read with `getdents64(2)`; closed on drop.
pub(crate) struct Dir(RawFd);

impl Dir {
    pub(crate) fn open(path: &CStr) -> Result<Self, Errno> {
        // SAFETY: `path` is NUL-terminated.
        let fd = check(unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) })?;
        Ok(Dir(fd))
    }

    /// Fills `buf` with `linux_dirent64` records; 0 at the end.
    pub(crate) fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, self.0, buf.as_mut_ptr(), buf.len()) };
        usize::try_from(n).map_err(|_| Errno::last())
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed only here.
        unsafe { libc::close(self.0) };
    }
}

/// Reads the start of the file at `path` into `buf`; returns how many bytes.
pub(crate) fn read_file(path: &CStr, buf: &mut [u8]) -> Result<usize, Errno> {
    // SAFETY: `path` is NUL-terminated.
    let fd = check(unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: `rest` is valid for writes of its length.
        let n = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        match usize::try_from(n) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(_) if Errno::last() == Errno(libc::EINTR) => continue,
            Err(_) => {
                let errno = Errno::last();
                // SAFETY: `fd` is ours.
                unsafe { libc::close(fd) };
                return Err(errno);
            }
        }
    }
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    Ok(filled)
}

/// A new file in memory (`memfd_create(2)`, close-on-exec) holding `bytes`, its offset at the
/// start. Called in the parent, not between `fork` and `exec`.
pub(crate) fn memory_file(name: &CStr, bytes: &[u8]) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated; the flag is an integer.
    let ret = unsafe { libc::syscall(libc::SYS_memfd_create, name.as_ptr(), libc::MFD_CLOEXEC) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(ret).map_err(|_| io::Error::other("memfd_create returned no descriptor"))?;
    // SAFETY: `fd` was just created by this call and nothing else owns it.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(file.into())
}
