//! Proposer adapters: each turns a [`redraft_core::ChatRequest`] into a
//! [`redraft_core::ChatResponse`] and classifies what went wrong into a
//! [`redraft_core::ProviderError`].
//!
//! Key design decision: adapters never retry and never sleep for backoff. Whether and when
//! to retry is a decision of the loop ([`redraft_core::RetryPolicy`]); adapters only report
//! transport failures precisely (429 with its `Retry-After`, 5xx, timeouts, refused
//! connections) so that the decision can be made.

pub mod anthropic;
pub mod command;
mod http;
pub mod mock;
pub mod ollama;
pub mod openai;

pub use anthropic::{AnthropicConfig, AnthropicProvider};
pub use command::{AgentCommand, CommandProvider};
pub use mock::{MockProvider, MockReply, ScriptError};
pub use ollama::{OllamaConfig, OllamaProvider};
pub use openai::{OpenAiConfig, OpenAiProvider};
