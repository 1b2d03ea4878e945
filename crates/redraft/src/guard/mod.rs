//! The guard: what a request may ask for, decided in the one place where a request becomes a
//! run ([`RunSpec::prepare`](crate::RunSpec::prepare) and the evaluators it builds), so that
//! no face can forget a rule.
//!
//! The local CLI is the user's own shell: everything is allowed. A request from HTTP (the JSON
//! API and the OpenAI-compatible proxy) or MCP comes from someone else, so by default it may:
//!
//! - run an `exec:` command only when it matches an `exec_allow` entry word for word
//!   ([`command`]), with a clean environment (no API keys) unless the operator names a
//!   sandbox;
//! - reach an `http:` validator only when its normalised URL matches `http_allow` ([`url`]);
//! - read a `schema:` file only under the server's working directory (symbolic links resolved),
//!   and through its `$ref`s only files under that file's own directory: the schema evaluator
//!   confines every schema file's references to its directory
//!   ([`redraft_eval::schema::refs`]), which for an admitted file is inside the working
//!   directory, so the narrower of the two roots holds over the network as locally;
//! - name a model that reads no file it names (`mock/PATH` is refused; a configured mock
//!   provider with a `script` is fine) and runs no command the operator has not opened to the
//!   network (`[server] command_providers`);
//! - never give an agent command, nor a sandbox that passes variables through or moves the
//!   working directory.

pub mod command;
pub mod shell;
pub mod url;

use std::fmt;
use std::path::{Component, Path, PathBuf};

use redraft_sandbox::Sandbox;

pub use self::command::{CommandAllowList, CommandRefusal};
pub use self::url::{Url, UrlAllowList, UrlRefusal};
use crate::config::{Config, ProviderType, ServerConfig};
use crate::error::ConfigError;
use crate::model::Model;
use crate::spec::SandboxRequest;

/// Who is asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Face {
    /// The local CLI: the user's own shell.
    Cli,
    /// The HTTP API and the OpenAI-compatible proxy.
    Http,
    /// The MCP server.
    Mcp,
}

impl Face {
    /// How messages say where a request came from: `over HTTP`, `over MCP`, `here`.
    pub fn over(self) -> &'static str {
        match self {
            Face::Cli => "here",
            Face::Http => "over HTTP",
            Face::Mcp => "over MCP",
        }
    }
}

impl fmt::Display for Face {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Face::Cli => "the CLI",
            Face::Http => "HTTP",
            Face::Mcp => "MCP",
        })
    }
}

impl From<Face> for redraft_core::Origin {
    fn from(face: Face) -> Self {
        match face {
            Face::Cli => redraft_core::Origin::Cli,
            Face::Http => redraft_core::Origin::Http,
            Face::Mcp => redraft_core::Origin::Mcp,
        }
    }
}

impl From<redraft_core::Origin> for Face {
    fn from(origin: redraft_core::Origin) -> Self {
        match origin {
            redraft_core::Origin::Cli => Face::Cli,
            redraft_core::Origin::Http => Face::Http,
            redraft_core::Origin::Mcp => Face::Mcp,
        }
    }
}

/// What a refused request asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refused {
    /// An `exec:` command.
    Command,
    /// An `http:` validator URL.
    Url,
    /// A `schema:` file.
    SchemaFile,
    /// A model (provider).
    Model,
    /// An agent command.
    Agent,
    /// A sandbox spec.
    Sandbox,
    /// Continuing a run the CLI started.
    Continuation,
}

impl Refused {
    /// The short machine word for it (`exec_not_allowed`, …), as HTTP error codes use.
    pub fn code(self) -> &'static str {
        match self {
            Refused::Command => "exec_not_allowed",
            Refused::Url => "http_not_allowed",
            Refused::SchemaFile => "path_not_allowed",
            Refused::Model => "model_not_allowed",
            Refused::Agent => "agent_not_allowed",
            Refused::Sandbox => "sandbox_not_allowed",
            Refused::Continuation => "run_not_allowed",
        }
    }
}

/// The rules of one face.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    face: Face,
    commands: CommandAllowList,
    urls: UrlAllowList,
    command_providers: Vec<String>,
    /// Where `schema:` files of a request are read (`[server] schema_dir`); none: no file.
    schema_dir: Option<PathBuf>,
    /// The configured sandboxes a request may name (`[server] sandboxes`).
    sandboxes: Vec<String>,
}

