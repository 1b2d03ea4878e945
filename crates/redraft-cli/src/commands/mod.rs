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

/// How a command ended, beyond usage errors (which are `Err` and exit 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1: the run failed, no JSON was found, the document is invalid.
    Failed,
}
