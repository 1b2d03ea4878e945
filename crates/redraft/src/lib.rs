//! redraft: bounded generate → check → feed back → retry loops around language models,
//! done once, properly.
//!
//! A proposer (an LLM) answers; an independent evaluator (a JSON Schema, a Rust closure, …)
//! checks the answer; every problem is fed back with the submission echoed and "Attempt i of
//! N"; the loop halts on success, max iterations, patience, a dollar budget, wall time or
//! stagnation, and returns the artifact — or the best so far — with the whole history, the
//! metrics and, on failure, an escalation a person can act on.
//!
//! Key design decision: one loop. The deciding half lives in `redraft-core` as a pure state
//! machine; [`Runner`] only carries its decisions out (calls, timeouts, retries, sleeps).
//! Every face — the CLI (agent mode included), the HTTP service, the OpenAI-compatible proxy
//! and the MCP server — turns its request into a [`RunSpec`], which
//! [`RunSpec::prepare`] checks (through the face's [`Guard`]) and turns into a [`Runner`]: a
//! run, a run whose answers are submitted ([`Runner::submitted`]), or one call to a model with
//! the loop's retries ([`Runner::call`]). [`recorder`] records runs in the store as they
//! happen.
//!
//! # Typed extraction
//!
//! ```
//! use redraft::providers::MockProvider;
//! use redraft::{Model, extract};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Person {
//!     name: String,
//!     age: u32,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A scripted model for the example; use `Model::from_name("openai/gpt-4o-mini")?` for real.
//! let model = Model::new(MockProvider::texts("mock/demo", [
//!     r#"Sure! {"name": "Ada Lovelace"}"#,               // missing `age`: fed back
//!     r#"{"name": "Ada Lovelace", "age": 36}"#,
//! ]));
//! let (person, metrics) = extract::<Person>(&model, "Who is this? Ada Lovelace, 36, London.").await?;
//! assert_eq!(person.age, 36);
//! assert_eq!(metrics.tokens_estimated, true); // the mock reports no usage
//! # Ok(())
//! # }
//! ```
//!
//! # The loop, with a schema and a Rust check
//!
//! ```
//! use redraft::providers::MockProvider;
//! use redraft::{HaltReason, Model, Runner};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = Model::new(MockProvider::texts("mock/demo", [
//!     r#"{"city": "Louisville"}"#,
//!     r#"```json
//! {"city": "Toledo"}
//! ```"#,
//! ]));
//! let runner = Runner::builder()
//!     .model(&model)
//!     .schema(json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}))
//!     .check("city_matches", |artifact| match artifact["city"].as_str() {
//!         Some("Toledo") => Ok(()),
//!         other => Err(format!("city {other:?} doesn't match contract city 'Toledo'")),
//!     })
//!     .max_iterations(3)
//!     .build()?;
//! let result = runner.run("Which city is the contract in?").await?;
//! assert_eq!(result.halted_because, HaltReason::Success);
//! assert_eq!(result.artifact, Some(json!({"city": "Toledo"})));
//! assert_eq!(result.history.len(), 2);
//! # Ok(())
//! # }
//! ```

pub mod check;
pub mod clock;
pub mod config;
pub mod error;
pub mod evaluators;
pub mod guard;
pub mod limits;
pub mod model;
pub mod queue;
pub mod recorder;
pub mod runner;
pub mod spec;
pub mod store;
pub mod typed;

pub use check::{Check, Rejection};
pub use config::Config;
pub use error::{ConfigError, ExtractionError, RunError};
pub use guard::{Face, Guard};
pub use model::Model;
pub use runner::{RunOptions, Runner, RunnerBuilder, Submission, SubmittedRun, new_run_id};
pub use spec::{PreparedRun, RunSpec, SpecSetup, WorkspaceSpec};
pub use typed::{Extractor, extract, schema_of};

pub use redraft_core as core;
pub use redraft_core::{
    AttemptRecord, AttemptStatus, ChatProvider, Escalation, EvalInput, Evaluator, HaltReason, Issue, Metrics, Mode,
    Policy, Price, PromptStyle, RunObserver, RunResult, RunStatus, Score, Severity, Strategy, Task, Verdict,
};
pub use redraft_eval as eval;
pub use redraft_providers as providers;
pub use redraft_sandbox as sandbox;
pub use tokio_util::sync::CancellationToken;
