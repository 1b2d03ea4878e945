//! One module per subcommand.

pub mod config;
pub mod decide;
pub mod extract;
pub mod kinds;
pub mod mcp;
pub mod run;
pub mod runs;
pub mod serve;
pub mod validate;
pub mod worker;

/// How a command ended, beyond errors (`Err`: exit 2 when nothing was sent to a model, 1 when
/// the error came after a model or an agent ran, see [`AfterRun`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1: the run failed, no JSON was found, the document is invalid.
    Failed,
}

/// An error that came after an agent or a model ran: the command exits 1, since exit 2 says
/// that nothing was sent to a model.
#[derive(Debug)]
pub struct AfterRun(pub anyhow::Error);

impl std::fmt::Display for AfterRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for AfterRun {}

/// Mark an error as coming after a model or an agent ran.
pub fn after_run(e: impl Into<anyhow::Error>) -> anyhow::Error {
    anyhow::Error::new(AfterRun(e.into()))
}

/// A token cancelled when the user presses Ctrl-C: the run in flight halts as `cancelled`,
/// its attempt recorded.
pub fn cancel_on_ctrl_c() -> redraft::CancellationToken {
    let cancel = redraft::CancellationToken::new();
    let on_ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_ctrl_c.cancel();
        }
    });
    cancel
}

/// The progress lines on stderr, when `when` asks for them (`auto`: when stderr is a
/// terminal).
pub fn progress_lines(
    when: crate::args::Progress,
    max_iterations: u32,
) -> Option<std::sync::Arc<dyn redraft::RunObserver>> {
    use std::io::IsTerminal;
    let show = match when {
        crate::args::Progress::Always => true,
        crate::args::Progress::Never => false,
        crate::args::Progress::Auto => std::io::stderr().is_terminal(),
    };
    show.then(|| std::sync::Arc::new(crate::output::ProgressLines { max_iterations }) as _)
}
