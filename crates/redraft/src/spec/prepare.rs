//! A spec turned into a run: the one entry every face goes through. [`RunSpec::prepare`]
//! checks everything (through the face's [`Guard`](crate::guard::Guard)) and builds the runner
//! and the task; [`RunSpec::prepare_submitted`] does the same for a run whose answers are
//! submitted, [`RunSpec::prepare_call`] for one call to a model. Nothing is sent to a model.

use std::sync::Arc;

use redraft_core::{
    ChatProvider, ChatRequest, ChatResponse, Issue, Mode, Policy, ProviderError, Strategy, Task, codes,
};
use redraft_eval::SchemaEvaluator;
use redraft_providers::{AgentCommand, CommandProvider};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{RunSpec, SpecSetup};
use crate::check::Check;
use crate::error::ConfigError;
use crate::evaluators::{self, EvaluatorSetup};
use crate::model::Model;
use crate::runner::Runner;

/// What an agent-mode run works on (see [`RunSpec::workspace`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceSpec {
    /// The command that must pass (exit 0) for the work to be done.
    pub verify: String,
    /// Globs of files the agent may not change, add or delete.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protect: Vec<String>,
    /// The task's name, which its reports are filed under.
    pub task: String,
}

/// A spec turned into a run: the runner (to which a face may still add observers) and the
/// task; `agent` is the agent command proposing, when the spec names one, and `sandbox` the
/// sandbox its commands run in, as the guard admitted it (for commands the face adds itself).
#[derive(Debug)]
pub struct PreparedRun {
    pub runner: Runner,
    pub task: Task,
    pub agent: Option<Arc<CommandProvider>>,
    pub sandbox: Option<redraft_sandbox::Sandbox>,
}

/// Who proposes in a prepared run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proposer {
    /// The model or agent the spec names.
    Named,
    /// Nobody is asked: answers are submitted ([`Runner::submitted`]).
    Submitted,
}

impl RunSpec {
    /// Check the spec and turn it into a runner (to which observers may still be added) and a
    /// task. Nothing is sent to a model.
    pub fn prepare(&self, setup: &SpecSetup<'_>) -> Result<PreparedRun, ConfigError> {
        self.prepare_for(setup, Proposer::Named)
    }

    /// Like [`RunSpec::prepare`], for a run whose answers are submitted
    /// ([`Runner::submitted`]): no model is named or resolved.
    pub fn prepare_submitted(&self, setup: &SpecSetup<'_>) -> Result<PreparedRun, ConfigError> {
        self.prepare_for(setup, Proposer::Submitted)
    }

    /// The runner of one call to the model this spec names — no loop, no evaluators — with the
    /// spec's sampling and time limits ([`Runner::call`], [`Runner::forward`]): the model
    /// passes the face's guard like a run's. Nothing is sent to a model.
    pub fn prepare_call(&self, setup: &SpecSetup<'_>) -> Result<Runner, ConfigError> {
        redraft_core::policy::validate_sampling(self.temperature, self.max_tokens)?;
        let policy = self.bounded_policy(setup);
        let model = setup.guard.model(setup.config, &self.model_name(setup.config)?)?;
        let mut builder = Runner::builder().model(&model).policy(policy).ceilings(setup.ceilings.clone());
        if let Some(t) = self.temperature {
            builder = builder.temperature(t);
        }
        if let Some(n) = self.max_tokens {
            builder = builder.max_tokens(n);
        }
        builder.build()
    }

    /// The policy in force, its wall time bounded by the face's ceiling when the spec names
    /// none.
    fn bounded_policy(&self, setup: &SpecSetup<'_>) -> Policy {
        let mut policy = self.policy(&setup.config.policy);
        if policy.max_wall_time.is_none() {
            policy.max_wall_time = setup.ceilings.max_wall_time;
        }
        policy
    }

