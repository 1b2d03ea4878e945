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
//! - **No secret leaves.** The session's writer redacts every message it carries: a known
//!   secret (an API key, say, that a model or its server repeated) becomes `[redacted]` in tool
//!   results, tool errors and notifications alike.
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
mod redact;
mod reply;
mod server;
mod submit;
mod target;

pub use args::{DecideArgs, ExampleArgs, SubmitArgs, ValidateArgs};
pub use redraft::runner::SUBMITTED_FEEDBACK_TEMPLATE as SUBMIT_FEEDBACK_TEMPLATE;
pub use server::{McpSetup, RedraftMcp};
pub use submit::DEFAULT_MAX_ATTEMPTS;

use rmcp::ServiceExt;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::redact::RedactingWriter;

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
    serve_io(RedraftMcp::new(setup), tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serve `server` over a byte stream (a socket, an in-memory duplex in tests) until the other
/// end closes it.
pub async fn serve<S>(server: RedraftMcp, stream: S) -> Result<(), McpError>
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (reader, writer) = tokio::io::split(stream);
    serve_io(server, reader, writer).await
}

/// Serve `server`, reading requests from `reader` and writing to `writer` (stdio, a pipe),
/// until the other end closes it. Every message written passes the redaction of known secrets
/// ([`redraft::core::secrets`]): no tool result or error carries an API key.
pub async fn serve_io<R, W>(server: RedraftMcp, reader: R, writer: W) -> Result<(), McpError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let running =
        server.serve((reader, RedactingWriter::new(writer))).await.map_err(|e| McpError::Start(e.to_string()))?;
    running.waiting().await.map_err(|e| McpError::Run(e.to_string()))?;
    Ok(())
}
