//! The seccomp filter bubblewrap installs in every sandboxed command: no way into the host's
//! kernel keyrings or its terminal, and, with the network off, no new socket that could reach a
//! host process through the file system.
//!
//! In every bubblewrap sandbox:
//!
//! - `add_key`, `request_key`, `keyctl`: refused with `EPERM`. Keyrings are not namespaced: a
//!   command could read the keys of the user's session keyring and leave keys for the host.
//! - `ioctl(fd, TIOCSTI | TIOCLINUX, …)`: refused with `EPERM`. `TIOCSTI` types into a terminal:
//!   with redraft's terminal reachable, a command could queue commands for the user's shell to
//!   run after redraft exits (the command also runs in a session of its own, without a
//!   controlling terminal: `bwrap --new-session`).
//!
//! With the network off:
//!
//! A new network namespace cuts TCP, UDP and abstract Unix sockets, but a Unix socket bound to a
//! path (`/run/dbus/system_bus_socket`, `docker.sock`, an `ssh-agent`, a socket in the working
//! directory itself) is reached through the file system, which the sandbox shares with the host.
//! Rather than hide the places where such sockets usually live, the filter takes away the means to
//! connect to any of them: a command cannot make a socket that can address a path.
//!
//! Per system call:
//!
//! - `socket(domain, …)`: allowed for `AF_INET`, `AF_INET6` and `AF_NETLINK`, which live in the
//!   sandbox's own network namespace; refused with `EPERM` for every other family. That refuses
//!   `AF_UNIX`, and with it families a network namespace does not cover (`AF_VSOCK` reaches the
//!   hypervisor from a virtual machine).
//! - `socketpair(AF_UNIX, type, …)`: allowed for `SOCK_STREAM` and `SOCK_SEQPACKET` (flags such as
//!   `SOCK_CLOEXEC` aside). Such a pair is connected for good: `connect` on it fails with
//!   `EISCONN` and a destination address given to `sendto` is refused or ignored. A datagram pair
//!   is refused with `EPERM`: its sockets can `sendto` any path. Other families are refused.
//! - `io_uring_setup`: refused with `EPERM`, since a ring can create sockets (`IORING_OP_SOCKET`)
//!   without a `socket` system call.
//! - Any system call of another ABI than the native one — a 32-bit one (`int 0x80` on x86_64, the
//!   AArch32 compat layer on aarch64, where `socketcall` exists) or x32 on x86_64 — kills the
//!   process: its numbers mean other calls, and `socketcall` would bypass the checks above.
//! - Everything else is allowed.
//!
//! Every other way to a socket starts from one of these: `accept` needs a listening socket, a
//! descriptor received with `SCM_RIGHTS` comes from a peer, which can only be in the sandbox, and
//! the processes whose descriptors `pidfd_getfd` could take are all in the sandbox, under this
//! filter, having started with nothing but stdio (see `bwrap.rs`).
//!
//! Arguments are checked on their low 32 bits: the kernel takes `domain` and `type` as `int`, so
//! the high bits of the registers never count.
//!
//! This is classic BPF, run by the kernel on every system call; the program is a few dozen
//! instructions, assembled here from labelled steps.

use std::mem::offset_of;

/// `__AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE` (`linux/audit.h`).
const AUDIT_ARCH_64_LE: u32 = 0x8000_0000 | 0x4000_0000;
/// `AUDIT_ARCH_X86_64`.
const AUDIT_ARCH_X86_64: u32 = libc::EM_X86_64 as u32 | AUDIT_ARCH_64_LE;
/// `AUDIT_ARCH_AARCH64`.
const AUDIT_ARCH_AARCH64: u32 = libc::EM_AARCH64 as u32 | AUDIT_ARCH_64_LE;
/// `__X32_SYSCALL_BIT`: x32 system calls are numbered from here, under `AUDIT_ARCH_X86_64`.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
/// The socket type within `socketpair`'s `type` argument (the rest are flags).
const SOCK_TYPE_MASK: u32 = 0xf;

/// An architecture's numbers for the filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arch {
    /// `AUDIT_ARCH_*`, which the kernel reports for system calls of this ABI.
    audit: u32,
    socket: u32,
    socketpair: u32,
    io_uring_setup: u32,
    ioctl: u32,
    add_key: u32,
    request_key: u32,
    keyctl: u32,
    /// System call numbers from this one on belong to another ABI reported under the same
    /// `audit` value (x32, on x86_64).
    foreign_from: Option<u32>,
}