    fn prepare_for(&self, setup: &SpecSetup<'_>, proposer: Proposer) -> Result<PreparedRun, ConfigError> {
        let config = setup.config;
        if self.prompt.trim().is_empty() {
            return Err(ConfigError::Invalid { key: "prompt".into(), message: "the prompt is empty".into() });
        }
        // A submitted run waits for its submitter, whose time and money are its own: only what
        // the spec says of it applies (the count, the threshold), not the config's limits on
        // calls to a model.
        let policy = match proposer {
            Proposer::Named => self.bounded_policy(setup),
            Proposer::Submitted => self.policy(&Policy::default()),
        };
        let sandbox = setup.guard.sandbox(config, self.sandbox.as_ref())?;
        if self.workspace.is_some() {
            setup.guard.agent()?;
            if self.agent.as_ref().is_none_or(Vec::is_empty) {
                return Err(ConfigError::Invalid {
                    key: "workspace".into(),
                    message: "an agent-mode run needs the `agent` command that edits the workspace".into(),
                });
            }
        }
        let mut agent = None;
        let model = match (&self.agent, proposer) {
            (_, Proposer::Submitted) => Model::new(Submitter),
            (Some(argv), Proposer::Named) if !argv.is_empty() => {
                setup.guard.agent()?;
                let name = format!("command/{}", agent_name(argv));
                let command = CommandProvider::new(name, AgentCommand::Argv(argv.clone()), &setup.workdir)
                    .timeout(policy.attempt_timeout)
                    .sandbox(sandbox.clone())
                    // In agent mode the verifier judges the work, not the agent's exit status.
                    .require_success(self.workspace.is_none());
                let command = Arc::new(command);
                agent = Some(command.clone());
                Model { provider: command, price: None }
            }
            _ => setup.guard.model(config, &self.model_name(config)?)?,
        };
        let formats = self.formats(config);
        let is_command = model.name().starts_with("command/");
        let mut builder = Runner::builder()
            .model(&model)
            .policy(policy.clone())
            .ceilings(setup.ceilings.clone())
            .strategy(if is_command { Strategy::Fresh } else { self.strategy.unwrap_or(config.strategy) })
            .mode(if self.text { Mode::Text } else { Mode::Structured })
            .prompt_style(self.prompt_style.unwrap_or(config.prompt_style))
            .feedback_max_chars(config.feedback_max_chars)
            .coerce(self.coerce.unwrap_or(config.coerce))
            .temperature_step(config.temperature_step);
        if let Some(t) = self.temperature.or(config.temperature) {
            builder = builder.temperature(t);
        }
        if let Some(n) = self.max_tokens.or(config.max_tokens) {
            builder = builder.max_tokens(n);
        }
        if let Some(parameters) = self.parameters.as_ref().filter(|p| !p.is_empty()) {
            builder = builder.parameters(parameters.clone());
        }
        // Fallback models take over from a model; an agent's work is not a model's to redo.
        if proposer == Proposer::Named && !is_command {
            for name in &config.fallback_models {
                // A fallback passes the guard like the model it stands in for.
                builder = builder.fallback(&setup.guard.model(config, &config.model_name(Some(name))?)?);
            }
        }
        if let Some(tool) = &self.tool {
            validate_tool_name(&tool.name)?;
            builder = builder.tool(tool.clone());
        }
        if let Some(schema) = self.schema.as_ref().or(self.tool.as_ref().map(|t| &t.parameters)) {
            builder = builder.evaluator(Arc::new(SchemaEvaluator::of(schema, formats)?));
        }
        if self.json_object {
            builder = builder.evaluator(Arc::new(Check::new("json_object", |artifact: &Value, _: &Value| {
                if !artifact.is_object() {
                    return Err(Issue::new("", "type", "the answer must be a JSON object"));
                }
                if redraft_core::engine::is_a_json_schema(artifact) {
                    return Err(Issue::new(
                        "",
                        codes::SCHEMA_ECHO,
                        "this is a JSON Schema, not an answer: give the values the task asks for, as a JSON object",
                    ));
                }
                Ok(())
            })));
        }
        let evaluator_setup = EvaluatorSetup {
            config,
            workdir: setup.workdir.clone(),
            sandbox: sandbox.clone(),
            timeout: policy.attempt_timeout,
            artifact_ext: self.artifact_ext.as_ref().map(|e| e.as_str().to_owned()),
            guard: setup.guard.clone(),
            kinds: setup.kinds.clone(),
            formats,
        };
        let built = evaluators::build(&self.directives(), &evaluator_setup)?;
        for evaluator in built.evaluators {
            builder = builder.evaluator(evaluator);
        }
        let mut prompt = self.prompt.clone();
        if let Some(kind) = &built.kind {
            if let Some(extra) = kind.prompt.as_deref().filter(|p| !p.trim().is_empty()) {
                prompt = format!("{}\n\n{}", prompt.trim_end(), extra.trim());
            }
            if let Some(example) = &kind.example {
                builder = builder.example(example.clone());
            }
        }
        let task = Task {
            prompt,
            system: self.system.clone(),
            context: self.context.clone().map(Value::Object),
            turns: self.turns.clone(),
        };
        Ok(PreparedRun { runner: builder.build()?, task, agent, sandbox })
    }
}

/// The proposer of a run whose answers are submitted: never asked.
#[derive(Debug)]
struct Submitter;

#[async_trait::async_trait]
impl ChatProvider for Submitter {
    fn name(&self) -> &str {
        "agent"
    }

    async fn complete(&self, _request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        Err(ProviderError::Failed { message: "the answers of this run are submitted, not asked for".into() })
    }
}

/// How records name an agent command: its program's file name.
fn agent_name(argv: &[String]) -> String {
    argv.first()
        .map(|a| {
            std::path::Path::new(a).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| a.clone())
        })
        .unwrap_or_else(|| "agent".to_owned())
}

/// A function name as OpenAI's API takes it: 1 to 64 letters, digits, `_` or `-`.
fn validate_tool_name(name: &str) -> Result<(), ConfigError> {
    if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(ConfigError::Invalid {
            key: "tool.name".into(),
            message: format!("`{name}` is not a function name; use 1 to 64 letters, digits, `_` or `-`"),
        });
    }
    Ok(())
}
