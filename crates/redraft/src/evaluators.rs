//! Evaluators from directives (`schema:PATH`, `kind:NAME`, `exec:CMD`, `http:URL`,
//! `score:CRITERION`, `llm:NAME`): the one place every face turns directives into
//! evaluators, so the CLI, the HTTP API and MCP accept the same things the same way.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use redraft_core::{Directive, Evaluator};
use redraft_eval::kind::{Kind, KindEvaluator, Kinds};
use redraft_eval::{ExecEvaluator, HttpEvaluator, JudgeEvaluator, SchemaEvaluator};
use redraft_sandbox::Sandbox;

use crate::config::Config;
use crate::error::ConfigError;

/// Who is asking: the local user, or a request from the network, which may only run the
/// commands and reach the URLs the server's config allows, and only read files under the
/// working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Face {
    /// The local CLI: any command, URL and file.
    Local,
    /// HTTP and MCP: `exec:` commands and `http:` URLs must match an allow-list entry (exactly,
    /// or by a prefix ending in `*`); `schema:` paths must be relative and stay inside the
    /// working directory.
    Network { exec_allow: Vec<String>, http_allow: Vec<String> },
}

fn allowed(list: &[String], asked: &str) -> bool {
    list.iter().any(|a| match a.strip_suffix('*') {
        Some(prefix) => asked.starts_with(prefix),
        None => asked == a,
    })
}

impl Face {
    fn allows_exec(&self, command: &str) -> bool {
        match self {
            Face::Local => true,
            Face::Network { exec_allow, .. } => allowed(exec_allow, command),
        }
    }

    fn allows_http(&self, url: &str) -> bool {
        match self {
            Face::Local => true,
            Face::Network { http_allow, .. } => allowed(http_allow, url),
        }
    }

    fn allows_file(&self, path: &std::path::Path) -> bool {
        match self {
            Face::Local => true,
            Face::Network { .. } => {
                path.is_relative()
                    && path
                        .components()
                        .all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir))
            }
        }
    }
}

/// What building evaluators needs to know.
#[derive(Debug, Clone)]
pub struct EvaluatorSetup<'a> {
    pub config: &'a Config,
    /// Where `exec:` commands run and relative paths resolve.
    pub workdir: PathBuf,
    pub sandbox: Option<Sandbox>,
    /// Bound on each `exec:` command and HTTP validator call.
    pub timeout: Duration,
    /// The artifact file's extension for `exec:` (by default `json`, or `txt` for text).
    pub artifact_ext: Option<String>,
    pub face: Face,
    /// Kinds loaded at start-up (servers); by default they are loaded from the config's
    /// `kinds_dir` when a directive names a kind.
    pub kinds: Option<Arc<Kinds>>,
}

/// The evaluators of a run, and the kind when one was named (its prompt and example go to the
/// proposer).
#[derive(Debug, Default)]
pub struct Built {
    pub evaluators: Vec<Arc<dyn Evaluator>>,
    pub kind: Option<Arc<Kind>>,
}

