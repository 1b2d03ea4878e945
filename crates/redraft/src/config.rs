//! `redraft.toml`: raw serde types that mirror the file, checked into runtime objects by an
//! explicit `match`. API keys come only from environment variables the config names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use redraft_core::decide::DecideSettings;
use redraft_core::duration::serde_human;
use redraft_core::{Ceilings, ChatProvider, Policy, Price, PromptStyle, Strategy};
use redraft_eval::Formats;
use redraft_providers::{
    AgentCommand, AnthropicConfig, AnthropicProvider, CommandProvider, MockProvider, OllamaConfig, OllamaProvider,
    OpenAiConfig, OpenAiProvider, anthropic, ollama, openai,
};
use redraft_sandbox::Sandbox;
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::model::Model;

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

/// `[queue]`: how `serve` and `worker` processes share the stored runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    /// How long a worker's claim on a run lasts without renewal. A run whose worker died is
    /// taken over by another this long after its last renewal. By default, 30 s.
    #[serde(with = "serde_human")]
    pub lease: Duration,
    /// How often a worker renews its leases and sees cancel requests. By default, 2 s (at most
    /// a third of `lease`).
    #[serde(with = "serde_human")]
    pub heartbeat: Duration,
    /// How often an idle worker looks for queued runs (a run accepted by the same process is
    /// started at once). By default, 1 s.
    #[serde(with = "serde_human")]
    pub poll: Duration,
    /// Runs that may wait in the queue; beyond it new runs are refused with 503 and
    /// `Retry-After`. By default, 10000.
    pub max_queued_runs: u64,
    /// How long `POST /v1/iterate` and the proxy wait for a queued run to start before giving
    /// up on it (it is withdrawn, never run) with 503. By default, 60 s.
    #[serde(with = "serde_human")]
    pub max_wait: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(30),
            heartbeat: Duration::from_secs(2),
            poll: Duration::from_secs(1),
            max_queued_runs: 10_000,
            max_wait: Duration::from_secs(60),
        }
    }
}

impl QueueConfig {
    /// The heartbeat actually used: at most a third of the lease, at least 10 ms.
    pub fn heartbeat(&self) -> Duration {
        self.heartbeat.min(self.lease / 3).max(Duration::from_millis(10))
    }
}

