//! Running a [`Command`]: spawn, feed, capture, supervise.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdin;

use crate::bwrap::{self, Probe};
use crate::capture::{self, Stream};
use crate::control::Supervised;
use crate::gate;
use crate::limits::Limits;
use crate::supervisor::{Inherit, Plan};
use crate::{Command, Output, Program, SandboxError, seccomp, sys};

/// How long output is still read after the supervisor is gone. Pipes normally reach end-of-file
/// at once; only a process that escaped (by killing its supervisor) and still holds them makes
/// this wait matter.
const DRAIN_LIMIT: Duration = Duration::from_millis(500);

/// Runs `cmd` under a supervisor of its own and returns what it did.
///
/// The supervisor is a child process that forks the command and stays until every process below
/// it is gone: it is a child subreaper, so processes that double-fork, call `setsid` or change
/// their process group are still below it. When the command exits, the processes it left behind
/// get `SIGTERM`, then `SIGKILL` after [`Command::kill_grace`]. At [`Command::timeout`] every
/// process of the command gets the same, and the result has `timed_out` set: a timeout is not an
/// error. Dropping the returned future (cancellation) kills every process of the command at once,
/// and so does this process dying.
///
/// Stdout and stderr are read concurrently and kept together up to [`Command::output_cap`] bytes:
/// what does not fit is cut from the middle of a stream, keeping its head and tail, with a marker
/// saying how many bytes were cut (the rest is read and dropped, so the command never blocks on a
/// full pipe). Stdin gets [`Command::stdin`] and is closed.
///
/// With a [`Sandbox`](crate::Sandbox) the environment is cleared (then [`PASSED_ENV`](crate::PASSED_ENV),
/// [`Sandbox::env`](crate::Sandbox::env) and [`Command::env`]), resource limits are set in the
/// command before `exec`, and when the sandbox wants network off or a read-only root the command
/// runs under bubblewrap, checked for at each call: without a working `bwrap` this returns
/// [`SandboxError::BwrapMissing`] or [`SandboxError::BwrapUnusable`] and runs nothing. Network off
/// also runs the command under a seccomp filter and with no descriptor but stdio (see
/// [`Sandbox::network`](crate::Sandbox::network)); on an architecture the filter does not know,
/// this returns [`SandboxError::NetworkFilterUnsupported`] and runs nothing. Under bubblewrap a
/// command killed by signal N is reported as exit code 128 + N (bubblewrap's own exit code),
/// unless it was terminated; a process the filter kills dies by `SIGSYS` (31).
///
/// Timeouts use tokio's clock: under a paused clock (`start_paused` tests) they fire as soon as
/// the runtime is idle, which it is while waiting for a real process, so test real commands
/// with the clock running.
///
/// # Errors
///
/// Refused sandboxes (above), an empty argv, an unusable working directory or read-only path, a
/// program that cannot be started, and I/O failures on the pipes.
///
/// Commands at once are bounded by the open-files limit (a sixteenth of it, 8 descriptors per
/// command): past the bound a command waits for another to end before it starts, so that many
/// commands at once never run the process out of descriptors.
pub async fn run(cmd: &Command) -> Result<Output, SandboxError> {
    let _room = gate::admit().await;
    run_admitted(cmd).await
}

async fn run_admitted(cmd: &Command) -> Result<Output, SandboxError> {
    let mut launch = Launch::prepare(cmd).await?;
    let started = Instant::now();
    let io_error = |what| move |source| SandboxError::Io { what, source };
    // The supervisor writes a byte to this pipe when the command ends.
    let (report_read, report_write) = report_pipe().map_err(io_error("starting the command"))?;
    let mut command = launch.command(cmd, &report_write);
    let mut child =
        command.spawn().map_err(|source| SandboxError::Spawn { program: launch.display.clone(), source })?;
    // The supervisor holds its own copy of the report pipe, the command its own of the filter;
    // the plan's buffers are no longer needed here.
    drop((report_write, command, launch.filter.take()));
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut supervised = Supervised::new(child, report_read).map_err(io_error("starting the command"))?;
    tracing::debug!(pid = supervised.pid(), program = %launch.display, "started a command");

    let mut out = Stream::new(cmd.output_cap);
    let mut err = Stream::new(cmd.output_cap);
    let (exit, pipes) = {
        let pipes =
            async { tokio::join!(pump(stdout, &mut out), pump(stderr, &mut err), feed(stdin, cmd.stdin.as_deref())) };
        let control = supervised.supervise(cmd.timeout, cmd.kill_grace);
        tokio::pin!(pipes, control);
        let mut finished_pipes = None;
        let exit = tokio::select! {
            exit = &mut control => exit,
            done = &mut pipes => {
                finished_pipes = Some(done);
                control.await
            }
        };
        if finished_pipes.is_none() {
            match tokio::time::timeout(DRAIN_LIMIT, &mut pipes).await {
                Ok(done) => finished_pipes = Some(done),
                Err(_) => tracing::warn!(
                    "the command's output pipes are still open after its supervisor is gone (a process escaped?); keeping what was read"
                ),
            }
        }
        (exit, finished_pipes)
    };
    let (status, timed_out) = exit.map_err(io_error("waiting for the command"))?;
    if let Some((read_out, read_err, write_in)) = pipes {
        read_out.map_err(io_error("reading the command's stdout"))?;
        read_err.map_err(io_error("reading the command's stderr"))?;
        write_in.map_err(io_error("writing the command's stdin"))?;
    }

    let [(stdout, stdout_truncated), (stderr, stderr_truncated)] = capture::finish(&out, &err, cmd.output_cap);
    Ok(Output {
        status: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        timed_out,
        duration: started.elapsed(),
    })
}

