//! `redraft.toml`: raw serde types that mirror the file (this module and `sections`), loaded
//! in layers with each value's origin kept (`layers`, `env`). Runtime objects are built from
//! it elsewhere: providers by [`Config::model`] (in `crate::model`), evaluators and runs from
//! a spec. API keys come only from environment variables the config names.

mod credentials;
mod env;
mod layers;
mod sections;

use std::collections::BTreeMap;
use std::path::PathBuf;

use redraft_core::decide::DecideSettings;
use redraft_core::{Policy, Price, PromptStyle, Strategy};
use redraft_eval::Formats;
use redraft_sandbox::Sandbox;
use serde::{Deserialize, Serialize};

pub(crate) use self::credentials::register_passed_variables;
pub use self::layers::{Layer, Loaded};
pub use self::sections::{ProviderConfig, ProviderType, QueueConfig, ServerConfig, TelemetryConfig};
use crate::error::ConfigError;
use crate::spec::SandboxRequest;

/// The whole config file. Every key is optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `provider/model` used when a request names none.
    pub default_model: Option<String>,
    /// The provider of a model named without one (`gpt-4o-mini`). By default, the default
    /// model's provider; without a default model, `openai` when `OPENAI_BASE_URL` is set.
    pub default_provider: Option<String>,
    /// The model of `score:` and `llm:` judges. By default, none (those evaluators then refuse
    /// to start).
    pub judge_model: Option<String>,
    /// Models to switch to, in order, each time an answer repeats an earlier one.
    pub fallback_models: Vec<String>,
    /// How much the temperature rises after a repeated answer (capped at 1.0). By default, 0.3.
    pub temperature_step: f32,
    /// Where kinds live (`kinds/NAME/kind.toml`). By default, `./kinds`.
    pub kinds_dir: PathBuf,
    /// Where runs are recorded: a SQLite path or `sqlite://` URL, or `postgres://…`.
    /// By default, `.redraft/redraft.db`.
    pub database_url: Option<String>,
    /// Halting rules.
    pub policy: Policy,
    /// How the expected shape is shown: `schema`, `example` or `both`. By default, `both`.
    pub prompt_style: PromptStyle,
    /// How a model is asked again: `conversation` (its answer stays in the chat and the
    /// feedback follows) or `fresh` (one prompt, rebuilt with the earlier attempts and their
    /// issues). Agent commands are always given a fresh prompt. By default, `conversation`.
    pub strategy: Strategy,
    /// Longest echo of a previous submission (in feedback, and as the previous answer kept in a
    /// conversation), and the most issue text one attempt's feedback carries. By default, 4000.
    pub feedback_max_chars: usize,
    /// Whether JSON Schema `format`s are checked (`"date"` rejects `"July 4th"`); `false`
    /// makes `format` an annotation only, as JSON Schema 2020-12 has it. By default, `true`.
    pub check_formats: bool,
    /// Constrained decoding: every OpenAI-compatible provider is also sent the schema as
    /// `response_format` (the shape then comes from the decoder; every evaluator still runs; a
    /// server that refuses it is asked again without it, once per process, with a warning).
    /// `[providers.NAME] native_response_format` decides it for one provider. Other providers
    /// are prompted for the shape. By default, `true`: measured with a small local model, 40 of
    /// 40 flat extractions valid with it against 31 without.
    pub constrained: bool,
    /// Schema-aligned coercion: before an answer is checked, a value the schema plainly meant
    /// is given its shape (`"€77.08"` for a number is 77.08, `"yes"` for a boolean is `true`, an
    /// enum member in another case, one value for an array, JSON inside a string, a wrapper
    /// object), each change recorded among the attempt's repairs; a value that fits is never
    /// changed. `false` (the CLI's `--strict`) checks answers exactly as extracted. By
    /// default, `true`.
    pub coerce: bool,
    /// Sampling temperature. By default, the provider's.
    pub temperature: Option<f32>,
    /// Output token limit per attempt. By default, the provider's.
    pub max_tokens: Option<u32>,
    /// Named providers (`[providers.NAME]`).
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Prices per `provider/model` (`[models."openai/gpt-4o-mini"]`).
    pub models: BTreeMap<String, Price>,
    /// `redraft decide` and agent loops: `auto_retry_on_test_fail`, … (`[decide]`).
    pub decide: DecideSettings,
    /// Named sandbox specs for `exec:` evaluators and command proposers (`[sandboxes.NAME]`).
    pub sandboxes: BTreeMap<String, Sandbox>,
    /// `redraft serve`: address, tokens, limits, ceilings and the `exec:` allow-list (`[server]`).
    pub server: ServerConfig,
    /// The queue of runs shared by `serve` and `worker` processes: leases, bounds, waits
    /// (`[queue]`).
    pub queue: QueueConfig,
    /// Where traces go (`[telemetry]`).
    pub telemetry: TelemetryConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            default_model: None,
            default_provider: None,
            judge_model: None,
            fallback_models: Vec::new(),
            temperature_step: 0.3,
            kinds_dir: PathBuf::from("kinds"),
            database_url: None,
            policy: Policy::default(),
            prompt_style: PromptStyle::Both,
            strategy: Strategy::Conversation,
            feedback_max_chars: 4000,
            check_formats: true,
            constrained: true,
            coerce: true,
            temperature: None,
            max_tokens: None,
            providers: BTreeMap::new(),
            models: BTreeMap::new(),
            decide: DecideSettings::default(),
            sandboxes: BTreeMap::new(),
            server: ServerConfig::default(),
            queue: QueueConfig::default(),
            telemetry: TelemetryConfig::default(),
        }
    }
}

