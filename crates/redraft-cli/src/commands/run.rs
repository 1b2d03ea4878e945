//! `redraft run`: the loop, from the command line.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use anyhow::{Result, anyhow};
use redraft::config::Config;
use redraft::core::Strategy;
use redraft::core::{Directive, duration};
use redraft::evaluators::{self, EvaluatorSetup, ExecPermission};
use redraft::providers::{AgentCommand, CommandProvider};
use redraft::{CancellationToken, Mode, Model, PromptStyle, Runner, Task};
use serde_json::Value;

use super::Outcome;
use crate::args::{PolicyArgs, Progress, PromptStyleArg, RunArgs};
use crate::input;
use crate::output::{ProgressLines, escalation_text};

pub async fn run(args: RunArgs, config_path: Option<&std::path::Path>) -> Result<Outcome> {
    let mut config = Config::load(config_path)?;
    apply_policy_flags(&mut config, &args.policy)?;

    let task = Task {
        prompt: input::text_or_file(&args.prompt, "prompt")?,
        system: args.system.as_deref().map(|s| input::text_or_file(s, "system")).transpose()?,
        context: args.context.as_deref().map(input::context).transpose()?,
    };
    if task.prompt.trim().is_empty() {
        return Err(anyhow!("the prompt is empty\nhint: pass `--prompt TEXT` or `--prompt @FILE`"));
    }

    let sandbox = args.sandbox.as_deref().map(|s| config.sandbox(s)).transpose()?;
    let cwd = std::env::current_dir().map_err(|e| anyhow!("cannot read the current directory: {e}"))?;
    let model = if args.agent.is_empty() {
        config.model(&config.model_name(args.model.as_deref())?)?
    } else {
        let name = format!("command/{}", args.agent.first().map(String::as_str).unwrap_or("agent"));
        let agent = CommandProvider::new(name, AgentCommand::Argv(args.agent.clone()), &cwd)
            .timeout(config.policy.attempt_timeout)
            .sandbox(sandbox.clone());
        Model::new(agent)
    };
    let is_command = model.name().starts_with("command/");
    let mut builder = Runner::builder()
        .model(&model)
        .strategy(if is_command { Strategy::Fresh } else { Strategy::Conversation })
        .policy(config.policy.clone())
        .mode(if args.text { Mode::Text } else { Mode::Structured })
        .prompt_style(match args.prompt_style {
            Some(PromptStyleArg::Schema) => PromptStyle::Schema,
            Some(PromptStyleArg::Example) => PromptStyle::Example,
            Some(PromptStyleArg::Both) => PromptStyle::Both,
            None => config.prompt_style,
        });
    if let Some(t) = config.temperature {
        builder = builder.temperature(t);
    }
    if let Some(n) = config.max_tokens {
        builder = builder.max_tokens(n);
    }
    builder = builder.feedback_max_chars(config.feedback_max_chars).temperature_step(config.temperature_step);
    let mut directives: Vec<Directive> =
        args.schemas.iter().map(|p| Directive::Schema(p.display().to_string())).collect();
    for text in &args.evals {
        directives.push(text.parse::<Directive>()?);
    }
    let setup = EvaluatorSetup {
        config: &config,
        workdir: cwd.clone(),
        sandbox: sandbox.clone(),
        timeout: config.policy.attempt_timeout,
        artifact_ext: args.artifact_ext.clone(),
        exec: ExecPermission::Any,
    };
    for evaluator in evaluators::build(&directives, &setup)? {
        builder = builder.evaluator(evaluator);
    }
    for name in &config.fallback_models {
        builder = builder.fallback(&config.model(&config.model_name(Some(name))?)?);
    }
    let show_progress = match args.progress {
        Progress::Always => true,
        Progress::Never => false,
        Progress::Auto => std::io::stderr().is_terminal(),
    };
    if show_progress {
        builder = builder.observer(Arc::new(ProgressLines { max_iterations: config.policy.max_iterations }));
    }
    let runner = builder.build()?;

    let cancel = CancellationToken::new();
    let on_ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_ctrl_c.cancel();
        }
    });
    let result = runner.run_until_cancelled(task, cancel).await?;

    let mut stdout = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut stdout, &result)?;
        writeln!(stdout)?;
    } else if result.succeeded()
        && let Some(artifact) = &result.artifact
    {
        match artifact {
            Value::String(text) if args.text => writeln!(stdout, "{text}")?,
            other => writeln!(stdout, "{}", serde_json::to_string_pretty(other)?)?,
        }
    }
    stdout.flush()?;
    if result.succeeded() {
        Ok(Outcome::Success)
    } else {
        eprint!("{}", escalation_text(&result));
        Ok(Outcome::Failed)
    }
}

pub(crate) fn apply_policy_flags(config: &mut Config, flags: &PolicyArgs) -> Result<()> {
    let p = &mut config.policy;
    if let Some(n) = flags.max_iterations {
        p.max_iterations = n;
    }
    if let Some(x) = flags.threshold {
        p.success_threshold = Some(x);
    }
    if let Some(n) = flags.patience {
        p.patience = n;
    }
    if let Some(b) = flags.max_budget {
        p.max_budget_usd = Some(b);
    }
    if let Some(d) = &flags.max_wall_time {
        p.max_wall_time = Some(duration::parse(d).map_err(|e| anyhow!("`--max-wall-time`: {e}"))?);
    }
    if let Some(d) = &flags.attempt_timeout {
        p.attempt_timeout = duration::parse(d).map_err(|e| anyhow!("`--attempt-timeout`: {e}"))?;
    }
    if let Some(n) = flags.repeat_limit {
        p.repeat_limit = n;
    }
    if let Some(t) = flags.temperature {
        config.temperature = Some(t);
    }
    if let Some(n) = flags.max_tokens {
        config.max_tokens = Some(n);
    }
    Ok(())
}
