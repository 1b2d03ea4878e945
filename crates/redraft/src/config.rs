//! `redraft.toml`: raw serde types that mirror the file, checked into runtime objects by an
//! explicit `match`. API keys come only from environment variables the config names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use redraft_core::decide::DecideSettings;
use redraft_core::{ChatProvider, Policy, Price, PromptStyle};
use redraft_providers::{AgentCommand, CommandProvider, MockProvider, OpenAiConfig, OpenAiProvider, openai};
use redraft_sandbox::Sandbox;
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::model::Model;

/// The whole config file. Every key is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `provider/model` used when a request names none.
    pub default_model: Option<String>,
    /// Halting rules (SPEC 4).
    pub policy: Policy,
    /// How the expected shape is shown: `schema`, `example` or `both`. By default, `both`.
    pub prompt_style: PromptStyle,
    /// Longest echo of a previous submission in feedback. By default, 4000.
    pub feedback_max_chars: Option<usize>,
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
}

/// The provider types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderType {
    Openai,
    Anthropic,
    Ollama,
    Command,
    Mock,
}

/// `[providers.NAME]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    #[serde(rename = "type")]
    pub kind: ProviderType,
    /// Server address. By default, the type's ecosystem variable or its public endpoint.
    pub base_url: Option<String>,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// `mock` only: the script file (JSON Lines of replies).
    pub script: Option<PathBuf>,
    /// `command` only: the agent, run with `sh -c`; `{prompt}` is replaced by the quoted prompt.
    pub command: Option<String>,
    /// `command` only: where the agent runs. By default, the current directory.
    pub workdir: Option<PathBuf>,
    /// `command` only: a sandbox name from `[sandboxes]`, or an inline JSON spec.
    pub sandbox: Option<String>,
    /// One HTTP request's limit. By default, the policy's `attempt_timeout`.
    #[serde(default, with = "redraft_core::duration::serde_human::option")]
    pub request_timeout: Option<Duration>,
}

