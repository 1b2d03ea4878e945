//! The MCP server: six tools over one shared setup, with per-session state.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use redraft::config::Config;
use redraft::core::decide::{DecideSettings, Decision, IterationCheck, PriorCheck, decide, summarize};
use redraft::core::prompt::skeleton;
use redraft::core::{Ceilings, Store};
use redraft::eval::Formats;
use redraft::eval::kind::{KindError, KindEvaluator, Kinds};
use redraft::guard::{Face, Guard};
use redraft::queue::Worker;
use redraft::recorder::{self, Start};
use redraft::{AttemptRecord, ConfigError, PromptStyle, RunError, RunObserver, RunSpec, SpecSetup};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::schema_for_input;
use rmcp::model::{
    CallToolResult, Implementation, JsonObject, ProgressNotificationParam, ProgressToken, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use serde_json::{Value, json};

use crate::args::{self, AnswerArgs, DecideArgs, ExampleArgs, Object, SubmitArgs, ValidateArgs};
use crate::reply;
use crate::submit::{DEFAULT_MAX_ATTEMPTS, NewRun, Submissions};
use crate::target::{Target, schema_key, schema_label};

/// What every session of a server shares: the config, the store, and what this face allows.
#[derive(Debug, Clone)]
pub struct McpSetup {
    /// The configuration; kinds are read from its `kinds_dir`.
    pub config: Config,
    /// Where `exec:` evaluators run and relative paths resolve.
    pub workdir: PathBuf,
    /// Where `iterate` records its runs; `None` records nothing.
    pub store: Option<Arc<dyn Store>>,
    /// What requests may ask for: the `[server]` allow-lists (`exec_allow`, `http_allow`,
    /// `command_providers`), applied over MCP exactly as over HTTP.
    pub guard: Arc<Guard>,
    /// Upper bounds on what a request may ask for (by default `max_iterations` ≤ 20).
    pub ceilings: Ceilings,
}

impl McpSetup {
    /// A setup with `config`, in `workdir`, recording nothing; the guard and the ceilings are
    /// the network faces' (`[server]` allow-lists, `[server.ceilings]`). A malformed allow-list
    /// entry is an error naming it.
    pub fn new(config: Config, workdir: PathBuf) -> Result<Self, ConfigError> {
        // Every credential it names is a secret before the first message, however it was made.
        config.register_credentials();
        let guard = Arc::new(Guard::network(Face::Mcp, &config.server)?);
        let ceilings = config.server.ceilings.clone();
        Ok(Self { config, workdir, store: None, guard, ceilings })
    }
}

#[derive(Debug)]
struct Shared {
    setup: McpSetup,
    /// The kinds, once they loaded (a failed load is tried again on the next request).
    kinds: std::sync::Mutex<Option<Arc<Kinds>>>,
}

impl Shared {
    fn kinds(&self) -> Result<Arc<Kinds>, KindError> {
        let mut cached = self.kinds.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(kinds) = cached.as_ref() {
            return Ok(kinds.clone());
        }
        let kinds = Arc::new(Kinds::load(&self.setup.config.kinds_dir)?);
        *cached = Some(kinds.clone());
        Ok(kinds)
    }

    /// The target of `validate`: a kind's schema and rules, or an inline schema.
    /// `check_formats` is the request's, if it says.
    fn target(
        &self,
        kind: Option<&str>,
        schema: Option<&Object>,
        check_formats: Option<bool>,
    ) -> Result<Target, String> {
        let formats = Formats::checked(check_formats.unwrap_or(self.setup.config.check_formats));
        match (kind, schema) {
            (Some(_), Some(_)) => Err("give `target_type` or `schema`, not both".to_owned()),
            (None, None) => Err(self.name_a_target()),
            (None, Some(schema)) => Target::schema(Value::Object(schema.clone()), formats),
            (Some(name), None) => {
                let kinds = self.kinds().map_err(|e| e.to_string())?;
                let kind = kinds.require(name).map_err(|e| e.to_string())?;
                let evaluator = KindEvaluator::new(kind.clone(), formats).map_err(|e| e.to_string())?;
                let evaluators = vec![Arc::new(evaluator) as Arc<dyn redraft::Evaluator>];
                Ok(Target { evaluators, schema: Some(kind.schema.clone()) })
            }
        }
    }

    fn name_a_target(&self) -> String {
        let known = match self.kinds() {
            Ok(kinds) if !kinds.is_empty() => format!(" (the kinds here: {})", kinds.names().join(", ")),
            _ => String::new(),
        };
        format!("name what to check against: `target_type` (a kind{known}) or `schema` (an inline JSON Schema)")
    }
}

/// The state of one MCP session (one connection): submissions counted per target, and the
/// decide checks seen per task.
#[derive(Debug, Default)]
struct Session {
    submissions: Submissions,
    checks: std::sync::Mutex<HashMap<String, Vec<PriorCheck>>>,
}

impl Session {
    /// Decide, with the earlier checks of the same task in this session as its history.
    fn decide(&self, mut check: IterationCheck, settings: &DecideSettings) -> Decision {
        let mut checks = self.checks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let earlier = checks.entry(check.task_id.clone()).or_default();
        let known: Vec<PriorCheck> = earlier
            .iter()
            .filter(|p| {
                p.iteration < check.current_iteration && !check.history.iter().any(|h| h.iteration == p.iteration)
            })
            .cloned()
            .collect();
        check.history.extend(known);
        check.history.sort_by_key(|p| p.iteration);
        let decision = decide(&check, settings);
        earlier.retain(|p| p.iteration != check.current_iteration);
        earlier.push(PriorCheck {
            iteration: check.current_iteration,
            summary: Some(summarize(Some(&check.test_result), Some(&check.review_result))),
            test_result: Some(check.test_result),
            review_result: Some(check.review_result),
        });
        decision
    }
}

/// redraft as an MCP server. One value serves one session; [`RedraftMcp::new_session`] makes
/// another over the same setup (for transports with many sessions).
#[derive(Debug, Clone)]
pub struct RedraftMcp {
    shared: Arc<Shared>,
    session: Arc<Session>,
    tool_router: ToolRouter<Self>,
}

const ITERATE: &str = "Run a bounded generate → check → feedback → retry loop: a model answers `prompt`, \
an independent check (a kind via `target_type`, an inline `schema`, or `evaluator` directives) judges the answer, \
every problem is fed back, until the answer passes or a limit is hit. Returns the run's result as JSON: `status` \
(succeeded|failed), `halted_because`, `artifact` (the accepted answer, or the best so far), `iterations`, `history` \
of attempts with their issues, `metrics`, and on failure an `escalation` with a question for a person. A failed run \
is a normal result, not an error. With `on_escalation: \"await\"` a run that would fail stops as `awaiting_input` \
instead, and the `answer` tool continues it with a person's answer to the question.";

const ANSWER: &str = "Answer the escalation question of a run awaiting input (`status: awaiting_input`, from \
`iterate` with `on_escalation: \"await\"`): the run goes on from where it stopped, the model getting the answer as a \
person's reply, with `max_iterations` more attempts (by default as many as it had). Returns the run's result as \
`iterate` does. `abort: true` ends the run as failed instead.";

const VALIDATE: &str = "Check an artifact against a registered kind (`target_type`: its JSON Schema, then its \
rules, which read `context`) or an inline JSON `schema`. Returns `{passed, issues}`; each issue has a JSON Pointer \
`path`, a `code` and a `message`. Nothing is counted: use `submit` for counted attempts.";

const EXAMPLE: &str = "Show what a kind's artifact looks like before producing one: its example instance (the \
kind's example.json, or a skeleton generated from its schema), its JSON Schema, description and instructions.";

const SUBMIT: &str = "Submit an artifact you produced yourself; redraft judges it against `target_type` (a kind) \
or `schema` and counts attempts per target in this session (`max_attempts`, by default 3). A rejection says \
`Attempt i of N: rejected.` and lists every problem numbered with its path: fix them and submit again. The answer \
to an accepted submission says `accepted` (and the next submission for the target starts a new count). When the \
attempts run out the answer is an error, MaxRetriesExceeded, with the history of this session's submissions and an \
escalation for a person.";

const DECIDE: &str = "Decide the next step of an iteration (an `iteration_check`): given the test result \
(pass|fail, output) and the review result (approve|reject|pending, feedback), answer `proceed`, `retry` with \
concrete feedback (summary, actionable items, priority), or `escalate` with the attempts summary, the pattern \
detected and a question for a person. Checks of the same `task_id` in this session are remembered.";

const INSTRUCTIONS: &str = "redraft checks work instead of trusting it. `iterate` runs a model in a checked retry \
loop; `submit` judges artifacts you write yourself and counts your attempts; `validate` checks without counting; \
`example` shows a kind's expected shape; `decide` answers proceed/retry/escalate for test-and-review iterations; \
`answer` continues a run that awaits a person's answer.";

/// A tool's input schema from its argument type.
fn input<T: schemars::JsonSchema + 'static>() -> Arc<JsonObject> {
    match schema_for_input::<T>() {
        Ok(schema) => schema,
        Err(e) => {
            tracing::error!("a tool's input schema is invalid: {e}");
            Arc::new(JsonObject::new())
        }
    }
}

