//! Run verifier and agent commands for redraft: each in its own process group, with a timeout,
//! stdout and stderr captured and capped, stdin fed and closed, and an optional sandbox.
//!
//! Two decisions shape the crate:
//!
//! - **The whole group dies.** Every command leads a new process group. At the timeout the group
//!   gets `SIGTERM`, then `SIGKILL` after a grace period; processes a command leaves behind when
//!   it exits get the same; dropping the [`run`] future (cancellation) sends `SIGKILL` to the
//!   group at once. No grandchild outlives its run. (A process that deliberately leaves the group
//!   with `setsid` or `setpgid` escapes this, except under bubblewrap, whose PID namespace is
//!   torn down with the command.)
//! - **Never unsandboxed when isolation was asked for.** A [`Sandbox`] with network off or a
//!   read-only root needs bubblewrap; when `bwrap` is missing or cannot create a sandbox, [`run`]
//!   refuses ([`SandboxError::BwrapMissing`], [`SandboxError::BwrapUnusable`]) and nothing runs.
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
//! Unix only; bubblewrap and the checks for leftover processes (`/proc`) are Linux's.

mod bwrap;
mod command;
mod error;
mod group;
mod limits;
mod quote;
mod run;
mod sandbox;

pub use bwrap::bwrap_available;
pub use command::{Command, DEFAULT_KILL_GRACE, DEFAULT_OUTPUT_CAP, DEFAULT_TIMEOUT, Output, Program};
pub use error::SandboxError;
pub use quote::shell_quote;
pub use run::run;
pub use sandbox::{PASSED_ENV, Sandbox};