/// x86_64 (64-bit ABI; x32 and i386 calls are foreign).
pub(crate) const X86_64: Arch = Arch {
    audit: AUDIT_ARCH_X86_64,
    socket: 41,
    socketpair: 53,
    io_uring_setup: 425,
    ioctl: 16,
    add_key: 248,
    request_key: 249,
    keyctl: 250,
    foreign_from: Some(X32_SYSCALL_BIT),
};

/// aarch64, little-endian (AArch32 compat calls are foreign).
pub(crate) const AARCH64: Arch = Arch {
    audit: AUDIT_ARCH_AARCH64,
    socket: 198,
    socketpair: 199,
    io_uring_setup: 425,
    ioctl: 29,
    add_key: 217,
    request_key: 218,
    keyctl: 219,
    foreign_from: None,
};

/// The architecture this crate is built for, if the filter knows its numbers: x86_64 and
/// little-endian aarch64. The commands it runs are taken to be native programs of that machine.
pub(crate) const NATIVE: Option<Arch> = if cfg!(target_arch = "x86_64") {
    Some(X86_64)
} else if cfg!(all(target_arch = "aarch64", target_endian = "little")) {
    Some(AARCH64)
} else {
    None
};

/// The filter's verdicts (`SECCOMP_RET_*`).
const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const REFUSE: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

/// Offsets into `struct seccomp_data` of the 32-bit words the filter reads.
const NR: u32 = offset_of!(libc::seccomp_data, nr) as u32;
const ARCH: u32 = offset_of!(libc::seccomp_data, arch) as u32;
/// The low 32 bits of argument `n` (little-endian: the first word of the 64-bit slot).
const fn arg_low(n: u32) -> u32 {
    offset_of!(libc::seccomp_data, args) as u32 + 8 * n
}

/// Where a step jumps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Ioctl,
    Sockets,
    Socket,
    Socketpair,
    Allow,
    Refuse,
    Kill,
}

#[derive(Debug, Clone, Copy)]
enum To {
    Next,
    At(Label),
}

/// One step of the program; [`Step::Mark`] emits no instruction.
#[derive(Debug, Clone, Copy)]
enum Step {
    Mark(Label),
    /// `A = the 32-bit word at this offset of seccomp_data`.
    Load(u32),
    /// `A &= k`.
    And(u32),
    /// `if A == k`.
    IfEq(u32, To, To),
    /// `if A >= k` (unsigned).
    IfGe(u32, To, To),
    Return(u32),
}

/// The program for `arch`, as steps; with the socket rules when `network` is off.
fn steps(arch: &Arch, network: Network) -> Vec<Step> {
    use Label::*;
    use Step::*;
    use To::{At, Next};
    let mut steps = vec![Load(ARCH), IfEq(arch.audit, Next, At(Kill)), Load(NR)];
    if let Some(first) = arch.foreign_from {
        steps.push(IfGe(first, At(Kill), Next));
    }
    let after_ioctl = match network {
        self::Network::Off => At(Sockets),
        self::Network::On => At(Allow),
    };
    steps.extend([
        IfEq(arch.add_key, At(Refuse), Next),
        IfEq(arch.request_key, At(Refuse), Next),
        IfEq(arch.keyctl, At(Refuse), Next),
        IfEq(arch.ioctl, At(Ioctl), after_ioctl),
        Mark(Ioctl),
        Load(arg_low(1)),
        IfEq(TIOCSTI, At(Refuse), Next),
        IfEq(TIOCLINUX, At(Refuse), At(Allow)),
    ]);
    if network == self::Network::On {
        steps.extend([Mark(Allow), Return(ALLOW), Mark(Refuse), Return(REFUSE), Mark(Kill), Return(KILL)]);
        return steps;
    }
    steps.extend([
        Mark(Sockets),
        Load(NR),
        IfEq(arch.socket, At(Socket), Next),
        IfEq(arch.socketpair, At(Socketpair), Next),
        IfEq(arch.io_uring_setup, At(Refuse), At(Allow)),
        Mark(Socket),
        Load(arg_low(0)),
        IfEq(libc::AF_INET as u32, At(Allow), Next),
        IfEq(libc::AF_INET6 as u32, At(Allow), Next),
        IfEq(libc::AF_NETLINK as u32, At(Allow), At(Refuse)),
        Mark(Socketpair),
        Load(arg_low(0)),
        IfEq(libc::AF_UNIX as u32, Next, At(Refuse)),
        Load(arg_low(1)),
        And(SOCK_TYPE_MASK),
        IfEq(libc::SOCK_STREAM as u32, At(Allow), Next),
        IfEq(libc::SOCK_SEQPACKET as u32, At(Allow), At(Refuse)),
        Mark(Allow),
        Return(ALLOW),
        Mark(Refuse),
        Return(REFUSE),
        Mark(Kill),
        Return(KILL),
    ]);
    steps
}

