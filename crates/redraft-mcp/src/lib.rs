//! redraft's MCP face: `iterate`, `validate`, `example`, `submit` and `decide` as tools, served
//! over stdio with rmcp (the official Rust SDK).
//!
//! Key design decisions:
//! - **One connection is one session.** [`RedraftMcp`] holds the session's state — `submit`
//!   counts per target, `decide` checks per task — next to the setup every session shares.
//! - **One loop.** `iterate` goes through `redraft::recorder::start` like `redraft run` (the run
//!   is recorded in the store), and `submit` prepares its target like any run
//!   (`RunSpec::prepare_submitted`) and hands the agent's artifacts to the runner
//!   (`Runner::submitted`), so judging, counting, feedback, history and escalation are the
//!   loop's own.
//! - **Failures are answers.** A failed run is a normal result holding the escalation; a
//!   request that cannot run (bad arguments, unknown kind, no model, invalid schema) is a tool
//!   error (`isError: true`) whose text says what to change — never a protocol error, so the
//!   calling model can read it and correct itself.
//! - **stdout is the protocol.** Nothing here prints; logs go through `tracing`, which the
//!   binary sends to stderr.
//!
//! # Use
//!
//! An MCP host starts `redraft mcp` and speaks JSON-RPC on its stdin/stdout, e.g.
//! `{"command": "redraft", "args": ["mcp", "--kinds", "examples/staffing/kinds"]}`. The server
//! reads the same `redraft.toml` as the CLI (`--config`) and applies the same guard as the HTTP
//! face ([`redraft::guard`]): `exec:` commands must match `[server] exec_allow` word for word,
//! `http:` URLs `http_allow`, schema files stay in the working directory, `mock/PATH` models and
//! agent commands are refused, and requests are capped by `[server.ceilings]`. `iterate` runs are recorded in the store unless `--no-store`.

mod args;
mod reply;
mod server;
mod submit;
mod target;

pub use args::{DecideArgs, ExampleArgs, SubmitArgs, ValidateArgs};
pub use redraft::runner::SUBMITTED_FEEDBACK_TEMPLATE as SUBMIT_FEEDBACK_TEMPLATE;
pub use server::{McpSetup, RedraftMcp};
pub use submit::DEFAULT_MAX_ATTEMPTS;

use rmcp::transport::IntoTransport;
use rmcp::{RoleServer, ServiceExt};

/// The server stopped abnormally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    #[error("the MCP session could not start: {0}")]
    Start(String),
    #[error("the MCP session ended abnormally: {0}")]
    Run(String),
}

/// Serve one session over stdin/stdout until the client closes it.
pub async fn serve_stdio(setup: McpSetup) -> Result<(), McpError> {
    serve(RedraftMcp::new(setup), rmcp::transport::stdio()).await
}

/// Serve `server` over any transport rmcp accepts — a byte stream or a `(reader, writer)` pair
/// (stdio, a pipe, an in-memory duplex in tests) — until the other end closes it.
pub async fn serve<T, E, A>(server: RedraftMcp, transport: T) -> Result<(), McpError>
where
    T: IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = server.serve(transport).await.map_err(|e| McpError::Start(e.to_string()))?;
    running.waiting().await.map_err(|e| McpError::Run(e.to_string()))?;
    Ok(())
}
