//! Building a runner: everything that can be wrong is found by [`RunnerBuilder::build`],
//! before any model is called.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redraft_core::{
    ArtifactSource, Ceilings, ChatProvider, Engine, Evaluator, Fallback, Mode, Plan, Policy, Price, PromptStyle,
    RetryPolicy, RunObserver, Strategy, Task, Templates, ToolSpec,
};
use redraft_eval::{Formats, SchemaEvaluator};
use serde_json::Value;

use super::Runner;
use crate::check::{Check, Rejection};
use crate::error::ConfigError;
use crate::model::Model;

/// The schema given to the builder, compiled at `build`.
#[derive(Debug)]
enum SchemaSource {
    Inline(Value),
    File(PathBuf),
}

/// Builds a [`Runner`]. Everything that can be wrong is reported by [`RunnerBuilder::build`],
/// before any model is called.
#[derive(Debug)]
pub struct RunnerBuilder {
    provider: Option<Arc<dyn ChatProvider>>,
    fallbacks: Vec<Arc<dyn ChatProvider>>,
    evaluators: Vec<Arc<dyn Evaluator>>,
    schema: Option<SchemaSource>,
    formats: Formats,
    plan: Plan,
    retry: RetryPolicy,
    observers: Vec<Arc<dyn RunObserver>>,
    artifact_source: Option<Arc<dyn ArtifactSource>>,
}

impl Default for RunnerBuilder {
    fn default() -> Self {
        Self {
            provider: None,
            fallbacks: Vec::new(),
            evaluators: Vec::new(),
            schema: None,
            formats: Formats::Checked,
            plan: Plan::new(Task::default(), ""),
            retry: RetryPolicy::default(),
            observers: Vec::new(),
            artifact_source: None,
        }
    }
}

impl RunnerBuilder {
    /// Propose with `model` (its price is used for costs and budgets).
    pub fn model(mut self, model: &Model) -> Self {
        self.provider = Some(model.provider.clone());
        if model.price.is_some() {
            self.plan.price = model.price;
        }
        self
    }

    /// Propose with any [`ChatProvider`].
    pub fn provider(mut self, provider: Arc<dyn ChatProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// After a repeated answer, switch to this model (several: in the order given).
    pub fn fallback(mut self, model: &Model) -> Self {
        self.plan.fallbacks.push(Fallback { model: model.name().to_owned(), price: model.price });
        self.fallbacks.push(model.provider.clone());
        self
    }

    /// How much the temperature rises after a repeated answer (capped at 1.0). By default, 0.3.
    pub fn temperature_step(mut self, step: f32) -> Self {
        self.plan.temperature_step = step;
        self
    }

    /// Check artifacts against this JSON Schema (compiled once, at `build`).
    pub fn schema(mut self, schema: Value) -> Self {
        self.schema = Some(SchemaSource::Inline(schema));
        self
    }

    /// Check artifacts against the JSON Schema in this file (read and compiled at `build`);
    /// its `$ref`s to other files resolve in its directory.
    pub fn schema_file(mut self, path: impl AsRef<Path>) -> Self {
        self.schema = Some(SchemaSource::File(path.as_ref().to_owned()));
        self
    }

    /// What `format` does in the schema given to [`RunnerBuilder::schema`] or
    /// [`RunnerBuilder::schema_file`]. By default, [`Formats::Checked`].
    pub fn formats(mut self, formats: Formats) -> Self {
        self.formats = formats;
        self
    }

    /// Add an evaluator; all evaluators run, the run passes when all pass.
    pub fn evaluator(mut self, evaluator: Arc<dyn Evaluator>) -> Self {
        self.evaluators.push(evaluator);
        self
    }

    /// Add a Rust closure check over the artifact; its rejection is an ordinary failed
    /// attempt.
    pub fn check<F, E>(self, name: &str, f: F) -> Self
    where
        F: Fn(&Value) -> Result<(), E> + Send + Sync + 'static,
        E: Into<Rejection>,
    {
        self.evaluator(Arc::new(Check::new(name, move |a, _| f(a))))
    }

    /// Replace the whole policy.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.plan.policy = policy;
        self
    }

    /// Attempts at most. By default, 3.
    pub fn max_iterations(mut self, n: u32) -> Self {
        self.plan.policy.max_iterations = n;
        self
    }

    /// Server-side ceilings on what a policy may ask.
    pub fn ceilings(mut self, ceilings: Ceilings) -> Self {
        self.plan.ceilings = ceilings;
        self
    }