impl Guard {
    /// The local CLI: everything is allowed.
    pub fn local() -> Self {
        Self {
            face: Face::Cli,
            commands: CommandAllowList::default(),
            urls: UrlAllowList::default(),
            command_providers: Vec::new(),
            schema_dir: None,
            sandboxes: Vec::new(),
        }
    }

    /// A network face (`Face::Http` or `Face::Mcp`) with the allow-lists of `[server]`. A
    /// malformed entry is an error naming it, so a server never starts with a list it cannot
    /// apply.
    pub fn network(face: Face, server: &ServerConfig) -> Result<Self, ConfigError> {
        let invalid =
            |key: &str, e: &dyn fmt::Display| ConfigError::Invalid { key: key.into(), message: e.to_string() };
        Ok(Self {
            face,
            commands: CommandAllowList::parse(&server.exec_allow).map_err(|e| invalid("server.exec_allow", &e))?,
            urls: UrlAllowList::parse(&server.http_allow).map_err(|e| invalid("server.http_allow", &e))?,
            command_providers: server.command_providers.clone(),
            schema_dir: server.schema_dir.clone(),
            sandboxes: server.sandboxes.clone(),
        })
    }

    /// The face this guard is for.
    pub fn face(&self) -> Face {
        self.face
    }

    /// Whether this is the local CLI (nothing is refused).
    pub fn is_local(&self) -> bool {
        self.face == Face::Cli
    }

    fn refuse(&self, refused: Refused, what: String, hint: impl Into<String>) -> ConfigError {
        ConfigError::NotAllowed { face: self.face, refused, what, hint: hint.into() }
    }

    /// The command an `exec:` directive may run: the request itself locally; over the network,
    /// the words of a request that matched `exec_allow`, quoted again for `sh`.
    pub fn command(&self, requested: &str) -> Result<String, ConfigError> {
        if self.is_local() {
            return Ok(requested.to_owned());
        }
        self.commands.admit(requested).map_err(|why| {
            let what = format!("`exec:{requested}`");
            match why {
                CommandRefusal::Empty => ConfigError::Invalid {
                    key: "evaluator".into(),
                    message: "`exec:` needs a command, e.g. `exec:pytest -q`".into(),
                },
                CommandRefusal::Syntax(syntax) => self.refuse(
                    Refused::Command,
                    what,
                    format!(
                        "it contains {syntax}; shell syntax runs only when an `exec_allow` entry in the server's config is exactly this command"
                    ),
                ),
                CommandRefusal::NoMatch if self.commands.is_empty() => self.refuse(
                    Refused::Command,
                    what,
                    "no command may run: the server's `exec_allow` is empty; add the command (e.g. `pytest -q *`) to `[server] exec_allow`",
                ),
                CommandRefusal::NoMatch => self.refuse(
                    Refused::Command,
                    what,
                    "no `exec_allow` entry matches it word for word; add one to `[server] exec_allow` (`*` admits one plain argument, a final `**` any number)",
                ),
            }
        })
    }

    /// The normalised URL an `http:` directive may reach.
    /// Locally, a credential in it (user, password, query values) becomes a known secret: the
    /// user wrote it, and it leaves in no output. (Over the network a URL is admitted only as
    /// the config lists it, whose credentials are known already.)
    pub fn url(&self, requested: &str) -> Result<Url, ConfigError> {
        let checked = if self.is_local() {
            redraft_core::secrets::register_url(requested);
            url::normalise(requested)
        } else {
            self.urls.admit(requested)
        };
        checked.map_err(|why| match why {
            UrlRefusal::Invalid(_) => ConfigError::Invalid {
                key: "evaluator".into(),
                message: format!(
                    "`http:{requested}` {why}\nhint: write a full URL, e.g. `http:http://127.0.0.1:8000/validate`"
                ),
            },
            UrlRefusal::NoMatch => self.refuse(
                Refused::Url,
                format!("`http:{requested}`"),
                "add the URL (or its directory followed by `/*`) to `[server] http_allow`",
            ),
            other => self.refuse(Refused::Url, format!("`http:{requested}`"), format!("the URL {other}")),
        })
    }