/// One classic BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

impl Insn {
    fn new(code: u32, k: u32) -> Self {
        // Every opcode is below 0x100.
        Insn { code: code as u16, jt: 0, jf: 0, k }
    }
}

/// Resolves the labels; every jump must go forward by at most 255 instructions (as the kernel
/// requires of a seccomp filter).
fn assemble(steps: &[Step]) -> Result<Vec<Insn>, String> {
    let mut marks: Vec<(Label, usize)> = Vec::new();
    let mut at = 0;
    for step in steps {
        match step {
            Step::Mark(label) => marks.push((*label, at)),
            _ => at += 1,
        }
    }
    let mut program = Vec::with_capacity(at);
    for step in steps {
        let here = program.len();
        let offset = |to: To| -> Result<u8, String> {
            let target = match to {
                To::Next => return Ok(0),
                To::At(label) => marks.iter().find(|(l, _)| *l == label).map(|(_, at)| *at),
            };
            let target = target.ok_or_else(|| format!("label {to:?} is not in the program"))?;
            target
                .checked_sub(here + 1)
                .and_then(|offset| u8::try_from(offset).ok())
                .ok_or_else(|| format!("the jump from {here} to {target} is not forward within 255 instructions"))
        };
        let insn = match *step {
            Step::Mark(_) => continue,
            Step::Load(offset) => Insn::new(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, offset),
            Step::And(k) => Insn::new(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, k),
            Step::IfEq(k, yes, no) => {
                Insn { jt: offset(yes)?, jf: offset(no)?, ..Insn::new(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, k) }
            }
            Step::IfGe(k, yes, no) => {
                Insn { jt: offset(yes)?, jf: offset(no)?, ..Insn::new(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K, k) }
            }
            Step::Return(k) => Insn::new(libc::BPF_RET | libc::BPF_K, k),
        };
        program.push(insn);
    }
    Ok(program)
}

/// Whether the filter also holds the rules of a sandbox with the network off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Network {
    On,
    Off,
}

/// `TIOCSTI` and `TIOCLINUX` (`asm-generic/ioctls.h`, the same on x86_64 and aarch64).
const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;

