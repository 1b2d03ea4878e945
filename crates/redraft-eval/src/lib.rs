//! Evaluator adapters: independent checks that judge an artifact.
//!
//! Key design decision: an evaluator that *rejects* returns `Ok(Verdict)` with
//! `passed == false`; `Err` is kept for an evaluator that *broke*. Everything that can be
//! checked before the first attempt (a schema that does not compile, a file that does not
//! exist) fails at construction, so a bad evaluator never costs a model call.

pub mod exec;
pub mod http;
pub mod judge;
pub mod kind;
pub mod schema;

pub use exec::ExecEvaluator;
pub use http::HttpEvaluator;
pub use judge::JudgeEvaluator;
pub use kind::{Kind, KindError, KindEvaluator, Kinds, LlmCheck};
pub use schema::{Formats, RefError, SchemaError, SchemaEvaluator};
