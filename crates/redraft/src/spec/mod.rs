//! The run request: one shape for every face — the body of `POST /v1/iterate` and
//! `POST /v1/runs`, the MCP `iterate` arguments, what the proxy makes of a chat completion
//! request, what `redraft run` and `redraft until` store so that a run can be resumed. A spec is
//! turned into a runner and a task in one place (`prepare`).

mod fields;
mod prepare;
mod words;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use redraft_core::duration::serde_human;
use redraft_core::{Ceilings, Directive, Message, OnEscalation, Origin, Policy, PromptStyle, Strategy, ToolSpec};
use redraft_eval::Formats;
use redraft_eval::kind::Kinds;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use self::fields::{ArtifactExt, Directives, SandboxRequest};
pub use self::prepare::{PreparedRun, WorkspaceSpec};
use crate::config::Config;
use crate::error::ConfigError;
use crate::guard::{Face, Guard};

/// What a run is asked to do, and within which limits. Every field but `prompt` is optional;
/// what is left out comes from the config.
///
/// The one wire type of a run request: the body of the HTTP API, the proxy's run options, the
/// MCP `iterate` arguments and the request a queued run is stored with all deserialize into
/// it, and each field is a typed value when it is read (see [`SandboxRequest`],
/// [`Directives`], [`ArtifactExt`]): nothing reads a request as JSON by key afterwards.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// The task for the model.
    pub prompt: String,
    /// A system message for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// A JSON object shown to the model and to the checks (a kind's rules read it as
    /// `context`, e.g. the contract a fill is for).
    #[serde(default, deserialize_with = "fields::object", skip_serializing_if = "Option::is_none")]
    pub context: Option<serde_json::Map<String, Value>>,
    /// A registered kind (artifact type) to produce, checked by its JSON Schema and rules
    /// (`target_type` is accepted too).
    #[serde(default, alias = "target_type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// An inline JSON Schema the answer must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// Evaluator directive(s), all of which must pass: `kind:NAME`, `schema:PATH`, `exec:CMD`
    /// (over the network, only commands the server allows), `http:URL`, `score:CRITERION` (an
    /// LLM judge), `llm:NAME`.
    #[serde(default, skip_serializing_if = "Directives::is_empty")]
    pub evaluator: Directives,
    /// A provider named in the config; `model` is then that provider's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model, as `provider/model` (`openai/gpt-4o-mini`, `ollama/qwen3`), or a bare model
    /// for `provider` (or the default provider); by default the config's `default_model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Sampling temperature, in [0, 2].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Output token limit per attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The backend's own parameters, in OpenAI's names (`{"top_p": 0.9, "stop": ["END"],
    /// "seed": 7}`): sent as they are to OpenAI-compatible servers, mapped for Anthropic and
    /// Ollama; one a provider cannot take is refused by name before anything is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<serde_json::Map<String, Value>>,
    /// Attempts at most (by default the config's, 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// The score in [0, 1] at or above which an answer passes (by default 1.0, or 0.9 with a
    /// scoring evaluator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<f64>,
    /// Halt after this many attempts in a row that do not improve the best score (by default
    /// off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patience: Option<u32>,
    /// Halt before an attempt that would take spending past this many USD (needs the model's
    /// price in the config; `max_budget` is accepted too).
    #[serde(default, alias = "max_budget", skip_serializing_if = "Option::is_none")]
    pub max_budget_usd: Option<f64>,
    /// Halt after this long, cancelling the attempt in flight: `"90s"`, `"5m"` or seconds.
    #[serde(default, with = "serde_human::option", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "words::duration")]
    pub max_wall_time: Option<Duration>,
    /// The limit of one attempt (by default 120 s): `"120s"` or seconds (`timeout` is accepted
    /// too).
    #[serde(default, alias = "timeout", with = "serde_human::option", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "words::duration")]
    pub attempt_timeout: Option<Duration>,
    /// Halt when the same answer comes this many times (0 is off; by default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_limit: Option<u32>,
    /// What a run that would fail does: `fail` (by default, the config's `on_escalation`) or
    /// `await`: it stops awaiting a person's answer (the run is kept in the store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "words::on_escalation")]
    pub on_escalation: Option<OnEscalation>,
    /// Check the raw text instead of a JSON value extracted from it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub text: bool,
    /// How the expected shape is shown to the model: `schema`, `example` or `both` (by
    /// default the config's, `both`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "words::prompt_style")]
    pub prompt_style: Option<PromptStyle>,
    /// How a model is asked again: `conversation` or `fresh`. By default, the config's
    /// `strategy` (`conversation`); agent commands always get a fresh prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "words::strategy")]
    pub strategy: Option<Strategy>,
    /// The artifact file's extension for `exec:` evaluators (`py`, `rs`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_ext: Option<ArtifactExt>,
    /// A sandbox for `exec:` evaluators and command proposers: the name of a
    /// `[sandboxes.NAME]` in the config (a string), or an inline spec (an object such as
    /// `{"network": false}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxRequest>,
    /// An agent command that proposes instead of a model (the local CLI only; refused over the
    /// network).
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

    /// How this face continues (resumes, answers) run `run_id`, whose request came from
    /// `origin`: never with more trust than the request had. The CLI continues a network run
    /// under the network's guard and ceilings (its config's `[server]`); a network face may not
    /// continue a run the user's own CLI started.
    pub fn continuing(&self, run_id: &str, origin: Origin) -> Result<SpecSetup<'a>, ConfigError> {
        match (self.guard.face(), origin) {
            (Face::Cli, Origin::Cli) => Ok(self.clone()),
            (Face::Cli, network) => Ok(SpecSetup {
                guard: Arc::new(Guard::network(network.into(), &self.config.server)?),
                ceilings: self.config.server.ceilings.clone(),
                ..self.clone()
            }),
            _ => self.guard.may_touch(run_id, origin).map(|()| self.clone()),
        }
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
    pub fn directives(&self) -> Vec<Directive> {
        self.kind.iter().map(|kind| Directive::Kind(kind.clone())).chain(self.evaluator.iter().cloned()).collect()
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
        let d = spec.directives();
        assert_eq!(d.len(), 3);
        let p = spec.policy(&Policy::default());
        assert_eq!((p.max_iterations, p.max_wall_time), (4, Some(Duration::from_secs(90))));
        assert!(serde_json::from_value::<RunSpec>(serde_json::json!({"prompt": "x", "max_iteration": 3})).is_err());
        // round trip: what the CLI stores is what it reads back
        let text = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<RunSpec>(&text).unwrap(), spec);
    }
}