    /// The schema file a `schema:PATH` directive reads: the path as given locally; over the
    /// network, a relative path resolved (symbolic links included) under the configured
    /// `schema_dir` (itself relative to `workdir`), and nothing at all without one.
    pub fn schema_file(&self, path: &Path, workdir: &Path) -> Result<PathBuf, ConfigError> {
        if self.is_local() {
            return Ok(path.to_owned());
        }
        let what = || format!("`schema:{}`", path.display());
        let Some(dir) = &self.schema_dir else {
            return Err(self.refuse(
                Refused::SchemaFile,
                what(),
                "no schema file may be read for a request: the server's `schema_dir` is not set; send the schema inline (`schema`), or set `[server] schema_dir` to a directory of schemas",
            ));
        };
        let refuse = || {
            self.refuse(
                Refused::SchemaFile,
                what(),
                format!(
                    "a schema file must be a relative path inside the server's `schema_dir` (`{}`); or send the schema inline",
                    dir.display()
                ),
            )
        };
        if !path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
            || path.as_os_str().is_empty()
        {
            return Err(refuse());
        }
        let root = workdir.join(dir).canonicalize().map_err(|_| refuse())?;
        let inside = |p: &Path| p.starts_with(&root) && p != root;
        let wanted = root.join(path);
        match wanted.canonicalize() {
            Ok(resolved) if inside(&resolved) => Ok(resolved),
            Ok(_) => Err(refuse()),
            // Missing: the schema evaluator reports it as it would locally, when the directory
            // it would be in is inside the root (so nothing is said of a file elsewhere).
            Err(_) => match wanted.parent().map(Path::canonicalize) {
                Some(Ok(parent)) if parent == root || inside(&parent) => Ok(wanted),
                _ => Err(refuse()),
            },
        }
    }

    /// The proposer for `name` (`provider/model`), refusing over the network a model that
    /// would read a file the request names (`mock/PATH`) or run a command provider the
    /// operator has not listed in `[server] command_providers`.
    pub fn model(&self, config: &Config, name: &str) -> Result<Model, ConfigError> {
        if !self.is_local() {
            let (prefix, rest) = name.split_once('/').unwrap_or((name, ""));
            let (kind, provider) = match config.providers.get(prefix) {
                Some(p) => (Some(p.kind), prefix),
                None if prefix == "mock" => (Some(ProviderType::Mock), prefix),
                // `command/NAME` names `[providers.NAME]`.
                None if prefix == "command" => (Some(ProviderType::Command), rest),
                None => (None, prefix),
            };
            match kind {
                Some(ProviderType::Mock) if config.providers.get(prefix).is_none_or(|p| p.script.is_none()) => {
                    return Err(self.refuse(
                        Refused::Model,
                        format!("`{name}`"),
                        "it would read a script file named by the request; configure `[providers.NAME]` with `type = \"mock\"` and a `script`, and name `NAME/…`",
                    ));
                }
                Some(ProviderType::Command) if !self.command_providers.iter().any(|p| p == provider) => {
                    return Err(self.refuse(
                        Refused::Model,
                        format!("`{name}`"),
                        format!(
                            "it runs a command on the server; list `{provider}` in `[server] command_providers` to let requests use it"
                        ),
                    ));
                }
                _ => {}
            }
        }
        config.model(name)
    }

    /// Whether this face may continue, answer, cancel or abort run `run_id`, whose request came
    /// from `origin`: a network face may not touch a run the user's own CLI started.
    pub fn may_touch(&self, run_id: &str, origin: redraft_core::Origin) -> Result<(), ConfigError> {
        if self.is_local() || origin != redraft_core::Origin::Cli {
            return Ok(());
        }
        Err(self.refuse(
            Refused::Continuation,
            format!("run `{run_id}`"),
            "it was started by the CLI, whose trust a network request does not have; continue, cancel or abort it there (`redraft runs answer`, `resume`, `abort`)",
        ))
    }

    /// An agent command given by the request itself (only the local CLI may).
    pub fn agent(&self) -> Result<(), ConfigError> {
        if self.is_local() {
            return Ok(());
        }
        Err(self.refuse(
            Refused::Agent,
            "an agent command".into(),
            "configure a `command` provider and list it in `[server] command_providers` instead",
        ))
    }