/// `[telemetry]`: traces over OTLP.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP collector (`http://host:4318`) that receives traces at its `/v1/traces`;
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`, when set, is used instead. By default, none: no traces.
    pub otlp_endpoint: Option<String>,
}

/// `[server]`: what `redraft serve` (and the other network faces) allow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Where `redraft serve` listens. By default, `127.0.0.1:8080`.
    pub addr: String,
    /// The environment variable holding the bearer tokens, comma-separated. Without tokens the
    /// server only listens on a loopback address. By default, `REDRAFT_TOKENS`.
    pub tokens_env: String,
    /// The largest request body, in bytes (413 beyond it). By default, 1 MiB.
    pub max_body_bytes: usize,
    /// Runs this server executes at once (its worker's slots); more wait in the queue. By
    /// default, 64.
    pub max_concurrent_runs: usize,
    /// On SIGTERM or Ctrl-C, how long runs in flight may take to finish before the process
    /// exits; runs still unfinished then go back to the queue (another worker, or the next
    /// start, resumes them from their last recorded attempt). By default, 30 s.
    #[serde(with = "serde_human")]
    pub grace_period: Duration,
    /// `exec:` commands a request may name, compared word by word (`*` is one plain argument,
    /// a final `**` any number; shell syntax only in an entry identical to the request). By
    /// default, none.
    pub exec_allow: Vec<String>,
    /// `http:` validator URLs a request may name, normalised: exact, or a directory followed by
    /// `/*`. By default, none.
    pub http_allow: Vec<String>,
    /// Command providers (`[providers.NAME]` with `type = "command"`) requests may use as their
    /// model. By default, none.
    pub command_providers: Vec<String>,
    /// Host names (or addresses) the server answers to besides loopback (`localhost`,
    /// `127.0.0.1`, `[::1]`), on any port: names a reverse proxy or `/etc/hosts` gives it.
    /// Without tokens a request naming any other `Host` is refused (421), which shuts out DNS
    /// rebinding; with tokens every host is served unless this lists some. By default, none.
    pub allowed_hosts: Vec<String>,
    /// Origins (`http://localhost:3000`) whose web pages may call the API: CORS preflights from
    /// them are answered and their requests get `Access-Control-Allow-Origin`. Requests from a
    /// page at any other origin are refused (403). By default, none: CORS is off.
    pub cors_origins: Vec<String>,
    /// Upper bounds on what a request may ask (`[server.ceilings]`).
    pub ceilings: Ceilings,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            addr: "127.0.0.1:8080".into(),
            tokens_env: "REDRAFT_TOKENS".into(),
            max_body_bytes: 1024 * 1024,
            max_concurrent_runs: 64,
            grace_period: Duration::from_secs(30),
            exec_allow: Vec::new(),
            http_allow: Vec::new(),
            command_providers: Vec::new(),
            allowed_hosts: Vec::new(),
            cors_origins: Vec::new(),
            ceilings: Ceilings::default(),
        }
    }
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

/// Keys that `REDRAFT_<KEY>` environment variables override, and where they live.
const ENV_KEYS: &[(&str, &[&str])] = &[
    ("default_model", &["default_model"]),
    ("default_provider", &["default_provider"]),
    ("model", &["default_model"]),
    ("judge_model", &["judge_model"]),
    ("fallback_models", &["fallback_models"]),
    ("temperature_step", &["temperature_step"]),
    ("kinds_dir", &["kinds_dir"]),
    ("database_url", &["database_url"]),
    ("prompt_style", &["prompt_style"]),
    ("strategy", &["strategy"]),
    ("feedback_max_chars", &["feedback_max_chars"]),
    ("check_formats", &["check_formats"]),
    ("constrained", &["constrained"]),
    ("coerce", &["coerce"]),
    ("temperature", &["temperature"]),
    ("max_tokens", &["max_tokens"]),
    ("max_iterations", &["policy", "max_iterations"]),
    ("success_threshold", &["policy", "success_threshold"]),
    ("threshold", &["policy", "success_threshold"]),
    ("patience", &["policy", "patience"]),
    ("max_budget_usd", &["policy", "max_budget_usd"]),
    ("max_wall_time", &["policy", "max_wall_time"]),
    ("attempt_timeout", &["policy", "attempt_timeout"]),
    ("repeat_limit", &["policy", "repeat_limit"]),
    ("transport_retries", &["policy", "transport_retries"]),
    ("on_escalation", &["policy", "on_escalation"]),
    ("auto_retry_on_test_fail", &["decide", "auto_retry_on_test_fail"]),
    ("auto_retry_on_review_reject", &["decide", "auto_retry_on_review_reject"]),
    ("escalation_includes_diff", &["decide", "escalation_includes_diff"]),
    ("feedback_max_length", &["decide", "feedback_max_length"]),
    ("server_addr", &["server", "addr"]),
    ("max_body_bytes", &["server", "max_body_bytes"]),
    ("max_concurrent_runs", &["server", "max_concurrent_runs"]),
    ("grace_period", &["server", "grace_period"]),
    ("lease", &["queue", "lease"]),
    ("max_queued_runs", &["queue", "max_queued_runs"]),
    ("max_wait", &["queue", "max_wait"]),
];

/// `REDRAFT_*` variables that are not config keys (the config path; what agents are given; the
/// server's default tokens variable; the Python the tests use; the log format).
const ENV_NOT_KEYS: &[&str] = &["config", "prompt_file", "iteration", "tokens", "python", "log_format"];

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
    /// The largest answer read from one call, in bytes (an HTTP body, a command's stdout): a
    /// longer one ends the attempt with a `response_too_large` issue. By default, 4 MiB
    /// (4194304), also for providers built from environment variables alone.
    pub max_response_bytes: Option<usize>,
    /// `openai` only: whether to also send the run's schema as `response_format`, for servers
    /// that constrain decoding to it (OpenAI, vLLM, llama.cpp). Every evaluator still runs; a
    /// server that refuses it is asked without it from then on, with a warning. By default,
    /// the top-level `constrained` (on).
    #[serde(default)]
    pub native_response_format: Option<bool>,
}

impl Config {
    /// Parse config text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse { path: origin.to_owned(), message: e.to_string() })
    }

    /// Read one config file (no layering).
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        Self::parse(&text, path)
    }

    /// Load the configuration in layers, later ones overriding earlier ones key by key:
    /// `$XDG_CONFIG_HOME/redraft/redraft.toml` (or `~/.config/…`), then `explicit` (an error
    /// if missing) or `$REDRAFT_CONFIG` or `./redraft.toml`, then `REDRAFT_<KEY>` environment
    /// variables. Each file is checked on its own first, so an error names its file and key.
    pub fn load(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        let mut files = Vec::new();
        let xdg = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .map(|d| d.join("redraft").join("redraft.toml"));
        if let Some(path) = xdg.filter(|p| p.is_file()) {
            files.push(path);
        }
        match (explicit, std::env::var_os("REDRAFT_CONFIG").filter(|p| !p.is_empty())) {
            (Some(path), _) => files.push(path.to_owned()),
            (None, Some(path)) => files.push(PathBuf::from(path)),
            (None, None) if Path::new("redraft.toml").is_file() => files.push(PathBuf::from("redraft.toml")),
            (None, None) => {}
        }
        let mut merged = toml::Table::new();
        for path in &files {
            let text =
                std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.clone(), source })?;
            let table: toml::Table = text
                .parse()
                .map_err(|e: toml::de::Error| ConfigError::Parse { path: path.clone(), message: e.to_string() })?;
            Self::parse(&text, path)?;
            merge(&mut merged, table);
        }
        merge(&mut merged, env_table()?);
        let mut config = Config::deserialize(toml::Value::Table(merged)).map_err(|e| ConfigError::Parse {
            path: files.last().cloned().unwrap_or_else(|| PathBuf::from("REDRAFT_* environment variables")),
            message: e.to_string(),
        })?;
        // An OpenAI-compatible server named by the environment alone takes bare model names.
        if config.default_provider.is_none()
            && config.default_model.is_none()
            && std::env::var_os("OPENAI_BASE_URL").is_some_and(|v| !v.is_empty())
        {
            config.default_provider = Some("openai".into());
        }
        Ok(config)
    }

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
                    api_key: env(&api_key_env),
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
                let sandbox = p.sandbox.as_deref().map(|s| self.sandbox(s)).transpose()?;
                Arc::new(
                    CommandProvider::new(
                        name,
                        AgentCommand::Shell(command),
                        p.workdir.clone().unwrap_or_else(|| PathBuf::from(".")),
                    )
                    .timeout(timeout)
                    .sandbox(sandbox)
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
                    api_key: env(&api_key_env),
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

/// Merge `over` into `base`: tables merge key by key, anything else is replaced.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// The `REDRAFT_<KEY>` environment variables as a config table.
fn env_table() -> Result<toml::Table, ConfigError> {
    let mut table = toml::Table::new();
    for (name, value) in std::env::vars() {
        let Some(key) = name.strip_prefix("REDRAFT_").map(str::to_ascii_lowercase) else { continue };
        if value.is_empty() || ENV_NOT_KEYS.contains(&key.as_str()) {
            continue;
        }
        let Some((_, path)) = ENV_KEYS.iter().find(|(k, _)| *k == key) else {
            tracing::warn!(variable = %name, "ignoring an environment variable that names no config key");
            continue;
        };
        let parsed = if path.last() == Some(&"fallback_models") {
            toml::Value::Array(value.split(',').map(|m| toml::Value::String(m.trim().to_owned())).collect())
        } else {
            // A number or boolean when it reads as one, else a string.
            format!("v = {value}")
                .parse::<toml::Table>()
                .ok()
                .and_then(|mut t| t.remove("v"))
                .filter(|v| !v.is_table() && !v.is_array())
                .unwrap_or_else(|| toml::Value::String(value.clone()))
        };
        // The variable as a table of its own, checked alone so that a bad value is blamed on
        // its variable, not on a config file, then merged.
        let mut alone = parsed;
        for part in path.iter().rev() {
            alone = toml::Value::Table(toml::Table::from_iter([(part.to_string(), alone)]));
        }
        if let Err(e) = Config::deserialize(alone.clone()) {
            return Err(ConfigError::Invalid { key: name, message: format!("`{value}`: {e}") });
        }
        if let toml::Value::Table(alone) = alone {
            merge(&mut table, alone);
        }
    }
    Ok(table)
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
    fn the_default_config_file_is_the_default_config() {
        let parsed = Config::parse(DEFAULT_CONFIG, Path::new("default.toml")).unwrap();
        assert_eq!(parsed, Config::default());
    }

    #[test]
    fn layers_merge_key_by_key() {
        let mut base: toml::Table =
            "judge_model = \"a/b\"\n[policy]\nmax_iterations = 5\npatience = 2\n".parse().unwrap();
        merge(&mut base, "[policy]\nmax_iterations = 7\n".parse().unwrap());
        let c = Config::deserialize(toml::Value::Table(base)).unwrap();
        assert_eq!((c.policy.max_iterations, c.policy.patience, c.judge_model.as_deref()), (7, 2, Some("a/b")));
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
