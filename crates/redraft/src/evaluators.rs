//! Evaluators from directives (`schema:PATH`, `kind:NAME`, `exec:CMD`, `http:URL`,
//! `score:CRITERION`, `llm:NAME`): the one place every face turns directives into
//! evaluators, so the CLI, the HTTP API and MCP accept the same things the same way.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use redraft_core::{Directive, Evaluator};
use redraft_eval::kind::{Kind, KindEvaluator, Kinds};
use redraft_eval::{ExecEvaluator, Formats, HttpEvaluator, JudgeEvaluator, SchemaEvaluator};
use redraft_sandbox::Sandbox;

use crate::config::Config;
use crate::error::ConfigError;
use crate::guard::Guard;

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
    /// What the face asking may do.
    pub guard: Arc<Guard>,
    /// Kinds loaded at start-up (servers); by default they are loaded from the config's
    /// `kinds_dir` when a directive names a kind.
    pub kinds: Option<Arc<Kinds>>,
    /// What JSON Schema `format` does in `schema:` and `kind:` evaluators.
    pub formats: Formats,
}

/// The evaluators of a run, and the kind when one was named (its prompt and example go to the
/// proposer).
#[derive(Debug, Default)]
pub struct Built {
    pub evaluators: Vec<Arc<dyn Evaluator>>,
    pub kind: Option<Arc<Kind>>,
}

/// Build the evaluators `directives` name, checking everything that can be checked before a
/// model is called (files, schemas, kinds, the judge model) and applying the guard (the
/// allow-lists and the schema path rule of network faces).
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
                // Over the network the guard has placed the file under `schema_dir`; its `$ref`s
                // stay under the file's own directory, which is inside it. Messages name the
                // file as it was asked for.
                let requested = std::path::Path::new(path);
                let found = setup.guard.schema_file(requested, &setup.workdir)?;
                out.push(Arc::new(SchemaEvaluator::from_file_shown_as(&found, requested, setup.formats)?));
            }
            Directive::Exec(command) => {
                let command = setup.guard.command(command)?;
                let mut exec = ExecEvaluator::new(command, &setup.workdir).timeout(setup.timeout);
                if let Some(ext) = &setup.artifact_ext {
                    exec = exec.extension(ext.clone());
                }
                if let Some(s) = &setup.sandbox {
                    exec = exec.sandbox(s.clone());
                }
                out.push(Arc::new(exec));
            }
            Directive::Http(url) => {
                let url = setup.guard.url(url)?;
                let http = HttpEvaluator::new(url.as_str(), None, setup.timeout)
                    .map_err(|e| ConfigError::Invalid { key: "evaluator".into(), message: e.to_string() })?;
                out.push(Arc::new(http));
            }
            Directive::Score(criterion) => out.push(judge(setup, "score", criterion)?),
            Directive::Kind(name) | Directive::Llm(name) => {
                let k = kind(name)?;
                out.push(Arc::new(KindEvaluator::new(k.clone(), setup.formats)?));
                // `llm:` always runs the LLM check; `kind:` runs the kind's own LLM check when it
                // has one and a judge model is configured (it is optional).
                if matches!(directive, Directive::Llm(_)) {
                    out.push(judge(setup, &format!("llm:{name}"), k.rubric())?);
                } else if k.llm_check.is_some() {
                    if setup.config.judge_model.is_some() {
                        out.push(judge(setup, &format!("llm:{name}"), k.rubric())?);
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

/// An LLM judge with the configured `judge_model`, which passes the face's guard like the run's
/// own model (over the network, a command provider must be listed in `command_providers`).
fn judge(setup: &EvaluatorSetup<'_>, name: &str, rubric: &str) -> Result<Arc<dyn Evaluator>, ConfigError> {
    let config = setup.config;
    let model_name =
        config.judge_model.as_deref().ok_or_else(|| ConfigError::NoJudgeModel { directive: name.to_owned() })?;
    let model = setup.guard.model(config, &config.model_name(Some(model_name))?)?;
    Ok(Arc::new(JudgeEvaluator::new(name, rubric, model.provider, model.price)))
}
