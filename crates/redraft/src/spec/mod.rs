//! The run request: one shape for every face — the body of `POST /v1/iterate` and
//! `POST /v1/runs`, the MCP `iterate` arguments, what the proxy makes of a chat completion
//! request, what `redraft run` and `redraft until` store so that a run can be resumed. A spec is
//! turned into a runner and a task in one place (`prepare`).

mod prepare;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use redraft_core::duration::serde_human;
use redraft_core::{Ceilings, Directive, Message, OnEscalation, Policy, PromptStyle, Strategy, ToolSpec};
use redraft_eval::Formats;
use redraft_eval::kind::Kinds;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use self::prepare::{PreparedRun, WorkspaceSpec};
use crate::config::Config;
use crate::error::ConfigError;
use crate::guard::Guard;

/// One evaluator directive or several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Directives {
    One(String),
    Many(Vec<String>),
}

impl Directives {
    fn iter(&self) -> impl Iterator<Item = &String> {
        let v: Vec<&String> = match self {
            Directives::One(s) => vec![s],
            Directives::Many(v) => v.iter().collect(),
        };
        v.into_iter()
    }
}

/// What a run is asked to do, and within which limits. Every field but `prompt` is optional;
/// what is left out comes from the config.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// The task.
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// A JSON object shown to the proposer and to evaluators (rules read it as `context`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// A registered kind (`target_type` is accepted too): its schema, rules and LLM check.
    #[serde(default, alias = "target_type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// An inline JSON Schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// Evaluator directives: `schema:PATH`, `kind:NAME`, `exec:CMD`, `http:URL`,
    /// `score:CRITERION`, `llm:NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator: Option<Directives>,
    /// A named provider from the config; with `model`, the proposer is `provider/model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// `provider/model`, or a bare model for `provider` (or the default provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The backend's own parameters, in OpenAI's names (`{"top_p": 0.9, "stop": ["END"],
    /// "seed": 7}`): sent as they are to OpenAI-compatible servers, mapped for Anthropic and
    /// Ollama; one a provider cannot take is refused by name before anything is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<serde_json::Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patience: Option<u32>,
    #[serde(default, alias = "max_budget", skip_serializing_if = "Option::is_none")]
    pub max_budget_usd: Option<f64>,
    /// `"90s"`, `"5m"` or seconds.
    #[serde(default, with = "serde_human::option", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub max_wall_time: Option<Duration>,
    /// Per attempt (`timeout` is accepted too): `"120s"` or seconds.
    #[serde(default, alias = "timeout", with = "serde_human::option", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub attempt_timeout: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_limit: Option<u32>,
    /// `"await"`: a run that would fail waits for a person's answer instead (`"fail"`: it fails).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub on_escalation: Option<OnEscalation>,
    /// Evaluate the raw text instead of extracting JSON.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub text: bool,
    /// `schema`, `example` or `both`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub prompt_style: Option<PromptStyle>,
    /// How a model is asked again: `conversation` or `fresh`. By default, the config's
    /// `strategy` (`conversation`); agent commands always get a fresh prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub strategy: Option<Strategy>,
    /// The artifact file's extension for `exec:` evaluators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_ext: Option<String>,
    /// A sandbox for `exec:` evaluators and command proposers: a name from the config or an
    /// inline spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Value>,
    /// An agent command that proposes instead of a model (local faces only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<Vec<String>>,
    /// Earlier turns of a conversation (`[{"role": "user"|"assistant", "content": "…"}]`), sent
    /// before the prompt: how the OpenAI-compatible proxy passes a client's chat.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<serde_json::Value>")]
    pub turns: Vec<Message>,
    /// A function whose call is the answer (`{"name", "description"?, "parameters",
    /// "strict"?}`): OpenAI-compatible models are asked to call it, and its arguments are
    /// checked against `parameters` (which is the schema when `schema` is not set). How the
    /// proxy checks a forced tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub tool: Option<ToolSpec>,
    /// Whether JSON Schema `format`s are checked (`"date"` rejects `"July 4th"`); `false` makes
    /// `format` an annotation only. By default, the config's `check_formats` (`true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_formats: Option<bool>,
    /// Whether an answer is coerced toward the schema before it is checked (`"€77.08"` for a
    /// number is 77.08; each change is recorded as a repair); `false` checks it exactly as
    /// extracted. By default, the config's `coerce` (`true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coerce: Option<bool>,
    /// Agent mode (`redraft until`, local only): the artifact is the working directory the
    /// `agent` edits, judged by `verify`; files matching `protect` are put back whenever the
    /// agent changes them. Such a run is continued only by `redraft until`, which reads the
    /// workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub workspace: Option<WorkspaceSpec>,
    /// The answer must be a JSON object, any object (OpenAI's `json_object`): no schema is
    /// shown, and an object that is itself a JSON Schema (`{"type": "object"}`) is rejected
    /// as `schema_echo`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub json_object: bool,
}

/// Where a spec is turned into a run, and what that face allows.
#[derive(Debug, Clone)]
pub struct SpecSetup<'a> {
    pub config: &'a Config,
    /// Where commands run and relative paths resolve.
    pub workdir: PathBuf,
    /// What the face asking may do: everything locally; over HTTP and MCP what the server's
    /// allow-lists admit, and no agent commands.
    pub guard: Arc<Guard>,
    /// Upper bounds on what a request may ask for.
    pub ceilings: Ceilings,
    pub kinds: Option<Arc<Kinds>>,
}

