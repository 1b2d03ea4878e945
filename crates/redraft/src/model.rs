//! A proposer with its price: what `--model provider/model` resolves to, and how the config's
//! providers are built into one ([`Config::model`]).

use std::path::PathBuf;
use std::sync::Arc;

use redraft_core::{ChatProvider, Price};
use redraft_providers::{
    AgentCommand, AnthropicConfig, AnthropicProvider, CommandProvider, MockProvider, OllamaConfig, OllamaProvider,
    OpenAiConfig, OpenAiProvider, anthropic, ollama, openai,
};
use redraft_sandbox::Sandbox;

use crate::config::{Config, ProviderConfig, ProviderType};
use crate::error::ConfigError;

/// A proposer and, when known, its price (needed for `cost_usd` and budgets).
#[derive(Debug, Clone)]
pub struct Model {
    pub provider: Arc<dyn ChatProvider>,
    pub price: Option<Price>,
}

impl Model {
    /// A model from any proposer, price unknown.
    pub fn new(provider: impl ChatProvider + 'static) -> Self {
        Self { provider: Arc::new(provider), price: None }
    }

    /// Set the price.
    pub fn with_price(mut self, price: Price) -> Self {
        self.price = Some(price);
        self
    }

    /// Resolve `provider/model` with the config found the usual way (`./redraft.toml`,
    /// XDG, `REDRAFT_*` and the providers' own environment variables).
    pub fn from_name(name: &str) -> Result<Self, ConfigError> {
        Config::load(None)?.model(name)
    }

    /// The `provider/model` name.
    pub fn name(&self) -> &str {
        self.provider.name()
    }
}

impl Config {
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
                    known: ["openai", "anthropic", "ollama", "command", "mock"]
                        .map(String::from)
                        .into_iter()
                        .chain(self.providers.keys().cloned())
                        .collect(),
                });
            }
        };
        if named.and_then(|p| p.native_response_format) == Some(true)
            && !matches!(kind, ProviderType::Openai | ProviderType::Mock)
        {
            tracing::warn!(
                "`{name}`: `native_response_format` is sent to OpenAI-compatible servers only; this model is prompted for the shape"
            );
        }
        let timeout = named.and_then(|p| p.request_timeout).unwrap_or(self.policy.attempt_timeout);
        let max_response_bytes = response_limit(prefix, named)?;
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        // Whatever the provider's type, the variable the config names holds a secret.
        if let Some(key_env) = named.and_then(|p| p.api_key_env.as_deref()) {
            api_key(key_env);
        }
        let provider: Arc<dyn ChatProvider> = match kind {
            ProviderType::Openai => {
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
                    api_key: api_key(&api_key_env),
                    api_key_env,
                    request_timeout: timeout,
                    max_response_bytes,
                    native_response_format: named.and_then(|p| p.native_response_format).unwrap_or(self.constrained),
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
                prompt_stands_alone(&command).map_err(|why| ConfigError::Invalid {
                    key: format!("providers.{key}.command"),
                    message: format!(
                        "{why}: `{{prompt}}` is replaced by the prompt quoted for the shell, so it must be a word of its own, outside any quotes or substitution (e.g. `claude -p {{prompt}}`); inside quotes, the prompt's text would run as shell code"
                    ),
                })?;
                let sandbox = command_sandbox(self, key, p)?;
                Arc::new(
                    CommandProvider::new(
                        name,
                        AgentCommand::Shell(command),
                        p.workdir.clone().unwrap_or_else(|| PathBuf::from(".")),
                    )
                    .timeout(timeout)
                    .sandbox(Some(sandbox))
                    .max_response_bytes(response_limit(key, Some(p))?),
                )
            }
            ProviderType::Anthropic => {
                let base_url = named
                    .and_then(|p| p.base_url.clone())
                    .or_else(|| env("ANTHROPIC_BASE_URL"))
                    .unwrap_or_else(|| anthropic::DEFAULT_BASE_URL.to_owned());
                let api_key_env =
                    named.and_then(|p| p.api_key_env.clone()).unwrap_or_else(|| "ANTHROPIC_API_KEY".to_owned());
                Arc::new(AnthropicProvider::new(AnthropicConfig {
                    name: name.to_owned(),
                    model: model.to_owned(),
                    base_url,
                    api_key: api_key(&api_key_env),
                    api_key_env,
                    request_timeout: timeout,
                    max_response_bytes,
                })?)
            }
            ProviderType::Ollama => {
                let base_url = named
                    .and_then(|p| p.base_url.clone())
                    .or_else(|| env("OLLAMA_HOST").map(|h| ollama::base_url_from_host(&h)))
                    .unwrap_or_else(|| ollama::DEFAULT_BASE_URL.to_owned());
                Arc::new(OllamaProvider::new(OllamaConfig {
                    name: name.to_owned(),
                    model: model.to_owned(),
                    base_url,
                    request_timeout: timeout,
                    max_response_bytes,
                })?)
            }
        };
        Ok(Model { provider, price: self.models.get(name).copied() })
    }
}

/// The API key in the variable `name`, when set; read, it is a known secret
/// ([`redraft_core::secrets`]): never written out.
fn api_key(name: &str) -> Option<String> {
    let key = std::env::var(name).ok().filter(|v| !v.is_empty())?;
    redraft_core::secrets::register(&key);
    Some(key)
}

