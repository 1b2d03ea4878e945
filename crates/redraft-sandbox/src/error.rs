//! The one error type of the crate.

use std::io;
use std::path::PathBuf;

/// A command could not be run. A timeout is not an error (see [`Output::timed_out`](crate::Output::timed_out)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The sandbox asks for isolation that needs bubblewrap, and `bwrap` is not on `PATH`.
    /// Nothing was run: a command is never run unsandboxed when isolation was asked for.
    #[error(
        "the sandbox asks for {wants}, which needs bubblewrap, but `bwrap` is not on PATH; the command was not run\nhint: apt-get install bubblewrap"
    )]
    BwrapMissing {
        /// What needs bubblewrap: `"network off"` or `"a read-only root"`.
        wants: &'static str,
    },
    /// `bwrap` is installed but cannot create a sandbox here (user namespaces disabled, for
    /// example). Nothing was run.
    #[error(
        "the sandbox asks for {wants}, but bubblewrap (`{path}`) cannot create a sandbox here: {reason}; the command was not run\nhint: check that unprivileged user namespaces are allowed (`sysctl kernel.unprivileged_userns_clone`, or AppArmor's `kernel.apparmor_restrict_unprivileged_userns` on Ubuntu)"
    )]
    BwrapUnusable {
        /// What needs bubblewrap: `"network off"` or `"a read-only root"`.
        wants: &'static str,
        /// The `bwrap` that was tried.
        path: PathBuf,
        /// What `bwrap` said (its stderr), or why it could not be started.
        reason: String,
    },
    /// The sandbox turns the network off, and this build of the crate has no seccomp filter for
    /// the machine's architecture (it has one for x86_64 and aarch64). Without it, Unix sockets of
    /// the host would stay reachable through the file system, so nothing was run.
    #[error(
        "the sandbox asks for network off, which needs a seccomp filter keeping the command from host Unix sockets, and redraft-sandbox has one only for x86_64 and aarch64, not {arch}; the command was not run\nhint: run redraft on x86_64 or aarch64, or turn the sandbox's network on"
    )]
    NetworkFilterUnsupported {
        /// The architecture this crate was built for.
        arch: &'static str,
    },
    /// The program could not be started.
    #[error("cannot start `{program}`: {source}\nhint: check that `{program}` is installed and on PATH")]
    Spawn {
        /// The program that was started (`sh`, the first word of an argv, or `bwrap`).
        program: String,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// The working directory does not exist or is not a directory.
    #[error("the working directory `{path}` is not usable: {source}\nhint: check that it exists and is a directory")]
    Workdir {
        /// The directory that was asked for.
        path: PathBuf,
        /// Why it is not usable.
        #[source]
        source: io::Error,
    },
    /// A path to expose read-only inside bubblewrap does not exist.
    #[error("cannot expose `{path}` read-only inside the sandbox: {source}\nhint: check that the path exists")]
    ReadOnlyPath {
        /// The path that was asked for.
        path: PathBuf,
        /// Why it cannot be exposed.
        #[source]
        source: io::Error,
    },
    /// An argv command with no words.
    #[error("the command is empty\nhint: give at least the program to run")]
    EmptyCommand,
    /// A name in [`Sandbox::env`](crate::Sandbox::env) cannot be an environment variable name.
    #[error(
        "`{name}` is not an environment variable name\nhint: list variable names only in the sandbox's `env`, e.g. [\"CARGO_HOME\"]"
    )]
    EnvName {
        /// The offending name.
        name: String,
    },
    /// Some other I/O failure while running the command.
    #[error("{what} failed: {source}")]
    Io {
        /// What was being done, e.g. `"reading the command's stdout"`.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
}
