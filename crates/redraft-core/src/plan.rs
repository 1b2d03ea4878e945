//! The plan of a run: what is asked ([`Task`]), what is evaluated ([`Mode`]) and every
//! setting the loop decides by ([`Plan`]), fixed before the first attempt and checked as a
//! whole before anything is sent.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chat::{Message, Parameters, ToolSpec};
use crate::policy::{Ceilings, PlanError, Policy};
use crate::price::Price;
use crate::prompt::{PromptStyle, Strategy, Templates};

/// What is asked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// A JSON object available to templates and evaluators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// Earlier turns of a conversation, sent after the system message and before the prompt
    /// (the OpenAI-compatible proxy passes a client's chat this way). By default, none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<Message>,
}

impl Task {
    /// A task with only a prompt.
    pub fn new(prompt: impl Into<String>) -> Self {
        Self { prompt: prompt.into(), system: None, context: None, turns: Vec::new() }
    }
}

impl From<&str> for Task {
    fn from(prompt: &str) -> Self {
        Task::new(prompt)
    }
}

impl From<String> for Task {
    fn from(prompt: String) -> Self {
        Task::new(prompt)
    }
}

/// What is evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A JSON value extracted from the raw text. The default.
    #[default]
    Structured,
    /// The raw text itself (as a JSON string).
    Text,
}

/// Everything a run needs to decide, fixed before the first attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub task: Task,
    /// The proposer's `provider/model` name (for prices and messages).
    pub model: String,
    pub policy: Policy,
    pub ceilings: Ceilings,
    pub mode: Mode,
    /// The JSON Schema shown to the proposer, if any (shared by every run of a runner).
    pub schema: Option<Arc<Value>>,
    /// Whether an extracted artifact is coerced toward `schema` where that is unambiguous (a
    /// number written as text, `"yes"` for a boolean, an enum member in another case, …), each
    /// change recorded among the attempt's repairs. A value that fits is never changed. By
    /// default, `true`.
    pub coerce: bool,
    /// An example instance; by default a skeleton is generated from the schema.
    pub example: Option<Value>,
    pub prompt_style: PromptStyle,
    pub strategy: Strategy,
    pub templates: Templates,
    /// Longest echo of a previous submission in feedback. By default, 4000 characters.
    pub feedback_max_chars: usize,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// The proposer's price; needed for `cost_usd` and budgets.
    pub price: Option<Price>,
    /// Whether any evaluator grades on a scale (lowers the default threshold to 0.9).
    pub scoring: bool,
    /// Models to switch to, in order, each time an answer repeats an earlier one.
    /// By default, none.
    pub fallbacks: Vec<Fallback>,
    /// How much the temperature rises after a repeated answer (capped at 1.0). By default, 0.3.
    pub temperature_step: f32,
    /// Whether the proposer reads the first prompt. `false` when it wrote its own (an agent
    /// submitting over MCP): the first feedback then shows the shape `prompt_style` names
    /// (the schema, the example or both), once. By default, `true`.
    pub prompt_seen: bool,
    /// A function whose call is the answer (its parameters are `schema`). By default, none.
    pub tool: Option<Arc<ToolSpec>>,
    /// The backend's own parameters (`top_p`, `stop`, `seed`, …), sent with every attempt.
    /// By default, none.
    pub parameters: Parameters,
}

/// A model the loop may switch to after a repeated answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback {
    /// Its `provider/model` name.
    pub model: String,
    pub price: Option<Price>,
}

/// The temperature a rise starts from when none is set (the HTTP API's default).
pub const BASE_TEMPERATURE: f32 = 0.2;

impl Plan {
    /// A plan with every default for `task` proposed by `model`.
    pub fn new(task: Task, model: impl Into<String>) -> Self {
        Self {
            task,
            model: model.into(),
            policy: Policy::default(),
            ceilings: Ceilings::default(),
            mode: Mode::Structured,
            schema: None,
            coerce: true,
            example: None,
            prompt_style: PromptStyle::Both,
            strategy: Strategy::Conversation,
            templates: Templates::default(),
            feedback_max_chars: 4000,
            temperature: None,
            max_tokens: None,
            price: None,
            scoring: false,
            fallbacks: Vec::new(),
            temperature_step: 0.3,
            prompt_seen: true,
            tool: None,
            parameters: Parameters::default(),
        }
    }

    /// The name and price of proposer `index` (0 is the primary model, then the fallbacks).
    pub fn proposer(&self, index: usize) -> (&str, Option<Price>) {
        match index.checked_sub(1).and_then(|i| self.fallbacks.get(i)) {
            Some(f) => (&f.model, f.price),
            None => (&self.model, self.price),
        }
    }

    /// The plan's policy, sampling and budget settings.
    pub(crate) fn validate(&self) -> Result<(), PlanError> {
        self.policy.validate(&self.ceilings)?;
        crate::policy::validate_sampling(self.temperature, self.max_tokens)?;
        if let Some((name, value, instead)) = self
            .parameters
            .iter()
            .find_map(|(name, value)| crate::chat::reserved_parameter(name).map(|i| (name, value, i)))
        {
            return Err(PlanError::Invalid {
                key: format!("parameters.{name}"),
                value: value.to_string(),
                rule: format!("is set by redraft: {instead}"),
            });
        }
        if self.policy.max_budget_usd.is_some() {
            for index in 0..=self.fallbacks.len() {
                if let (model, None) = self.proposer(index) {
                    return Err(PlanError::BudgetWithoutPrice { model: model.to_owned() });
                }
            }
        }
        if !(self.temperature_step.is_finite() && (0.0..=1.0).contains(&self.temperature_step)) {
            return Err(PlanError::Invalid {
                key: "temperature_step".into(),
                value: self.temperature_step.to_string(),
                rule: "must be in [0, 1]".into(),
            });
        }
        Ok(())
    }
}