#[tool_router]
impl RedraftMcp {
    /// A server for one session over `setup`.
    pub fn new(setup: McpSetup) -> Self {
        let shared = Arc::new(Shared { setup, kinds: std::sync::Mutex::new(None) });
        Self { shared, session: Arc::default(), tool_router: Self::tool_router() }
    }

    /// Another session over the same setup (and the same loaded kinds), with its own counts.
    pub fn new_session(&self) -> Self {
        Self { shared: self.shared.clone(), session: Arc::default(), tool_router: Self::tool_router() }
    }

    /// How this face sets runs up: its config, guard and ceilings, and the kinds.
    fn spec_setup(&self) -> SpecSetup<'_> {
        let setup = &self.shared.setup;
        SpecSetup {
            config: &setup.config,
            workdir: setup.workdir.clone(),
            guard: setup.guard.clone(),
            ceilings: setup.ceilings.clone(),
            kinds: self.shared.kinds().ok(),
        }
    }

    #[tool(name = "iterate", description = ITERATE, input_schema = Arc::new(args::iterate_schema(input::<RunSpec>().as_ref().clone())))]
    async fn iterate(&self, arguments: JsonObject, context: RequestContext<RoleServer>) -> CallToolResult {
        let spec = match args::parse::<RunSpec>("iterate", arguments) {
            Ok(spec) => spec,
            Err(message) => return reply::bad_request(message),
        };
        let setup = &self.shared.setup;
        let spec_setup = self.spec_setup();
        let mut how = Start { cancel: context.ct.clone(), ..Start::default() };
        if let Some(token) = context.meta.get_progress_token() {
            let total = spec.policy(&setup.config.policy).max_iterations;
            how.observers.push(Arc::new(Progress { peer: context.peer.clone(), token, total }));
        }
        // The run holds a lease while it runs, so `runs resume` elsewhere refuses it.
        let worker = setup.store.clone().map(|store| Worker::start(store, &setup.config.queue));
        match recorder::start(&spec, &spec_setup, worker.as_ref(), how).await {
            Ok(result) => match serde_json::to_value(&result) {
                Ok(value) => reply::json(value),
                Err(e) => reply::bad_request(format!("cannot write the result: {e}")),
            },
            Err(e) => reply::bad_request(describe(e)),
        }
    }

    #[tool(name = "answer", description = ANSWER, input_schema = input::<AnswerArgs>())]
    async fn answer(&self, arguments: JsonObject, context: RequestContext<RoleServer>) -> CallToolResult {
        let args = match args::parse::<AnswerArgs>("answer", arguments) {
            Ok(args) => args,
            Err(message) => return reply::bad_request(message),
        };
        let setup = &self.shared.setup;
        let Some(store) = setup.store.clone() else {
            return reply::bad_request(
                "this server records no runs, so none awaits an answer: start it with a store (`database_url`)"
                    .to_owned(),
            );
        };
        let result = if args.abort {
            if args.answer.is_some() || args.max_iterations.is_some() {
                return reply::bad_request(
                    "`abort: true` ends the run: give no `answer` or `max_iterations`".to_owned(),
                );
            }
            match store.run(&args.run_id).await {
                Ok(Some(stored)) => match setup.guard.may_touch(&args.run_id, stored.origin) {
                    Ok(()) => store.abort_run(&args.run_id).await.map_err(RunError::from),
                    Err(e) => Err(RunError::from(e)),
                },
                Ok(None) => store.abort_run(&args.run_id).await.map_err(RunError::from),
                Err(e) => Err(RunError::from(e)),
            }
        } else {
            let Some(answer) = args.answer.as_deref() else {
                return reply::bad_request("give the `answer` to the run's question, or `abort: true`".to_owned());
            };
            let spec_setup = self.spec_setup();
            let how = Start { cancel: context.ct.clone(), ..Start::default() };
            let worker = Worker::start(store, &setup.config.queue);
            recorder::answer(&args.run_id, answer, args.max_iterations, &spec_setup, &worker, how).await
        };
        match result.map(|r| serde_json::to_value(&r)) {
            Ok(Ok(value)) => reply::json(value),
            Ok(Err(e)) => reply::bad_request(format!("cannot write the result: {e}")),
            Err(e) => reply::bad_request(describe(e)),
        }
    }

    #[tool(name = "validate", description = VALIDATE, input_schema = input::<ValidateArgs>())]
    async fn validate(&self, arguments: JsonObject) -> CallToolResult {
        let args = match args::parse::<ValidateArgs>("validate", arguments) {
            Ok(args) => args,
            Err(message) => return reply::bad_request(message),
        };
        let target = match self.shared.target(args.target_type.as_deref(), args.schema.as_ref(), args.check_formats) {
            Ok(target) => target,
            Err(message) => return reply::bad_request(message),
        };
        let context = args.context.map(Value::Object).unwrap_or(Value::Null);
        let (passed, issues) = match target.read(args.artifact) {
            Ok(artifact) => {
                let verdict = target.evaluate(&artifact, &context, 1).await;
                (verdict.passed, verdict.issues)
            }
            Err(issue) => (false, vec![issue]),
        };
        reply::json(json!({"passed": passed, "issues": issues}))
    }

    #[tool(name = "example", description = EXAMPLE, input_schema = input::<ExampleArgs>())]
    async fn example(&self, arguments: JsonObject) -> CallToolResult {
        let args = match args::parse::<ExampleArgs>("example", arguments) {
            Ok(args) => args,
            Err(message) => return reply::bad_request(message),
        };
        match (args.target_type, args.schema) {
            (Some(name), None) => {
                let kind = match self.shared.kinds().and_then(|k| k.require(&name)) {
                    Ok(kind) => kind,
                    Err(e) => return reply::bad_request(e),
                };
                let (example, source) = match &kind.example {
                    Some(example) => (example.clone(), "example.json"),
                    None => (skeleton(&kind.schema), "skeleton"),
                };
                reply::json(json!({
                    "target_type": kind.name,
                    "description": kind.description,
                    "instructions": kind.prompt,
                    "example": example,
                    "example_source": source,
                    "schema": kind.schema,
                }))
            }
            (None, Some(schema)) => match Target::schema(Value::Object(schema), self.shared.setup.config.formats()) {
                Ok(target) => {
                    let schema = target.schema.unwrap_or_default();
                    reply::json(json!({"example": skeleton(&schema), "example_source": "skeleton", "schema": schema}))
                }
                Err(message) => reply::bad_request(message),
            },
            (Some(_), Some(_)) => reply::bad_request("give `target_type` or `schema`, not both"),
            (None, None) => reply::bad_request(self.shared.name_a_target()),
        }
    }

    #[tool(name = "submit", description = SUBMIT, input_schema = input::<SubmitArgs>())]
    async fn submit(&self, arguments: JsonObject) -> CallToolResult {
        let args = match args::parse::<SubmitArgs>("submit", arguments) {
            Ok(args) => args,
            Err(message) => return reply::bad_request(message),
        };
        let (key, label) = match (&args.target_type, &args.schema) {
            (Some(name), None) => (format!("kind:{name}"), name.clone()),
            (None, Some(schema)) => (schema_key(&Value::Object(schema.clone())), schema_label(schema)),
            (Some(_), Some(_)) => return reply::bad_request("give `target_type` or `schema`, not both"),
            (None, None) => return reply::bad_request(self.shared.name_a_target()),
        };
        let max_attempts = args.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
        let ceiling = self.shared.setup.ceilings.max_iterations;
        if max_attempts == 0 || max_attempts > ceiling {
            return reply::bad_request(format!(
                "`max_attempts` = {max_attempts} is invalid: it must be between 1 and {ceiling}"
            ));
        }
        // Only the cap ends a count: a repeated or non-improving submission is told so in its
        // feedback but keeps its attempts.
        let spec = RunSpec {
            prompt: format!("Submit an artifact for {label}."),
            kind: args.target_type.clone(),
            schema: args.schema.clone().map(Value::Object),
            max_iterations: Some(max_attempts),
            repeat_limit: Some(0),
            patience: Some(0),
            // The agent wrote its own prompt and never reads redraft's, so the first rejection
            // shows the schema, once.
            prompt_style: Some(PromptStyle::Schema),
            check_formats: args.check_formats,
            ..RunSpec::default()
        };
        let context = args.context.map(Value::Object).unwrap_or(Value::Null);
        let this = self.clone();
        let start = move || -> Result<NewRun, String> {
            let prepared = spec.prepare_submitted(&this.spec_setup()).map_err(describe)?;
            let (runner, task) = (prepared.runner, prepared.task);
            Ok(Box::new(move || runner.submitted(task.clone()).map_err(describe)))
        };
        self.session.submissions.submit(&key, &label, start, args.artifact, &context).await
    }

    #[tool(name = "decide", description = DECIDE, input_schema = input::<DecideArgs>())]
    async fn decide(&self, mut arguments: JsonObject) -> CallToolResult {
        // `{"iteration_check": {…}}`, as the CLI reads it, is accepted too.
        if arguments.len() == 1
            && let Some(Value::Object(inner)) = arguments.remove("iteration_check")
        {
            arguments = inner;
        }
        let check = match args::parse::<DecideArgs>("decide", arguments).and_then(DecideArgs::into_check) {
            Ok(check) => check,
            Err(message) => return reply::bad_request(message),
        };
        let decision = self.session.decide(check, &self.shared.setup.config.decide);
        reply::json(json!({"decision": decision}))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for RedraftMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("redraft", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// Why a request cannot run, as the caller of a tool should read it.
fn describe(e: impl Into<RunError>) -> String {
    match e.into() {
        RunError::Config(ConfigError::NoModel) => {
            "no model is named\nhint: pass `model` as `provider/model` (e.g. `openai/gpt-4o-mini`), \
or set `default_model` in the server's redraft.toml"
                .to_owned()
        }
        other => other.to_string(),
    }
}

/// Progress notifications, one per finished attempt, when the caller asked for them.
#[derive(Debug)]
struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    total: u32,
}

#[async_trait::async_trait]
impl RunObserver for Progress {
    async fn attempt_finished(&self, _run_id: &str, a: &AttemptRecord) {
        let mut message = format!("attempt {}/{}: {}", a.iteration, self.total, a.status.as_str());
        if let Some(first) = a.issues.first() {
            let place = if first.path.is_empty() { "(root)" } else { first.path.as_str() };
            message.push_str(&format!(" ({place} {})", first.code));
        }
        let param = ProgressNotificationParam::new(self.token.clone(), f64::from(a.iteration))
            .with_total(f64::from(self.total))
            .with_message(message);
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!("cannot send a progress notification: {e}");
        }
    }
}