    /// The sandbox `exec:` commands and command proposers run in: the requested one (a
    /// configured name looked up, an inline spec as given), checked; over the network, a clean
    /// environment at least (no variables of the server's reach the command but `PATH`, `HOME`
    /// and `LANG`), and an inline spec may only tighten limits: the variables it passes and the
    /// working directory are the operator's to name, in a `[sandboxes.NAME]`.
    pub fn sandbox(&self, config: &Config, requested: Option<&SandboxRequest>) -> Result<Option<Sandbox>, ConfigError> {
        let Some(requested) = requested else {
            return Ok((!self.is_local()).then(Sandbox::default));
        };
        match requested {
            _ if self.is_local() => {}
            SandboxRequest::Inline(spec) if !spec.env.is_empty() || spec.workdir.is_some() => {
                return Err(self.refuse(
                    Refused::Sandbox,
                    "an inline sandbox with `env` or `workdir`".into(),
                    "an inline sandbox may only tighten limits; name a `[sandboxes.NAME]` the server's config opens to requests (`[server] sandboxes`) to pass variables through or change the working directory",
                ));
            }
            SandboxRequest::Named(name) if !self.sandboxes.contains(name) => {
                return Err(self.refuse(
                    Refused::Sandbox,
                    format!("the sandbox `{name}`"),
                    format!(
                        "list `{name}` in `[server] sandboxes` to let requests name it, or send an inline sandbox that only tightens limits"
                    ),
                ));
            }
            _ => {}
        }
        config.sandbox(requested).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(exec: &[&str], http: &[&str]) -> ServerConfig {
        ServerConfig {
            exec_allow: exec.iter().map(|s| (*s).to_owned()).collect(),
            http_allow: http.iter().map(|s| (*s).to_owned()).collect(),
            ..ServerConfig::default()
        }
    }

    #[test]
    fn refusals_say_which_face() {
        let g = Guard::network(Face::Mcp, &server(&["pytest -q"], &[])).unwrap();
        let err = g.command("pytest -q; id").unwrap_err().to_string();
        assert!(err.contains("is not allowed over MCP") && err.contains("`;`"), "{err}");
        let g = Guard::network(Face::Http, &server(&[], &[])).unwrap();
        let err = g.command("pytest -q").unwrap_err().to_string();
        assert!(err.contains("over HTTP") && err.contains("`exec_allow` is empty"), "{err}");
        assert!(Guard::local().command("anything; at all").is_ok());
    }

    #[test]
    fn bad_allow_lists_stop_the_server_from_starting() {
        let err = Guard::network(Face::Http, &server(&["cargo test*"], &[])).unwrap_err().to_string();
        assert!(err.contains("server.exec_allow") && err.contains("cargo test*"), "{err}");
        let err = Guard::network(Face::Http, &server(&[], &["validator/*"])).unwrap_err().to_string();
        assert!(err.contains("server.http_allow"), "{err}");
    }

    #[test]
    fn schema_files_stay_under_the_schema_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("schemas")).unwrap();
        std::fs::write(dir.path().join("schemas/p.json"), "{}").unwrap();
        std::fs::write(dir.path().join("creds.json"), "{\"key\": \"sk-secret\"}").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("schemas/link.json")).unwrap();
        std::os::unix::fs::symlink("../creds.json", dir.path().join("schemas/up.json")).unwrap();
        // No `schema_dir`: no file at all, not even one in the working directory.
        let g = Guard::network(Face::Http, &ServerConfig::default()).unwrap();
        for refused in ["creds.json", "schemas/p.json"] {
            let err = g.schema_file(Path::new(refused), dir.path()).unwrap_err();
            assert!(matches!(err, ConfigError::NotAllowed { refused: Refused::SchemaFile, .. }), "{refused}: {err}");
            assert!(err.to_string().contains("schema_dir"), "{err}");
        }
        let server = ServerConfig { schema_dir: Some("schemas".into()), ..ServerConfig::default() };
        let g = Guard::network(Face::Http, &server).unwrap();
        let root = dir.path().join("schemas").canonicalize().unwrap();
        assert_eq!(g.schema_file(Path::new("p.json"), dir.path()).unwrap(), root.join("p.json"));
        assert_eq!(g.schema_file(Path::new("./p.json"), dir.path()).unwrap(), root.join("p.json"));
        std::os::unix::fs::symlink("/etc", dir.path().join("schemas/etc")).unwrap();
        assert_eq!(g.schema_file(Path::new("missing.json"), dir.path()).unwrap(), root.join("missing.json"));
        for refused in [
            "/etc/passwd",
            "../creds.json",
            "x/../../creds.json",
            "link.json",
            "up.json",
            "",
            ".",
            "schemas/p.json/..",
            "etc/passwd",
            "etc/no-such-file.json",
        ] {
            let err = g.schema_file(Path::new(refused), dir.path()).unwrap_err();
            assert!(matches!(err, ConfigError::NotAllowed { refused: Refused::SchemaFile, .. }), "{refused}: {err}");
        }
    }
}