/// A pipe for the supervisor's report, both ends close-on-exec (the command never sees it). The
/// write end is above stderr.
fn report_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = io::pipe()?;
    Ok((OwnedFd::from(read), above_stderr(OwnedFd::from(write))?))
}

/// `fd`, or a copy of it above 2, where the spawner's stdio setup cannot overwrite it.
fn above_stderr(fd: OwnedFd) -> io::Result<OwnedFd> {
    // `try_clone` duplicates to the lowest free descriptor from 3 up.
    if fd.as_raw_fd() <= 2 { fd.try_clone() } else { Ok(fd) }
}

/// The seccomp filter of a bubblewrap sandbox (see `seccomp.rs`), in a file in memory for
/// `bwrap --seccomp`: close-on-exec, above stderr. The command's process clears close-on-exec on
/// it alone; `bwrap` reads and closes it. Where the filter has no numbers for this machine, a
/// sandbox with the network off is refused, and one with it on runs without the filter.
fn sandbox_filter(network: seccomp::Network) -> Result<Option<OwnedFd>, SandboxError> {
    let Some(arch) = seccomp::NATIVE else {
        return match network {
            seccomp::Network::Off => Err(SandboxError::NetworkFilterUnsupported { arch: std::env::consts::ARCH }),
            seccomp::Network::On => Ok(None),
        };
    };
    let fail = |source| SandboxError::Io { what: "preparing the sandbox's system call filter", source };
    let program = seccomp::filter(&arch, network)
        .map_err(|reason| fail(io::Error::other(format!("{reason} (a bug in redraft-sandbox)"))))?;
    let file = sys::memory_file(c"redraft-sandbox-filter", &program).map_err(fail)?;
    above_stderr(file).map(Some).map_err(fail)
}

/// The shell a [`Program::Shell`] runs in.
const SHELL: &str = "/bin/sh";

/// Everything checked and resolved before spawning.
#[derive(Debug)]
struct Launch {
    program: OsString,
    args: Vec<OsString>,
    /// The program's name in messages.
    display: String,
    workdir: PathBuf,
    /// `Some`: clear the environment and start from these variables.
    clean_env: Option<Vec<(OsString, OsString)>>,
    limits: Limits,
    /// The one descriptor above stderr the program inherits, if any.
    inherit: Inherit,
    /// With the network off, the seccomp filter `bwrap` reads (`--seccomp`); held until spawned.
    filter: Option<OwnedFd>,
}

impl Launch {
    async fn prepare(cmd: &Command) -> Result<Self, SandboxError> {
        let argv: Vec<OsString> = match &cmd.program {
            // The system's shell, by its path: never a `sh` that comes first on a `PATH` the
            // command's own directory may be part of (an activated virtual environment's `bin`).
            Program::Shell(script) => vec![SHELL.into(), "-c".into(), script.into()],
            Program::Argv(args) if args.is_empty() => return Err(SandboxError::EmptyCommand),
            Program::Argv(args) => args.iter().map(OsString::from).collect(),
        };
        let display = cmd.program.name().to_owned();
        let sandbox = cmd.sandbox.as_ref();
        let workdir = match sandbox.and_then(|s| s.workdir.as_ref()) {
            Some(dir) => cmd.workdir.join(dir),
            None => cmd.workdir.clone(),
        };
        check_dir(&workdir).await?;

        let Some(sandbox) = sandbox else {
            return Ok(Launch::direct(argv, display, workdir, None, Limits::default()));
        };
        let clean_env = sandbox.clean_env()?;
        let limits =
            Limits::of(sandbox).map_err(|source| SandboxError::Io { what: "preparing the resource limits", source })?;
        let Some(wants) = sandbox.needs_bwrap() else {
            return Ok(Launch::direct(argv, display, workdir, Some(clean_env), limits));
        };
        // Built first: without it, network off is refused before anything else is tried.
        let filter = sandbox_filter(if sandbox.network { seccomp::Network::On } else { seccomp::Network::Off })?;
        // `bwrap` is looked up on the PATH the command gets, like any program.
        let search_path = match cmd.env.iter().rev().find(|(name, _)| name == "PATH") {
            Some((_, value)) => Some(OsString::from(value)),
            None => std::env::var_os("PATH"),
        };
        let bwrap = match bwrap::probe(search_path.as_deref()).await {
            Probe::Ready(path) => path,
            Probe::Missing => return Err(SandboxError::BwrapMissing { wants }),
            Probe::Unusable { path, reason } => return Err(SandboxError::BwrapUnusable { wants, path, reason }),
        };
        let workdir = tokio::fs::canonicalize(&workdir)
            .await
            .map_err(|source| SandboxError::Workdir { path: workdir.clone(), source })?;
        let mut read_only = Vec::with_capacity(cmd.read_only_paths.len());
        for path in &cmd.read_only_paths {
            let path = cmd.workdir.join(path);
            let resolved =
                tokio::fs::canonicalize(&path).await.map_err(|source| SandboxError::ReadOnlyPath { path, source })?;
            read_only.push(resolved);
        }
        // No descriptor from outside (a connected socket, say) gets in; the filter's is for
        // `bwrap`, which closes it.
        let filter_fd = filter.as_ref().map(AsRawFd::as_raw_fd);
        let inherit = filter_fd;
        Ok(Launch {
            args: bwrap::args(sandbox, &workdir, &read_only, filter_fd, argv),
            display: bwrap.display().to_string(),
            program: bwrap.into_os_string(),
            workdir,
            clean_env: Some(clean_env),
            limits,
            inherit,
            filter,
        })
    }

