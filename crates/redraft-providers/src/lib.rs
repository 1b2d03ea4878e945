//! Proposer adapters: each turns a [`redraft_core::ChatRequest`] into a
//! [`redraft_core::ChatResponse`] and classifies what went wrong into a
//! [`redraft_core::ProviderError`].
//!
//! Key design decision: adapters never retry and never sleep for backoff. Whether and when
//! to retry is a decision of the loop ([`redraft_core::RetryPolicy`]); adapters only report
//! transport failures precisely (429 with its `Retry-After`, 5xx, timeouts, refused
//! connections, answers cut off) so that the decision can be made.
//!
//! Answers are read bounded: an HTTP body is streamed and reading stops at the provider's
//! `max_response_bytes` (a command's stdout is checked against it too), so a hostile or broken
//! backend cannot make redraft hold, re-send or store more than that.

pub mod anthropic;
pub mod command;
mod http;
pub mod mock;
pub mod ollama;
pub mod openai;

/// The largest answer a proposer call reads when the config sets no `max_response_bytes`:
/// 4 MiB. Reading stops there and the attempt ends with a `response_too_large` issue.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

pub use anthropic::{AnthropicConfig, AnthropicProvider};
pub use command::{AgentCommand, CommandProvider};
pub use mock::{MockProvider, MockReply, ScriptError};
pub use ollama::{OllamaConfig, OllamaProvider};
pub use openai::{OpenAiConfig, OpenAiProvider};
