//! Rust closures as evaluators: a rejection is an ordinary failed attempt, under the same
//! budget as any other. A closure runs on a blocking thread, off those that serve requests; one
//! that may compute for long should be an [`Evaluator`] instead, which sees
//! [`EvalInput::cancel`] and can stop when its verdict is no longer wanted (a closure runs on
//! until it returns, though nothing waits for it past the attempt's time).

use std::fmt;

use redraft_core::{EvalInput, Evaluator, EvaluatorError, Issue, Verdict, codes};
use serde_json::Value;

/// Why a closure check rejected an artifact. Build it from a message, an [`Issue`] or a
/// list of issues.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection(pub Vec<Issue>);

impl From<String> for Rejection {
    fn from(message: String) -> Self {
        Rejection(vec![Issue::new("", codes::CHECK, message)])
    }
}

impl From<&str> for Rejection {
    fn from(message: &str) -> Self {
        Rejection::from(message.to_owned())
    }
}

impl From<Issue> for Rejection {
    fn from(issue: Issue) -> Self {
        Rejection(vec![issue])
    }
}

impl From<Vec<Issue>> for Rejection {
    fn from(issues: Vec<Issue>) -> Self {
        Rejection(issues)
    }
}

type CheckFn = dyn Fn(&Value, &Value) -> Result<(), Rejection> + Send + Sync;

/// A closure `(artifact, context) -> Result<(), Rejection>` used as an evaluator.
pub struct Check {
    name: String,
    f: Box<CheckFn>,
}

impl Check {
    /// A check called `name`.
    pub fn new<F, E>(name: impl Into<String>, f: F) -> Self
    where
        F: Fn(&Value, &Value) -> Result<(), E> + Send + Sync + 'static,
        E: Into<Rejection>,
    {
        Self { name: name.into(), f: Box::new(move |a, c| f(a, c).map_err(Into::into)) }
    }
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Check").field("name", &self.name).finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl Evaluator for Check {
    fn name(&self) -> &str {
        &self.name
    }

    async fn evaluate(&self, input: EvalInput<'_>) -> Result<Verdict, EvaluatorError> {
        Ok(match (self.f)(input.artifact, input.context) {
            Ok(()) => Verdict::pass(),
            Err(Rejection(issues)) if issues.is_empty() => {
                Verdict::from_issues(vec![Issue::new("", codes::CHECK, format!("rejected by `{}`", self.name))])
            }
            Err(Rejection(issues)) => Verdict::from_issues(issues),
        })
    }
}
