//! The `[queue]`, `[telemetry]`, `[server]` and `[providers.NAME]` tables of `redraft.toml`, as
//! serde mirrors of the file.

use std::path::PathBuf;
use std::time::Duration;

use redraft_core::Ceilings;
use redraft_core::duration::serde_human;
use serde::{Deserialize, Serialize};

use crate::spec::SandboxRequest;

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
    /// The `[sandboxes.NAME]` a request may name for its commands (`"sandbox": "NAME"`). A named
    /// sandbox may pass variables through or move the working directory, so none is open to
    /// requests unless listed here. By default, none (a request may still send an inline
    /// sandbox that only tightens limits).
    pub sandboxes: Vec<String>,
    /// The directory `schema:PATH` directives from a request are read under (relative to the
    /// server's working directory, or absolute): `PATH` must be relative and resolve, symbolic
    /// links included, inside it. By default, none: a request may not name a schema file (it
    /// sends its schema inline).
    pub schema_dir: Option<PathBuf>,
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
            sandboxes: Vec::new(),
            schema_dir: None,
            allowed_hosts: Vec::new(),
            cors_origins: Vec::new(),
            ceilings: Ceilings::default(),
        }
    }
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
    /// `command` only: a sandbox name from `[sandboxes]` (a string), or an inline spec (a
    /// table, `sandbox = { network = false }`).
    pub sandbox: Option<SandboxRequest>,
    /// `command` only: the variables of redraft's environment the command gets, besides `PATH`,
    /// `HOME`, `LANG` and redraft's own `REDRAFT_*` (and a named sandbox's `env`). On every
    /// face the command starts from a clean environment: an API key reaches it only when named
    /// here. Each passed value is a secret, whatever the variable's name: it reads `[redacted]`
    /// in everything redraft writes out (values under 8 bytes excepted). By default, none.
    #[serde(default)]
    pub pass_env: Vec<String>,
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
