//! The `redraft` command.
//!
//! Key design decision: stdout carries data only (the artifact, or the JSON result with
//! `--json`); progress, logs and escalations go to stderr. Exit codes are decided in one
//! place: 0 success, 1 a failed run (or no JSON / an invalid document), 2 bad usage or
//! configuration — in which case nothing was sent to a model.

// The `print!` family, shadowed for the whole crate (these definitions come before every
// module): what the binary prints passes the redaction of known secrets (`redacted`).
#[allow(unused_macros)]
macro_rules! print {
    ($($arg:tt)*) => { $crate::redacted::print(format_args!($($arg)*)) };
}
#[allow(unused_macros)]
macro_rules! println {
    () => { $crate::redacted::print(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::redacted::print(format_args!("{}\n", format_args!($($arg)*))) };
}
macro_rules! eprint {
    ($($arg:tt)*) => { $crate::redacted::eprint(format_args!($($arg)*)) };
}
macro_rules! eprintln {
    () => { $crate::redacted::eprint(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::redacted::eprint(format_args!("{}\n", format_args!($($arg)*))) };
}

mod args;
mod commands;
mod input;
mod output;
mod redacted;
mod telemetry;
mod until;

/// mimalloc gives memory back to the system once a burst of runs is over (the system
/// allocator keeps a server's peak for good), and holds up under many threads.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Called by each runtime thread as it goes to sleep: frees the pages its heap no longer
/// uses and purges them from the process. mimalloc only does this on the owning thread's next
/// allocation, so a thread that falls idle after a burst (most of a server's life) would
/// otherwise keep the burst's memory: about 200 MiB after 5,000 runs, 40 MiB with this.
///
/// A busy thread sleeps thousands of times a second, for microseconds, and a collection
/// walks its whole heap and hands back pages it faults in again moments later (a tenth of a
/// server's CPU in a burst of 5,000 runs when it collected every 10 ms). So a thread collects
/// at most every [`COLLECT_EVERY`] while it is busy, and every [`COLLECT_EVERY_IDLE`] once
/// the process is quiet: its last sleep lasted [`IDLE_SLEEP`] or more, or at most
/// [`FEW_TASKS`] tasks are left. The second is what catches the end of a burst: a thread that
/// goes to sleep as the last runs finish may not wake again for a long time, and must not keep
/// the burst's memory meanwhile.
fn give_back_memory() {
    let now = std::time::Instant::now();
    let slept_long = SLEPT.get() >= IDLE_SLEEP;
    PARKED.set(Some(now));
    let since = LAST_COLLECT.get().map(|last| now.duration_since(last));
    if since.is_some_and(|since| since < COLLECT_EVERY_IDLE) {
        return;
    }
    // Between the two limits, only a quiet process collects (the task count is read only then).
    if since.is_some_and(|since| since < COLLECT_EVERY) && !slept_long && !few_tasks() {
        return;
    }
    LAST_COLLECT.set(Some(now));
    // SAFETY: `mi_collect` takes no pointer and only touches the calling thread's heap and
    // mimalloc's own arenas, under mimalloc's locks; it may be called at any time.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_collect(true)
    }
    trim_c_heap(now);
}

/// Whether the runtime has at most [`FEW_TASKS`] tasks alive (its own background ones and a
/// few requests): a burst is over.
fn few_tasks() -> bool {
    tokio::runtime::Handle::try_current().is_ok_and(|h| h.metrics().num_alive_tasks() <= FEW_TASKS)
}

/// Called by each runtime thread as it wakes: how long it slept.
fn woke() {
    if let Some(parked) = PARKED.get() {
        SLEPT.set(parked.elapsed());
    }
}

thread_local! {
    /// When this thread last collected its heap.
    static LAST_COLLECT: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
    /// When this thread last went to sleep.
    static PARKED: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
    /// How long its last sleep lasted.
    static SLEPT: std::cell::Cell<std::time::Duration> = const { std::cell::Cell::new(std::time::Duration::ZERO) };
}

/// C code in the process (SQLite's page caches, on the threads of its connections) allocates
/// from the C library's heap, which keeps what a closed connection freed. Hand its free pages
/// back too, at most every [`TRIM_EVERY`] for the whole process.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_c_heap(now: std::time::Instant) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    static LAST_MS: AtomicU64 = AtomicU64::new(0);
    let since_start = now.saturating_duration_since(*EPOCH.get_or_init(|| now));
    let now_ms = u64::try_from(since_start.as_millis()).unwrap_or(u64::MAX);
    let last = LAST_MS.load(Ordering::Relaxed);
    let due = now_ms.saturating_sub(last) >= TRIM_EVERY.as_millis() as u64;
    if !due || LAST_MS.compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed).is_err() {
        return;
    }
    // SAFETY: `malloc_trim` takes no pointer and works under the C heap's own locks; glibc
    // documents it as safe to call from any thread at any time.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_c_heap(_now: std::time::Instant) {}

