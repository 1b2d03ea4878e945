//! `redraft run`: the loop, from the command line.

use std::sync::Arc;

use anyhow::{Result, anyhow};
use redraft::config::Config;
use redraft::core::Directive;
use redraft::core::duration;
use redraft::eval::kind::Kinds;
use redraft::queue::Worker;
use redraft::recorder::{self, Start};
use redraft::spec::Directives;
use redraft::{PromptStyle, RunSpec, SpecSetup, Strategy};

use super::{Outcome, after_run, cancel_on_ctrl_c, progress_lines};
use crate::args::{PolicyArgs, PromptStyleArg, RunArgs, StrategyArg};
use crate::input;
use crate::output::report;

pub async fn run(args: RunArgs, config_path: Option<&std::path::Path>) -> Result<Outcome> {
    let mut config = Config::load(config_path)?;
    if args.constrained {
        config.constrained = true;
    }
    if args.no_constrained {
        config.constrained = false;
    }
    let spec = spec_from_args(&args)?;
    let cwd = std::env::current_dir().map_err(|e| anyhow!("cannot read the current directory: {e}"))?;
    let mut setup = SpecSetup::local(&config, cwd);
    if let Some(dir) = &args.kinds {
        setup.kinds = Some(Arc::new(Kinds::load(dir)?));
    }
    let how = Start {
        observers: progress_lines(args.progress, spec.policy(&config.policy).max_iterations).into_iter().collect(),
        cancel: cancel_on_ctrl_c(),
        ..Start::default()
    };
    // Recorded under a lease this process renews while it runs: `runs resume` elsewhere refuses
    // the run until the lease expires (this process died).
    let worker =
        if args.no_store { None } else { Some(Worker::start(redraft::store::open(&config).await?, &config.queue)) };
    let result = recorder::start(&spec, &setup, worker.as_ref(), how).await?;
    report(&result, args.json, args.text).map_err(after_run)
}

/// The run spec the flags describe (what is stored, so `runs resume` can continue it).
fn spec_from_args(args: &RunArgs) -> Result<RunSpec> {
    let mut evaluator: Vec<Directive> =
        args.schemas.iter().map(|p| Directive::Schema(p.display().to_string())).collect();
    evaluator.extend(args.evals.iter().cloned());
    let mut spec = RunSpec {
        prompt: input::text_or_file(&args.prompt, "prompt")?,
        system: args.system.as_deref().map(|s| input::text_or_file(s, "system")).transpose()?,
        context: args.context.as_deref().map(input::context).transpose()?,
        kind: args.kind.clone(),
        evaluator: Directives::from(evaluator),
        model: args.model.clone(),
        text: args.text,
        prompt_style: args.prompt_style.map(|s| match s {
            PromptStyleArg::Schema => PromptStyle::Schema,
            PromptStyleArg::Example => PromptStyle::Example,
            PromptStyleArg::Both => PromptStyle::Both,
        }),
        strategy: args.strategy.map(|s| match s {
            StrategyArg::Conversation => Strategy::Conversation,
            StrategyArg::Fresh => Strategy::Fresh,
        }),
        artifact_ext: args.artifact_ext.clone(),
        check_formats: args.formats.check_formats(),
        coerce: args.strict.then_some(false),
        sandbox: args.sandbox.clone(),
        agent: (!args.agent.is_empty()).then(|| args.agent.clone()),
        on_escalation: args.await_answer.then_some(redraft::core::OnEscalation::Await),
        ..RunSpec::default()
    };
    apply_policy_flags(&mut spec, &args.policy)?;
    if spec.prompt.trim().is_empty() {
        return Err(anyhow!("the prompt is empty\nhint: pass `--prompt TEXT` or `--prompt @FILE`"));
    }
    Ok(spec)
}

/// The policy flags, onto a spec.
pub(crate) fn apply_policy_flags(spec: &mut RunSpec, flags: &PolicyArgs) -> Result<()> {
    spec.max_iterations = flags.max_iterations.or(spec.max_iterations);
    spec.success_threshold = flags.threshold.or(spec.success_threshold);
    spec.patience = flags.patience.or(spec.patience);
    spec.max_budget_usd = flags.max_budget.or(spec.max_budget_usd);
    if let Some(d) = &flags.max_wall_time {
        spec.max_wall_time = Some(duration::parse(d).map_err(|e| anyhow!("`--max-wall-time`: {e}"))?);
    }
    if let Some(d) = &flags.attempt_timeout {
        spec.attempt_timeout = Some(duration::parse(d).map_err(|e| anyhow!("`--attempt-timeout`: {e}"))?);
    }
    spec.repeat_limit = flags.repeat_limit.or(spec.repeat_limit);
    spec.temperature = flags.temperature.or(spec.temperature);
    spec.max_tokens = flags.max_tokens.or(spec.max_tokens);
    Ok(())
}