/// Build the evaluators `directives` name, checking everything that can be checked before a
/// model is called (files, schemas, kinds, the judge model, the exec allow-list).
pub fn build(directives: &[Directive], setup: &EvaluatorSetup<'_>) -> Result<Built, ConfigError> {
    let mut out: Vec<Arc<dyn Evaluator>> = Vec::new();
    let mut kinds = setup.kinds.clone();
    let mut kind_named: Option<Arc<Kind>> = None;
    let mut kind = |name: &str| -> Result<Arc<Kind>, ConfigError> {
        if kinds.is_none() {
            kinds = Some(Arc::new(Kinds::load(&setup.config.kinds_dir)?));
        }
        let found = kinds.as_ref().map(|k| k.require(name)).transpose()?;
        found.ok_or_else(|| ConfigError::Invalid {
            key: "kind".into(),
            message: format!("no kinds are loaded for `{name}`"),
        })
    };
    for directive in directives {
        match directive {
            Directive::Schema(path) => {
                let path = std::path::Path::new(path);
                if !setup.face.allows_file(path) {
                    return Err(ConfigError::NotAllowedHere {
                        what: format!("`schema:{}`", path.display()),
                        hint: "over the network a schema file must be a relative path inside the server's working directory; or send the schema inline".into(),
                    });
                }
                // Locally a path means what it says (relative to the current directory); a
                // network face resolves it under its working directory.
                let path = match setup.face {
                    Face::Local => path.to_owned(),
                    Face::Network { .. } => setup.workdir.join(path),
                };
                out.push(Arc::new(SchemaEvaluator::from_file(&path)?));
            }
            Directive::Exec(command) => {
                if !setup.face.allows_exec(command) {
                    return Err(ConfigError::ExecNotAllowed { command: command.clone() });
                }
                let mut exec = ExecEvaluator::new(command.clone(), &setup.workdir).timeout(setup.timeout);
                if let Some(ext) = &setup.artifact_ext {
                    exec = exec.extension(ext.clone());
                }
                if let Some(s) = &setup.sandbox {
                    exec = exec.sandbox(s.clone());
                }
                out.push(Arc::new(exec));
            }
            Directive::Http(url) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(ConfigError::Invalid {
                        key: "evaluator".into(),
                        message: format!("`http:{url}` needs a full URL, e.g. `http:http://127.0.0.1:8000/validate`"),
                    });
                }
                if !setup.face.allows_http(url) {
                    return Err(ConfigError::NotAllowedHere {
                        what: format!("`http:{url}`"),
                        hint: "add the URL (or a prefix ending in `*`) to `http_allow` in the server's config".into(),
                    });
                }
                let http = HttpEvaluator::new(url.clone(), None, setup.timeout)
                    .map_err(|e| ConfigError::Invalid { key: "evaluator".into(), message: e.to_string() })?;
                out.push(Arc::new(http));
            }
            Directive::Score(criterion) => out.push(judge(setup.config, "score", criterion)?),
            Directive::Kind(name) | Directive::Llm(name) => {
                let k = kind(name)?;
                out.push(Arc::new(KindEvaluator::new(k.clone())?));
                // `llm:` always runs the LLM check; `kind:` runs the kind's own LLM check when it
                // has one and a judge model is configured (it is optional).
                if matches!(directive, Directive::Llm(_)) {
                    out.push(judge(setup.config, &format!("llm:{name}"), k.rubric())?);
                } else if k.llm_check.is_some() {
                    if setup.config.judge_model.is_some() {
                        out.push(judge(setup.config, &format!("llm:{name}"), k.rubric())?);
                    } else {
                        tracing::warn!(kind = %name, "the kind's LLM check is skipped: no `judge_model` is configured");
                    }
                }
                kind_named.get_or_insert(k);
            }
        }
    }
    Ok(Built { evaluators: out, kind: kind_named })
}

/// An LLM judge with the configured `judge_model`.
fn judge(config: &Config, name: &str, rubric: &str) -> Result<Arc<dyn Evaluator>, ConfigError> {
    let model_name =
        config.judge_model.as_deref().ok_or_else(|| ConfigError::NoJudgeModel { directive: name.to_owned() })?;
    let model = config.model(&config.model_name(Some(model_name))?)?;
    Ok(Arc::new(JudgeEvaluator::new(name, rubric, model.provider, model.price)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_faces_are_held_to_their_allow_lists() {
        let p = Face::Network {
            exec_allow: vec!["pytest -q".into(), "cargo test*".into()],
            http_allow: vec!["http://validator.internal/*".into()],
        };
        assert!(p.allows_exec("pytest -q"));
        assert!(!p.allows_exec("pytest -q; rm -rf /"));
        assert!(p.allows_exec("cargo test --workspace"));
        assert!(!p.allows_exec("sh -c 'cargo test'"));
        assert!(p.allows_http("http://validator.internal/check"));
        assert!(!p.allows_http("http://169.254.169.254/latest/meta-data"));
        assert!(p.allows_file(std::path::Path::new("schemas/person.json")));
        assert!(!p.allows_file(std::path::Path::new("/etc/passwd")));
        assert!(!p.allows_file(std::path::Path::new("../secrets.json")));
        assert!(Face::Local.allows_exec("anything") && Face::Local.allows_file(std::path::Path::new("/etc/x")));
    }
}