impl Config {
    /// Parse config text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse { path: origin.to_owned(), message: e.to_string() })
    }

    /// Read a config file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        Self::parse(&text, path)
    }

    /// The config file to use: `explicit` (an error if missing), else `$REDRAFT_CONFIG`,
    /// `./redraft.toml`, `$XDG_CONFIG_HOME/redraft/redraft.toml` (or `~/.config/…`); none is
    /// fine and gives the defaults.
    pub fn discover(explicit: Option<&Path>) -> Result<(Self, Option<PathBuf>), ConfigError> {
        if let Some(path) = explicit {
            return Ok((Self::from_file(path)?, Some(path.to_owned())));
        }
        if let Some(path) = std::env::var_os("REDRAFT_CONFIG").filter(|p| !p.is_empty()) {
            let path = PathBuf::from(path);
            return Ok((Self::from_file(&path)?, Some(path)));
        }
        let xdg = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
        let candidates =
            std::iter::once(PathBuf::from("redraft.toml")).chain(xdg.map(|d| d.join("redraft").join("redraft.toml")));
        for path in candidates {
            if path.is_file() {
                return Ok((Self::from_file(&path)?, Some(path)));
            }
        }
        Ok((Self::default(), None))
    }

    /// Apply `REDRAFT_*` environment overrides for the top-level keys.
    pub fn apply_env(&mut self) -> Result<(), ConfigError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        if let Some(v) = var("REDRAFT_DEFAULT_MODEL").or_else(|| var("REDRAFT_MODEL")) {
            self.default_model = Some(v);
        }
        let bad = |key: &str, v: &str, want: &str| ConfigError::Invalid {
            key: key.into(),
            message: format!("`{v}` is not {want}"),
        };
        if let Some(v) = var("REDRAFT_MAX_ITERATIONS") {
            self.policy.max_iterations = v.parse().map_err(|_| bad("REDRAFT_MAX_ITERATIONS", &v, "a whole number"))?;
        }
        if let Some(v) = var("REDRAFT_TEMPERATURE") {
            self.temperature = Some(v.parse().map_err(|_| bad("REDRAFT_TEMPERATURE", &v, "a number"))?);
        }
        if let Some(v) = var("REDRAFT_MAX_TOKENS") {
            self.max_tokens = Some(v.parse().map_err(|_| bad("REDRAFT_MAX_TOKENS", &v, "a whole number"))?);
        }
        Ok(())
    }

    /// The model to use: `requested`, else `default_model`.
    pub fn model_name(&self, requested: Option<&str>) -> Result<String, ConfigError> {
        let name = requested.map(str::to_owned).or_else(|| self.default_model.clone()).ok_or(ConfigError::NoModel)?;
        if name.contains('/') {
            return Ok(name);
        }
        // A bare model name goes to the default model's provider.
        match self.default_model.as_deref().and_then(|d| d.split_once('/')) {
            Some((provider, _)) => Ok(format!("{provider}/{name}")),
            None => Err(ConfigError::BareModel { name }),
        }
    }

    /// A sandbox spec: inline JSON (`{"network": false}`) or the name of a `[sandboxes.NAME]`.
    /// The spec is refused up front when it asks for isolation that bubblewrap provides and
    /// `bwrap` cannot run here: nothing is ever run unsandboxed when isolation was asked for.
    pub fn sandbox(&self, spec: &str) -> Result<Sandbox, ConfigError> {
        let sandbox = self.sandbox_spec(spec)?;
        if let Some(wants) = sandbox.needs_bwrap()
            && !redraft_sandbox::bwrap_available()
        {
            return Err(ConfigError::Sandbox(redraft_sandbox::SandboxError::BwrapMissing { wants }));
        }
        Ok(sandbox)
    }

    fn sandbox_spec(&self, spec: &str) -> Result<Sandbox, ConfigError> {
        let spec = spec.trim();
        if spec.starts_with('{') {
            return serde_json::from_str(spec).map_err(|e| ConfigError::Invalid {
                key: "sandbox".into(),
                message: format!("the inline sandbox spec is invalid: {e}"),
            });
        }
        self.sandboxes.get(spec).cloned().ok_or_else(|| ConfigError::Invalid {
            key: "sandbox".into(),
            message: format!(
                "no sandbox is named `{spec}`; define `[sandboxes.{spec}]` in redraft.toml or pass an inline JSON spec such as '{{\"network\": false}}'"
            ),
        })
    }

    /// Build the proposer for `provider/model`, with its price when the config has one.
    pub fn model(&self, name: &str) -> Result<Model, ConfigError> {
        let (prefix, model) = name.split_once('/').ok_or_else(|| ConfigError::BareModel { name: name.to_owned() })?;
        if model.is_empty() {
            return Err(ConfigError::BareModel { name: name.to_owned() });
        }
        let named = self.providers.get(prefix);
        let kind = match (named, prefix) {
            (Some(p), _) => p.kind,
            (None, "openai") => ProviderType::Openai,
            (None, "mock") => ProviderType::Mock,
            (None, "anthropic") => ProviderType::Anthropic,
            (None, "ollama") => ProviderType::Ollama,
            (None, "command") => ProviderType::Command,
            (None, other) => {
                return Err(ConfigError::UnknownProvider {
                    provider: other.to_owned(),
                    known: std::iter::once("openai".to_owned())
                        .chain(["mock".to_owned()])
                        .chain(self.providers.keys().cloned())
                        .collect(),
                });
            }
        };
        let timeout = named.and_then(|p| p.request_timeout).unwrap_or(self.policy.attempt_timeout);
        let provider: Arc<dyn ChatProvider> = match kind {
            ProviderType::Openai => {
                let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
                let base_url = named
                    .and_then(|p| p.base_url.clone())
                    .or_else(|| env("OPENAI_BASE_URL"))
                    .unwrap_or_else(|| openai::DEFAULT_BASE_URL.to_owned());
                let api_key_env =
                    named.and_then(|p| p.api_key_env.clone()).unwrap_or_else(|| "OPENAI_API_KEY".to_owned());
                Arc::new(OpenAiProvider::new(OpenAiConfig {
                    name: name.to_owned(),
                    model: model.to_owned(),
                    base_url,
                    api_key: env(&api_key_env),
                    api_key_env,
                    request_timeout: timeout,
                })?)
            }
            ProviderType::Mock => {
                let script = named.and_then(|p| p.script.clone()).unwrap_or_else(|| PathBuf::from(model));
                Arc::new(MockProvider::from_file(name, &script)?)
            }
            ProviderType::Command => {
                // `command/NAME` names `[providers.NAME]`; a provider of type command may also be
                // used directly as `NAME/anything`.
                let (key, p) = match named {
                    Some(p) => (prefix, Some(p)),
                    None => (model, self.providers.get(model).filter(|p| p.kind == ProviderType::Command)),
                };
                let p = p.ok_or_else(|| ConfigError::Invalid {
                    key: format!("providers.{key}"),
                    message: format!(
                        "`{name}` needs a `[providers.{key}]` table with `type = \"command\"` and a `command`; or pass the agent after `--`"
                    ),
                })?;
                let command = p.command.clone().ok_or_else(|| ConfigError::Invalid {
                    key: format!("providers.{key}.command"),
                    message: "a command provider needs `command = \"…\"` (run with `sh -c`; `{prompt}` is replaced by the quoted prompt)".into(),
                })?;
                let sandbox = p.sandbox.as_deref().map(|s| self.sandbox(s)).transpose()?;
                Arc::new(
                    CommandProvider::new(
                        name,
                        AgentCommand::Shell(command),
                        p.workdir.clone().unwrap_or_else(|| PathBuf::from(".")),
                    )
                    .timeout(timeout)
                    .sandbox(sandbox),
                )
            }
            ProviderType::Anthropic | ProviderType::Ollama => {
                return Err(ConfigError::ProviderUnavailable { provider: prefix.to_owned() });
            }
        };
        Ok(Model { provider, price: self.models.get(name).copied() })
    }
}

#[cfg(test)]
mod tests {
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
        let err = c.model("nope/x").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("`nope`") && err.contains("openai"), "{err}");
        assert!(matches!(c.model("anthropic/claude"), Err(ConfigError::ProviderUnavailable { .. })));
        let err = c.model("command/claude").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("[providers.claude]"), "{err}");
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