/// The sandbox of the command provider `[providers.NAME]`: its named sandbox, or none but a
/// clean environment — on every face, the command gets only the variables the config names
/// (`PATH`, `HOME`, `LANG`, the sandbox's `env` and `pass_env`; redraft adds its own
/// `REDRAFT_*` for the command). Every passed variable (but `PATH`, `HOME`, `LANG`) is a known
/// secret, whatever its name: the command may be given it, never echo it into a result.
fn command_sandbox(config: &Config, name: &str, provider: &ProviderConfig) -> Result<Sandbox, ConfigError> {
    let mut sandbox = match provider.sandbox.as_ref() {
        Some(spec) => config.sandbox(spec)?,
        None => Sandbox::default(),
    };
    for variable in &provider.pass_env {
        if variable.is_empty() || variable.contains(['=', '\0']) {
            return Err(ConfigError::Invalid {
                key: format!("providers.{name}.pass_env"),
                message: format!("`{variable}` is not a variable name; list names such as `ANTHROPIC_API_KEY`"),
            });
        }
        if !sandbox.env.contains(variable) {
            sandbox.env.push(variable.clone());
        }
    }
    crate::config::register_passed_variables(&sandbox.env);
    Ok(sandbox)
}

/// Checks that every `{prompt}` in a command template stands as a word of its own: unquoted,
/// not escaped, outside any `$(…)`, `${…}` or backticks, between blanks or operators. The prompt
/// replaces it already quoted, which is safe only there.
fn prompt_stands_alone(template: &str) -> Result<(), String> {
    const PLACEHOLDER: &str = "{prompt}";
    let bytes = template.as_bytes();
    let (mut single, mut double, mut nested) = (false, false, 0usize);
    let mut i = 0;
    while i < bytes.len() {
        if template[i..].starts_with(PLACEHOLDER) {
            let before = i.checked_sub(1).map(|j| bytes[j]);
            let after = bytes.get(i + PLACEHOLDER.len()).copied();
            let boundary = |b: Option<u8>| b.is_none_or(|b| b.is_ascii_whitespace() || b";&|()<>".contains(&b));
            if single || double || nested > 0 || !boundary(before) || !boundary(after) {
                return Err(format!("`{{prompt}}` stands inside a word, quotes or a substitution at byte {i}"));
            }
            i += PLACEHOLDER.len();
            continue;
        }
        match bytes[i] {
            b'\\' if !single => i += 1,
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'`' if !single => nested = if nested > 0 { nested - 1 } else { 1 },
            b'$' if !single && matches!(bytes.get(i + 1), Some(b'(' | b'{')) => {
                nested += 1;
                i += 1;
            }
            b')' | b'}' if !single && nested > 0 => nested -= 1,
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// The largest answer `[providers.NAME]` allows (by default, 4 MiB).
fn response_limit(name: &str, provider: Option<&ProviderConfig>) -> Result<usize, ConfigError> {
    match provider.and_then(|p| p.max_response_bytes) {
        Some(0) => Err(ConfigError::Invalid {
            key: format!("providers.{name}.max_response_bytes"),
            message: format!(
                "must be more than 0 bytes (by default, {})",
                redraft_providers::DEFAULT_MAX_RESPONSE_BYTES
            ),
        }),
        Some(bytes) => Ok(bytes),
        None => Ok(redraft_providers::DEFAULT_MAX_RESPONSE_BYTES),
    }
}

#[cfg(test)]
mod prompt_tests {
    use super::prompt_stands_alone;

    #[test]
    fn the_prompt_placeholder_must_be_a_word_of_its_own() {
        for ok in
            ["claude -p {prompt}", "agent {prompt} --fast", "a;{prompt}", "x '{y}' {prompt}", "echo \"a\" {prompt}"]
        {
            assert!(prompt_stands_alone(ok).is_ok(), "{ok}");
        }
        for refused in [
            "agent \"{prompt}\"",
            "agent '{prompt}'",
            "agent --text={prompt}",
            "agent $(echo {prompt})",
            "agent `echo {prompt}`",
            "agent ${X:-{prompt}}",
            "agent x{prompt}",
            "sh -c \"agent {prompt}\"",
        ] {
            assert!(prompt_stands_alone(refused).is_err(), "{refused}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn a_command_provider_gets_a_clean_environment_plus_what_pass_env_names() {
        let config = Config::parse(
            "[providers.a]\ntype = \"command\"\ncommand = \"env\"\npass_env = [\"ANTHROPIC_API_KEY\", \"CARGO_HOME\"]\n\n\
             [providers.plain]\ntype = \"command\"\ncommand = \"env\"\n\n\
             [providers.bad]\ntype = \"command\"\ncommand = \"env\"\npass_env = [\"A=B\"]\n",
            Path::new("t.toml"),
        )
        .unwrap();
        let passed = command_sandbox(&config, "a", &config.providers["a"]).unwrap();
        assert_eq!(passed.env, ["ANTHROPIC_API_KEY", "CARGO_HOME"]);
        // Only the environment is cleaned: nothing that needs bubblewrap.
        assert_eq!(passed.needs_bwrap(), None);
        assert_eq!(command_sandbox(&config, "plain", &config.providers["plain"]).unwrap(), Sandbox::default());
        let err = command_sandbox(&config, "bad", &config.providers["bad"]).unwrap_err().to_string();
        assert!(err.contains("providers.bad.pass_env") && err.contains("`A=B`"), "{err}");
    }
}