    fn direct(
        mut argv: Vec<OsString>,
        display: String,
        workdir: PathBuf,
        clean_env: Option<Vec<(OsString, OsString)>>,
        limits: Limits,
    ) -> Self {
        let program = argv.remove(0);
        // A command inherits nothing but stdio, whatever this process holds open without
        // close-on-exec (a library's socket, a descriptor redraft itself inherited).
        Launch { program, args: argv, display, workdir, clean_env, limits, inherit: None, filter: None }
    }

    /// The command to spawn: the supervisor, which forks the program.
    fn command(&self, cmd: &Command, report: &OwnedFd) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.program);
        command.args(&self.args).current_dir(&self.workdir);
        command.stdin(if cmd.stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        if let Some(vars) = &self.clean_env {
            command.env_clear().envs(vars.iter().map(|(k, v)| (k, v)));
        }
        command.envs(cmd.env.iter().map(|(k, v)| (k, v)));
        // The supervisor leads a new process group, which the command joins: a last resort for
        // redraft, and out of reach of the terminal's Ctrl-C (redraft itself handles that).
        command.process_group(0);
        sys::supervise_in_child(&mut command, Plan::new(cmd.kill_grace, self.limits, report.as_raw_fd(), self.inherit));
        command
    }
}

/// Fails unless `dir` is an existing directory (so a missing one is not reported as a missing program).
async fn check_dir(dir: &Path) -> Result<(), SandboxError> {
    let fail = |source| SandboxError::Workdir { path: dir.to_path_buf(), source };
    let meta = tokio::fs::metadata(dir).await.map_err(fail)?;
    if meta.is_dir() { Ok(()) } else { Err(fail(io::ErrorKind::NotADirectory.into())) }
}

/// Reads `pipe` to its end into `sink`.
async fn pump<R: AsyncRead + Unpin>(pipe: Option<R>, sink: &mut Stream) -> io::Result<()> {
    let Some(mut pipe) = pipe else { return Ok(()) };
    let mut chunk = vec![0; 64 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) => return Ok(()),
            Ok(n) => sink.push(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Writes `data` to the command's stdin and closes it. A command that exits without reading it
/// all is fine.
async fn feed(pipe: Option<ChildStdin>, data: Option<&[u8]>) -> io::Result<()> {
    let (Some(mut pipe), Some(data)) = (pipe, data) else { return Ok(()) };
    let written = async {
        pipe.write_all(data).await?;
        pipe.shutdown().await
    };
    match written.await {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
    // `pipe` is dropped here, closing the command's stdin.
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::Semaphore;

    /// Four commands of 0.3 s each started at once under a bound of two: at no moment do more
    /// than two run.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commands_past_the_bound_wait_for_room() {
        let dir = tempfile::tempdir().unwrap();
        let gate = Semaphore::new(2);
        let command = |n: usize| {
            let script = format!("date +%s%N > start.{n}; sleep 0.3; date +%s%N > end.{n}");
            Command::shell(script, dir.path()).timeout(Duration::from_secs(20))
        };
        let commands: Vec<Command> = (0..4).map(command).collect();
        let bounded = |cmd: &Command| {
            let gate = &gate;
            let cmd = cmd.clone();
            async move {
                let _room = gate::admit_to(gate).await;
                run_admitted(&cmd).await
            }
        };
        let (a, b, c, d) =
            tokio::join!(bounded(&commands[0]), bounded(&commands[1]), bounded(&commands[2]), bounded(&commands[3]));
        for output in [a, b, c, d] {
            assert!(output.unwrap().success());
        }
        let read =
            |name: String| -> u128 { std::fs::read_to_string(dir.path().join(name)).unwrap().trim().parse().unwrap() };
        let spans: Vec<(u128, u128)> = (0..4).map(|n| (read(format!("start.{n}")), read(format!("end.{n}")))).collect();
        let most = spans.iter().map(|(at, _)| spans.iter().filter(|(s, e)| s <= at && at < e).count()).max();
        assert_eq!(most, Some(2), "commands running at once: {spans:?}");
    }
}