impl<'a> SpecSetup<'a> {
    /// The local CLI: anything goes, in the current directory.
    pub fn local(config: &'a Config, workdir: PathBuf) -> Self {
        Self { config, workdir, guard: Arc::new(Guard::local()), ceilings: Ceilings::none(), kinds: None }
    }
}

impl RunSpec {
    /// The policy in force: the config's, overridden by the spec's fields.
    pub fn policy(&self, base: &Policy) -> Policy {
        let mut p = base.clone();
        p.max_iterations = self.max_iterations.unwrap_or(p.max_iterations);
        p.success_threshold = self.success_threshold.or(p.success_threshold);
        p.patience = self.patience.unwrap_or(p.patience);
        p.max_budget_usd = self.max_budget_usd.or(p.max_budget_usd);
        p.max_wall_time = self.max_wall_time.or(p.max_wall_time);
        p.attempt_timeout = self.attempt_timeout.unwrap_or(p.attempt_timeout);
        p.repeat_limit = self.repeat_limit.unwrap_or(p.repeat_limit);
        p.on_escalation = self.on_escalation.unwrap_or(p.on_escalation);
        p
    }

    /// What JSON Schema `format` does in this run's schemas: the spec's `check_formats`, else
    /// the config's.
    pub fn formats(&self, config: &Config) -> Formats {
        Formats::checked(self.check_formats.unwrap_or(config.check_formats))
    }

    /// The directives this spec names, `kind` first.
    pub fn directives(&self) -> Result<Vec<Directive>, ConfigError> {
        let mut out = Vec::new();
        if let Some(kind) = &self.kind {
            out.push(Directive::Kind(kind.clone()));
        }
        for text in self.evaluator.iter().flat_map(Directives::iter) {
            out.push(
                text.parse::<Directive>()
                    .map_err(|e| ConfigError::Invalid { key: "evaluator".into(), message: e.to_string() })?,
            );
        }
        Ok(out)
    }

    /// The `provider/model` name this spec asks for.
    pub fn model_name(&self, config: &Config) -> Result<String, ConfigError> {
        match (&self.provider, &self.model) {
            (Some(provider), Some(model)) if !model.starts_with(&format!("{provider}/")) => {
                Ok(format!("{provider}/{model}"))
            }
            (Some(provider), None) => Err(ConfigError::Invalid {
                key: "model".into(),
                message: format!("`provider` is `{provider}` but no `model` is named; add `\"model\": \"…\"`"),
            }),
            (_, model) => config.model_name(model.as_deref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_a_provider_cannot_take_or_redraft_sets_are_refused_before_a_run() {
        let text = "[providers.claude]\ntype = \"anthropic\"\n[providers.local]\ntype = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n";
        let config = Config::parse(text, std::path::Path::new("t.toml")).unwrap();
        let setup = SpecSetup::local(&config, std::env::temp_dir());
        let spec = |model: &str, parameters: serde_json::Value| RunSpec {
            prompt: "p".into(),
            model: Some(model.into()),
            parameters: parameters.as_object().cloned(),
            ..RunSpec::default()
        };
        let build = |spec: RunSpec| spec.prepare(&setup).map(|_| ());
        build(spec("claude/claude-x", serde_json::json!({"top_p": 0.9, "stop": ["END"]}))).unwrap();
        let err = build(spec("claude/claude-x", serde_json::json!({"seed": 7}))).unwrap_err().to_string();
        assert!(err.contains("parameters.seed") && err.contains("claude/claude-x"), "{err}");
        // An OpenAI-compatible server takes them all, its own included.
        build(spec("local/m", serde_json::json!({"seed": 7, "top_k": 40, "repetition_penalty": 1.1}))).unwrap();
        let err = build(spec("local/m", serde_json::json!({"messages": []}))).unwrap_err().to_string();
        assert!(err.contains("parameters.messages") && err.contains("set by redraft"), "{err}");
    }

    #[test]
    fn gateway_style_requests_parse() {
        let spec: RunSpec = serde_json::from_value(serde_json::json!({
            "prompt": "Staff contract C-7",
            "target_type": "fill",
            "provider": "ollama_cloud",
            "model": "kimi-k2.6",
            "context": {"city": "Toledo"},
            "max_iterations": 4,
            "max_budget": 0.5,
            "max_wall_time": "90s",
            "timeout": 30,
            "evaluator": ["exec:true", "score:polite"]
        }))
        .unwrap();
        assert_eq!(spec.kind.as_deref(), Some("fill"));
        assert_eq!(spec.max_budget_usd, Some(0.5));
        assert_eq!(spec.attempt_timeout, Some(Duration::from_secs(30)));
        assert_eq!(spec.model_name(&Config::default()).unwrap(), "ollama_cloud/kimi-k2.6");
        let d = spec.directives().unwrap();
        assert_eq!(d.len(), 3);
        let p = spec.policy(&Policy::default());
        assert_eq!((p.max_iterations, p.max_wall_time), (4, Some(Duration::from_secs(90))));
        assert!(serde_json::from_value::<RunSpec>(serde_json::json!({"prompt": "x", "max_iteration": 3})).is_err());
        // round trip: what the CLI stores is what it reads back
        let text = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<RunSpec>(&text).unwrap(), spec);
    }
}
