//! Run verifier and agent commands for redraft: each under a supervisor of its own, with a
//! timeout, stdout and stderr captured under one cap, stdin fed and closed, and an optional
//! sandbox.
//!
//! Two decisions shape the crate:
//!
//! - **Every process the command started dies with it.** [`run`] spawns a small supervisor
//!   process that forks the command and is a *child subreaper*: orphans below it are re-parented
//!   to it, so it sees every descendant of the command, including processes that double-fork or
//!   leave the process group with `setsid` or `setpgid`. When the command exits, the processes it
//!   left behind get `SIGTERM`, then `SIGKILL` after a grace period; at the timeout every process
//!   of the command gets the same; dropping the [`run`] future (cancellation), or this process
//!   dying, kills them all at once. The supervisor exits only when none is left.
//! - **Never unsandboxed when isolation was asked for.** A [`Sandbox`] with network off or a
//!   read-only root needs bubblewrap; when `bwrap` is missing or cannot create a sandbox, [`run`]
//!   refuses ([`SandboxError::BwrapMissing`], [`SandboxError::BwrapUnusable`]) and nothing runs.
//!   Network off also needs a seccomp filter keeping the command from the host's Unix sockets,
//!   which exists for x86_64 and aarch64 ([`SandboxError::NetworkFilterUnsupported`] elsewhere).
//!
//! What the supervisor cannot stop: a process of the command that kills the supervisor itself
//! (any process of the same user may signal it) leaves its descendants to init, and a process
//! started by another process outside the command's tree (a daemon, `systemd-run`, `at`, `ssh`)
//! was never below it. Bubblewrap's PID namespace covers the first case.
//!
//! A timeout is not an error: [`run`] returns an [`Output`] with `timed_out` set.
//!
//! ```no_run
//! # async fn demo() -> Result<(), redraft_sandbox::SandboxError> {
//! use std::time::Duration;
//! use redraft_sandbox::{Command, Sandbox, run, shell_quote};
//!
//! let script = format!("pytest -q {}", shell_quote("tests/test it.py"));
//! let cmd = Command::shell(script, "/tmp/artifact")
//!     .timeout(Duration::from_secs(60))
//!     .sandbox(Sandbox { network: false, cpu_seconds: Some(30), ..Sandbox::default() });
//! let output = run(&cmd).await?;
//! println!("passed: {}\n{}", output.success(), output.combined());
//! # Ok(()) }
//! ```
//!
//! Linux only: the supervisor relies on `prctl(PR_SET_CHILD_SUBREAPER)` and `/proc`.

#[cfg(not(target_os = "linux"))]
compile_error!("redraft-sandbox needs Linux: it supervises commands with PR_SET_CHILD_SUBREAPER and /proc");

mod bwrap;
mod capture;
mod command;
mod control;
mod error;
mod gate;
mod limits;
mod quote;
mod run;
mod sandbox;
mod seccomp;
mod strays;
mod supervisor;
mod sys;
mod tree;

pub use bwrap::bwrap_available;
pub use command::{Command, DEFAULT_KILL_GRACE, DEFAULT_OUTPUT_CAP, DEFAULT_TIMEOUT, Output, Program};
pub use error::SandboxError;
pub use gate::{FILES_PER_COMMAND, command_files, commands_at_once};
pub use quote::shell_quote;
pub use run::run;
pub use sandbox::{PASSED_ENV, Sandbox};
pub use strays::{Strays, adopt_orphans, end_strays, keep_this_process_private};