/// The commented default configuration (`redraft config default`).
pub const DEFAULT_CONFIG: &str = include_str!("default.toml");

impl Config {
    /// What JSON Schema `format` does in schemas this config checks with: `check_formats`.
    pub fn formats(&self) -> Formats {
        Formats::checked(self.check_formats)
    }

    /// The model to use: `requested`, else `default_model`.
    pub fn model_name(&self, requested: Option<&str>) -> Result<String, ConfigError> {
        let name = requested.map(str::to_owned).or_else(|| self.default_model.clone()).ok_or(ConfigError::NoModel)?;
        if name.contains('/') {
            return Ok(name);
        }
        // A bare model name goes to the default provider, else to the default model's.
        let provider = self
            .default_provider
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .or_else(|| self.default_model.as_deref().and_then(|d| d.split_once('/')).map(|(p, _)| p));
        match provider {
            Some(provider) => Ok(format!("{provider}/{name}")),
            None => Err(ConfigError::BareModel { name }),
        }
    }

    /// The sandbox `request` names: a `[sandboxes.NAME]`, or the inline spec itself. A name
    /// is only ever looked up. The sandbox is refused up front when it asks for isolation that
    /// bubblewrap provides and `bwrap` cannot run here: nothing is ever run unsandboxed when
    /// isolation was asked for.
    pub fn sandbox(&self, request: &SandboxRequest) -> Result<Sandbox, ConfigError> {
        let sandbox = match request {
            SandboxRequest::Inline(spec) => spec.clone(),
            SandboxRequest::Named(name) => self.sandboxes.get(name).cloned().ok_or_else(|| ConfigError::Invalid {
                key: "sandbox".into(),
                message: format!(
                    "no sandbox is named `{name}`; define `[sandboxes.{name}]` in redraft.toml, or give an inline spec as an object such as {{\"network\": false}}"
                ),
            })?,
        };
        if let Some(wants) = sandbox.needs_bwrap()
            && !redraft_sandbox::bwrap_available()
        {
            return Err(ConfigError::Sandbox(redraft_sandbox::SandboxError::BwrapMissing { wants }));
        }
        // What it passes through is secret, however this config was made.
        register_passed_variables(&sandbox.env);
        Ok(sandbox)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;

    #[test]
    fn parses_the_spec_example() {
        let c = Config::parse(
            r#"
default_model = "ollama_cloud/kimi-k2.6"

[policy]
max_iterations = 5
max_wall_time = "90s"

[models."openai/gpt-4o-mini"]
input_usd_per_mtok = 0.15
output_usd_per_mtok = 0.60

[providers.ollama_cloud]
type = "ollama"
base_url = "https://example.invalid"
api_key_env = "OLLAMA_API_KEY"
"#,
            Path::new("redraft.toml"),
        )
        .unwrap();
        assert_eq!(c.policy.max_iterations, 5);
        assert_eq!(c.policy.max_wall_time, Some(Duration::from_secs(90)));
        assert_eq!(c.models["openai/gpt-4o-mini"].output_usd_per_mtok, 0.60);
        assert_eq!(c.providers["ollama_cloud"].kind, ProviderType::Ollama);
        assert_eq!(c.model_name(Some("gpt-x")).unwrap(), "ollama_cloud/gpt-x");
    }

    #[test]
    fn the_default_config_file_is_the_default_config() {
        let parsed = Config::parse(DEFAULT_CONFIG, Path::new("default.toml")).unwrap();
        assert_eq!(parsed, Config::default());
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = Config::parse("max_iteration = 3\n", Path::new("r.toml")).unwrap_err().to_string();
        assert!(err.contains("r.toml") && err.contains("max_iteration"), "{err}");
        let err = Config::parse("[policy]\nmax_iterations = \"x\"\n", Path::new("r.toml")).unwrap_err().to_string();
        assert!(err.contains("max_iterations"), "{err}");
    }

    #[test]
    fn model_names_are_checked() {
        let c = Config::default();
        assert!(matches!(c.model_name(None), Err(ConfigError::NoModel)));
        assert!(matches!(c.model_name(Some("gpt-4o")), Err(ConfigError::BareModel { .. })));
        let named = |text: &str| Config::parse(text, Path::new("r.toml")).unwrap().model_name(Some("m")).unwrap();
        assert_eq!(named("default_provider = \"local\"\n"), "local/m");
        assert_eq!(named("default_model = \"a/b\"\n"), "a/m", "the default model's provider");
        assert_eq!(named("default_model = \"a/b\"\ndefault_provider = \"c\"\n"), "c/m", "the default provider first");
        let err = c.model("nope/x").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("`nope`") && err.contains("openai"), "{err}");
        assert_eq!(c.model("anthropic/claude-x").unwrap().provider.name(), "anthropic/claude-x");
        assert_eq!(c.model("ollama/llama3").unwrap().provider.name(), "ollama/llama3");
        let err = c.model("command/claude").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("[providers.claude]"), "{err}");
    }

    #[test]
    fn a_response_limit_of_zero_is_refused_naming_the_key() {
        for kind in ["openai", "anthropic", "ollama"] {
            let text = format!("[providers.p]\ntype = \"{kind}\"\nmax_response_bytes = 0\n");
            let c = Config::parse(&text, Path::new("r.toml")).unwrap();
            let err = c.model("p/m").err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains("`providers.p.max_response_bytes`") && err.contains("4194304"), "{err}");
        }
        let c = Config::parse(
            "[providers.a]\ntype = \"command\"\ncommand = \"cat\"\nmax_response_bytes = 0\n",
            Path::new("r.toml"),
        )
        .unwrap();
        let err = c.model("command/a").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("`providers.a.max_response_bytes`"), "{err}");
    }

    #[test]
    fn openai_models_carry_their_price() {
        let mut c = Config::default();
        c.models.insert("openai/m".into(), Price { input_usd_per_mtok: 1.0, output_usd_per_mtok: 2.0 });
        let m = c.model("openai/m").unwrap();
        assert_eq!(m.provider.name(), "openai/m");
        assert_eq!(m.price.unwrap().output_usd_per_mtok, 2.0);
        assert!(c.model("openai/other").unwrap().price.is_none());
    }
}