/// How often the C library's heap is trimmed, at most.
const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// How often a busy runtime thread going to sleep gives memory back, at most.
const COLLECT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// How often a quiet one does, at most.
const COLLECT_EVERY_IDLE: std::time::Duration = std::time::Duration::from_millis(10);

/// This many tasks alive or fewer make the process quiet.
const FEW_TASKS: usize = 64;

/// A sleep this long or longer makes a thread quiet.
const IDLE_SLEEP: std::time::Duration = std::time::Duration::from_millis(50);

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::commands::Outcome;

fn main() -> ExitCode {
    redacted::install_panic_hook();
    // Before anything holds a key: the commands redraft starts run as the same user, and must not
    // read redraft's environment or memory through /proc.
    if let Err(e) = redraft::sandbox::keep_this_process_private() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_park(give_back_memory)
        .on_thread_unpark(woke)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    // Logs, and traces when an OTLP endpoint is configured (sent from the runtime).
    let telemetry = {
        let _runtime = runtime.enter();
        match telemetry::init(cli.log_format, cli.verbose, cli.config.as_deref()) {
            Ok(telemetry) => telemetry,
            Err(e) => return exit_code(Err(e)),
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => commands::run::run(args, cli.config.as_deref()).await,
            Command::Extract(args) => commands::extract::run(args),
            Command::Validate(args) => commands::validate::run(args, cli.config.as_deref()),
            Command::Until(args) => until::run(args, cli.config.as_deref()).await,
            Command::Config(which) => commands::config::run(which, cli.config.as_deref()),
            Command::Runs(which) => commands::runs::run(which, cli.config.as_deref()).await,
            Command::Kinds(which) => commands::kinds::run(which, cli.config.as_deref()),
            Command::Decide(args) => commands::decide::run(args, cli.config.as_deref()),
            Command::Serve(args) => commands::serve::run(args, cli.config.as_deref()).await,
            Command::Worker(args) => commands::worker::run(args, cli.config.as_deref()).await,
            Command::Mcp(args) => commands::mcp::run(args, cli.config.as_deref()).await,
        }
    });
    runtime.block_on(telemetry.shutdown());
    // Dropping the tasks left (runs a stopping server handed back) tells their checks to stop;
    // a check that never looks (a user's own code) is not waited for past this.
    runtime.shutdown_timeout(BLOCKING_GRACE);
    exit_code(outcome)
}

/// How long the work left on blocking threads may take to end when the process exits.
const BLOCKING_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// The one place that maps outcomes and errors to exit codes.
fn exit_code(outcome: anyhow::Result<Outcome>) -> ExitCode {
    match outcome {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failed) => ExitCode::from(1),
        Err(e) => {
            // After a model or an agent ran: 1, as a failed run; 2 says nothing was sent.
            let (e, code) = match e.downcast::<commands::AfterRun>() {
                Ok(after) => (after.0, 1),
                Err(e) => (e, 2),
            };
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {e}");
            ExitCode::from(code)
        }
    }
}