/// The filter for `arch` as `bwrap --seccomp` reads it: `struct sock_filter` records in native
/// byte order, 8 bytes each.
pub(crate) fn filter(arch: &Arch, network: Network) -> Result<Vec<u8>, String> {
    let program = assemble(&steps(arch, network))?;
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for insn in program {
        bytes.extend(insn.code.to_ne_bytes());
        bytes.extend([insn.jt, insn.jf]);
        bytes.extend(insn.k.to_ne_bytes());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const AUDIT_ARCH_I386: u32 = 0x4000_0003;
    const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
    const AF_VSOCK: u64 = 40;
    const AF_PACKET: u64 = 17;
    const SOCK_RAW: u64 = 3;
    const SOCK_CLOEXEC_NONBLOCK: u64 = 0o2000000 | 0o4000;

    /// The filter decoded back from its bytes, checked as the kernel checks a seccomp filter:
    /// at most `BPF_MAXINSNS` instructions, only the opcodes used here, loads of aligned words
    /// inside `seccomp_data`, jumps forward within the program, ending in a return.
    fn decode(bytes: &[u8]) -> Vec<Insn> {
        assert_eq!(bytes.len() % 8, 0);
        let program: Vec<Insn> = bytes
            .chunks_exact(8)
            .map(|b| Insn {
                code: u16::from_ne_bytes([b[0], b[1]]),
                jt: b[2],
                jf: b[3],
                k: u32::from_ne_bytes([b[4], b[5], b[6], b[7]]),
            })
            .collect();
        assert!(!program.is_empty() && program.len() <= libc::BPF_MAXINSNS as usize);
        let size = std::mem::size_of::<libc::seccomp_data>() as u32;
        for (at, insn) in program.iter().enumerate() {
            match u32::from(insn.code) {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    assert!(insn.k % 4 == 0 && insn.k + 4 <= size, "load at {at}: {insn:?}");
                }
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K
                    || c == libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K =>
                {
                    let farthest = at + 1 + usize::from(insn.jt.max(insn.jf));
                    assert!(farthest < program.len(), "jump out of the program at {at}: {insn:?}");
                }
                c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K || c == libc::BPF_RET | libc::BPF_K => {}
                other => panic!("unexpected opcode {other:#x} at {at}"),
            }
        }
        let last = program[program.len() - 1];
        assert_eq!(u32::from(last.code), libc::BPF_RET | libc::BPF_K, "the program must end in a return");
        program
    }

    /// Runs the program on one system call, as the kernel would: `arch`, `nr` and `args` laid
    /// out as `struct seccomp_data` in native byte order.
    fn verdict(program: &[Insn], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; std::mem::size_of::<libc::seccomp_data>()];
        data[NR as usize..][..4].copy_from_slice(&nr.to_ne_bytes());
        data[ARCH as usize..][..4].copy_from_slice(&arch.to_ne_bytes());
        for (n, arg) in args.iter().enumerate() {
            let at = offset_of!(libc::seccomp_data, args) + 8 * n;
            data[at..][..8].copy_from_slice(&arg.to_ne_bytes());
        }
        let (mut pc, mut a) = (0usize, 0u32);
        loop {
            let insn = program[pc];
            let code = u32::from(insn.code);
            pc += 1;
            if code == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS {
                let at = insn.k as usize;
                a = u32::from_ne_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
            } else if code == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K {
                a &= insn.k;
            } else if code == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K {
                pc += usize::from(if a == insn.k { insn.jt } else { insn.jf });
            } else if code == libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K {
                pc += usize::from(if a >= insn.k { insn.jt } else { insn.jf });
            } else {
                return insn.k;
            }
        }
    }

    fn program(arch: &Arch) -> Vec<Insn> {
        decode(&filter(arch, Network::Off).unwrap())
    }

    /// `socket` with `domain` and `type`, with junk in the high 32 bits the kernel ignores.
    fn socket(arch: &Arch, program: &[Insn], domain: u64, kind: u64) -> u32 {
        let junk = 0xdead_beef_0000_0000;
        verdict(program, arch.audit, arch.socket, [domain | junk, kind | junk, 0, 0, 0, 0])
    }

    fn socketpair(arch: &Arch, program: &[Insn], domain: u64, kind: u64) -> u32 {
        verdict(program, arch.audit, arch.socketpair, [domain, kind, 0, 0, 0, 0])
    }

    #[test]
    fn unix_and_unknown_families_are_refused_and_the_namespace_families_allowed() {
        for arch in [X86_64, AARCH64] {
            let program = program(&arch);
            let domain = |domain: u64| socket(&arch, &program, domain, libc::SOCK_STREAM as u64);
            for refused in [libc::AF_UNIX as u64, AF_VSOCK, AF_PACKET, 0, 0xffff_ffff] {
                assert_eq!(domain(refused), REFUSE, "{arch:?} family {refused}");
            }
            for allowed in [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK] {
                assert_eq!(domain(allowed as u64), ALLOW, "{arch:?} family {allowed}");
            }
        }
    }

    #[test]
    fn only_connected_for_good_unix_socketpairs_are_allowed() {
        for arch in [X86_64, AARCH64] {
            let program = program(&arch);
            let unix = libc::AF_UNIX as u64;
            for kind in [libc::SOCK_STREAM as u64, libc::SOCK_SEQPACKET as u64] {
                assert_eq!(socketpair(&arch, &program, unix, kind), ALLOW, "{arch:?} type {kind}");
                assert_eq!(socketpair(&arch, &program, unix, kind | SOCK_CLOEXEC_NONBLOCK), ALLOW);
            }
            for kind in [libc::SOCK_DGRAM as u64, SOCK_RAW, libc::SOCK_DGRAM as u64 | SOCK_CLOEXEC_NONBLOCK] {
                assert_eq!(socketpair(&arch, &program, unix, kind), REFUSE, "{arch:?} type {kind}");
            }
            let inet = socketpair(&arch, &program, libc::AF_INET as u64, libc::SOCK_STREAM as u64);
            assert_eq!(inet, REFUSE);
        }
    }

    #[test]
    fn io_uring_is_refused_and_other_calls_allowed() {
        for (arch, connect, read) in [(X86_64, 42, 0), (AARCH64, 203, 63)] {
            let program = program(&arch);
            assert_eq!(verdict(&program, arch.audit, arch.io_uring_setup, [1, 0, 0, 0, 0, 0]), REFUSE);
            for nr in [connect, read, 500, X32_SYSCALL_BIT - 1] {
                assert_eq!(verdict(&program, arch.audit, nr, [1; 6]), ALLOW, "{arch:?} call {nr}");
            }
        }
    }

    #[test]
    fn keyrings_and_typing_into_a_terminal_are_refused_with_the_network_on_or_off() {
        for arch in [X86_64, AARCH64] {
            for network in [Network::On, Network::Off] {
                let program = decode(&filter(&arch, network).unwrap());
                for nr in [arch.add_key, arch.request_key, arch.keyctl] {
                    assert_eq!(verdict(&program, arch.audit, nr, [1; 6]), REFUSE, "{arch:?} {network:?} call {nr}");
                }
                let ioctl = |request: u64| verdict(&program, arch.audit, arch.ioctl, [0, request, 0, 0, 0, 0]);
                let junk = 0xdead_beef_0000_0000;
                assert_eq!(ioctl(u64::from(TIOCSTI)), REFUSE, "{arch:?} {network:?}");
                assert_eq!(ioctl(u64::from(TIOCSTI) | junk), REFUSE, "{arch:?} {network:?}");
                assert_eq!(ioctl(u64::from(TIOCLINUX)), REFUSE, "{arch:?} {network:?}");
                // TCGETS, FIONREAD: a terminal and a pipe still work.
                assert_eq!(ioctl(0x5401), ALLOW, "{arch:?} {network:?}");
                assert_eq!(ioctl(0x541B), ALLOW, "{arch:?} {network:?}");
            }
            // With the network on, sockets are the namespace's business, not the filter's.
            let program = decode(&filter(&arch, Network::On).unwrap());
            assert_eq!(socket(&arch, &program, libc::AF_UNIX as u64, libc::SOCK_STREAM as u64), ALLOW);
            assert_eq!(verdict(&program, arch.audit, arch.io_uring_setup, [1, 0, 0, 0, 0, 0]), ALLOW);
        }
    }

    #[test]
    fn calls_of_another_abi_kill_the_process() {
        for arch in [X86_64, AARCH64] {
            let program = program(&arch);
            for other in [AUDIT_ARCH_I386, AUDIT_ARCH_ARM, X86_64.audit, AARCH64.audit] {
                if other == arch.audit {
                    continue;
                }
                // 102 is socketcall on i386; 281 is socket on arm.
                for nr in [arch.socket, 102, 281, 0] {
                    assert_eq!(verdict(&program, other, nr, [1; 6]), KILL, "{arch:?} under {other:#x}");
                }
            }
        }
        let program = program(&X86_64);
        for x32 in [X32_SYSCALL_BIT, X32_SYSCALL_BIT | 41, u32::MAX] {
            assert_eq!(verdict(&program, X86_64.audit, x32, [1; 6]), KILL, "x32 call {x32:#x}");
        }
    }

    #[test]
    #[cfg(all(
        any(target_arch = "x86_64", target_arch = "aarch64"),
        target_pointer_width = "64",
        target_endian = "little"
    ))]
    fn the_native_numbers_are_libcs() {
        let Some(native) = NATIVE else { panic!("x86_64 and aarch64 are supported") };
        assert_eq!(
            (native.socket, native.socketpair, native.io_uring_setup),
            (libc::SYS_socket as u32, libc::SYS_socketpair as u32, libc::SYS_io_uring_setup as u32)
        );
        assert_eq!(
            (native.ioctl, native.add_key, native.request_key, native.keyctl),
            (libc::SYS_ioctl as u32, libc::SYS_add_key as u32, libc::SYS_request_key as u32, libc::SYS_keyctl as u32)
        );
        assert_eq!((TIOCSTI, TIOCLINUX), (libc::TIOCSTI as u32, libc::TIOCLINUX as u32));
    }

    #[test]
    fn a_jump_that_goes_nowhere_is_refused() {
        let missing = assemble(&[Step::IfEq(0, To::At(Label::Kill), To::Next), Step::Return(ALLOW)]);
        assert!(missing.unwrap_err().contains("not in the program"));
        let backward = assemble(&[Step::Mark(Label::Kill), Step::IfEq(0, To::At(Label::Kill), To::Next)]);
        assert!(backward.unwrap_err().contains("not forward"));
    }
}