    /// Evaluate the raw text instead of extracted JSON.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.plan.mode = mode;
        self
    }

    /// An example instance to show the proposer. By default, a skeleton of the schema.
    pub fn example(mut self, example: Value) -> Self {
        self.plan.example = Some(example);
        self
    }

    /// A function whose call is the answer: OpenAI-compatible models are asked to call it
    /// and its arguments are the artifact. Give its `parameters` as the schema too (an
    /// evaluator), or they are not checked. By default, none.
    pub fn tool(mut self, tool: ToolSpec) -> Self {
        self.plan.tool = Some(Arc::new(tool));
        self
    }

    /// How the expected shape is shown. By default, `both`.
    pub fn prompt_style(mut self, style: PromptStyle) -> Self {
        self.plan.prompt_style = style;
        self
    }

    /// Whether an extracted answer is coerced toward the schema before it is checked, where
    /// that is unambiguous (`"€77.08"` for a number is 77.08, `"yes"` for a boolean is `true`),
    /// each change recorded among the attempt's repairs; a value that fits is never changed.
    /// By default, `true`.
    pub fn coerce(mut self, coerce: bool) -> Self {
        self.plan.coerce = coerce;
        self
    }

    /// How feedback is given. By default, `conversation`.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.plan.strategy = strategy;
        self
    }

    /// Override the prompt templates.
    pub fn templates(mut self, templates: Templates) -> Self {
        self.plan.templates = templates;
        self
    }

    /// Longest echo of a previous submission in feedback. By default, 4000 characters.
    pub fn feedback_max_chars(mut self, n: usize) -> Self {
        self.plan.feedback_max_chars = n;
        self
    }

    /// Sampling temperature. By default, the provider's.
    pub fn temperature(mut self, t: f32) -> Self {
        self.plan.temperature = Some(t);
        self
    }

    /// Output token limit per attempt. By default, the provider's.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.plan.max_tokens = Some(n);
        self
    }

    /// The backend's own parameters (`top_p`, `stop`, `seed`, … in OpenAI's names), sent with
    /// every attempt. A parameter the model's provider cannot take, or one redraft sets itself,
    /// fails [`Self::build`] by name.
    pub fn parameters(mut self, parameters: serde_json::Map<String, serde_json::Value>) -> Self {
        self.plan.parameters = Arc::new(parameters);
        self
    }

    /// The proposer's price, overriding the model's.
    pub fn price(mut self, price: Price) -> Self {
        self.plan.price = Some(price);
        self
    }

    /// How transport failures are retried (the count comes from the policy's
    /// `transport_retries`).
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Be told about every attempt as it happens (several observers are told in order).
    pub fn observer(mut self, observer: Arc<dyn RunObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// Take each attempt's artifact from `source` instead of the proposer's text (agent mode:
    /// the artifact is the workspace the agent edited).
    pub fn artifact_source(mut self, source: Arc<dyn ArtifactSource>) -> Self {
        self.artifact_source = Some(source);
        self
    }

    /// Check everything and build the runner.
    pub fn build(mut self) -> Result<Runner, ConfigError> {
        let provider = self.provider.ok_or(ConfigError::NoProvider)?;
        if let Some(schema) = self.schema {
            let evaluator = match schema {
                SchemaSource::Inline(schema) => SchemaEvaluator::of(&schema, self.formats)?,
                SchemaSource::File(path) => SchemaEvaluator::from_file(&path, self.formats)?,
            };
            self.evaluators.insert(0, Arc::new(evaluator));
        }
        self.plan.schema = self.evaluators.iter().find_map(|e| e.schema());
        self.plan.scoring = self.evaluators.iter().any(|e| e.scoring());
        self.plan.model = provider.name().to_owned();
        self.retry.max_retries = self.plan.policy.transport_retries;
        let mut proposers = vec![provider];
        proposers.extend(self.fallbacks);
        for name in self.plan.parameters.keys() {
            if let Some(instead) = redraft_core::reserved_parameter(name) {
                let message = format!("is set by redraft: {instead}");
                return Err(ConfigError::Invalid { key: format!("parameters.{name}"), message });
            }
            if let Some(why) = proposers.iter().find_map(|p| p.refused_parameter(name)) {
                return Err(ConfigError::Invalid { key: format!("parameters.{name}"), message: why });
            }
        }
        let runner = Runner {
            proposers,
            evaluators: self.evaluators,
            plan: self.plan,
            retry: self.retry,
            observers: self.observers,
            artifact_source: self.artifact_source,
        };
        // Check the plan (policy, templates, budget vs price) once now.
        Engine::validate(&runner.plan)?;
        Ok(runner)
    }
}
