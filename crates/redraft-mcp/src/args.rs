//! The tools' arguments, as their input schemas show them. `iterate` takes the names MCP clients use
//! (`target_type`, `max_budget`, `timeout`) and is turned into the one request shape,
//! [`RunSpec`]; `decide` mirrors the core's `IterationCheck` so that it has a schema.

use std::time::Duration;

use redraft::core::decide::IterationCheck;
use redraft::core::{OnEscalation, duration};
use redraft::spec::Directives;
use redraft::{PromptStyle, RunSpec};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON object.
pub type Object = Map<String, Value>;

/// Arguments of `iterate`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IterateArgs {
    /// The task for the model.
    pub prompt: String,
    /// A system message for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// A JSON object shown to the model and to the checks (a kind's rules read it as `context`,
    /// e.g. the contract a fill is for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Object>,
    /// A registered kind (artifact type) to produce, checked by its JSON Schema and rules
    /// (`kind` is accepted too). The `example` tool shows a kind's shape.
    #[serde(default, alias = "kind", skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
    /// An inline JSON Schema the answer must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Object>,
    /// Evaluator directive(s), all of which must pass: `kind:NAME`, `schema:PATH`, `exec:CMD`
    /// (only commands the server allows), `http:URL`, `score:CRITERION` (an LLM judge),
    /// `llm:NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator: Option<Directives>,
    /// The model, as `provider/model` (`openai/gpt-4o-mini`, `ollama/qwen3`); by default the
    /// server's `default_model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A provider named in the server's config; `model` is then that provider's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Attempts at most (by default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// The score in [0, 1] at or above which an answer passes (by default 1.0, or 0.9 with a
    /// scoring evaluator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<f64>,
    /// Halt after this many attempts in a row that do not improve the best score (by default
    /// off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patience: Option<u32>,
    /// Halt before an attempt that would take spending past this many USD (needs the model's
    /// price in the server's config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_budget: Option<f64>,
    /// Halt after this long, cancelling the attempt in flight: `"90s"`, `"5m"` or seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wall_time: Option<HumanDuration>,
    /// The limit of one attempt (by default 120 s): `"120s"` or seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<HumanDuration>,
    /// Halt when the same answer comes this many times (0 is off; by default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_limit: Option<u32>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Output token limit per attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Check the raw text instead of a JSON value extracted from it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub text: bool,
    /// How the expected shape is shown to the model (by default both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_style: Option<PromptStyleArg>,
    /// A sandbox for `exec:` evaluators: a name from the server's config, or an inline spec
    /// such as `{"network": false}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxArg>,
    /// The artifact file's extension for `exec:` evaluators (`py`, `rs`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_ext: Option<String>,
    /// Whether JSON Schema `format`s are checked (`"date"` rejects `"July 4th"`); `false` makes
    /// them annotations only. By default, the server's `check_formats` (`true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_formats: Option<bool>,
    /// Whether an answer is coerced toward the schema before it is checked (`"€77.08"` for a
    /// number is 77.08, recorded as a repair); `false` checks it exactly as extracted. By
    /// default, the server's `coerce` (`true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coerce: Option<bool>,
    /// What a run that would fail does: `fail` (by default, the server's `on_escalation`) or
    /// `await`: it stops awaiting a person's answer, which the `answer` tool gives (the run is
    /// kept in the server's store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_escalation: Option<OnEscalationArg>,
}

/// What a run that would fail does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnEscalationArg {
    Fail,
    Await,
}

/// Arguments of `answer`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerArgs {
    /// The run awaiting an answer (its `run_id`, from `iterate` with `on_escalation: "await"`).
    pub run_id: String,
    /// The answer to the run's escalation question, given to the model as a person's reply.
    /// Leave it out with `abort: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Attempts the run may make after the answer (by default as many as it had).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// End the run as failed instead of answering it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort: bool,
}

/// A duration: `"90s"`, `"5m"`, `"1h30m"`, `"250ms"`, or a number of seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum HumanDuration {
    Seconds(f64),
    Text(String),
}

impl HumanDuration {
    fn parse(&self, key: &str) -> Result<Duration, String> {
        let parsed = match self {
            HumanDuration::Seconds(n) => duration::parse(&n.to_string()),
            HumanDuration::Text(t) => duration::parse(t),
        };
        parsed.map_err(|e| format!("`{key}`: {e}"))
    }
}

/// A sandbox: the name of one in the server's config, or an inline spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SandboxArg {
    Name(String),
    Spec(Object),
}

/// How the expected shape is shown to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PromptStyleArg {
    Schema,
    Example,
    Both,
}

impl IterateArgs {
    /// The run request these arguments describe.
    pub fn into_spec(self) -> Result<RunSpec, String> {
        Ok(RunSpec {
            max_wall_time: self.max_wall_time.as_ref().map(|d| d.parse("max_wall_time")).transpose()?,
            attempt_timeout: self.timeout.as_ref().map(|d| d.parse("timeout")).transpose()?,
            prompt: self.prompt,
            system: self.system,
            context: self.context.map(Value::Object),
            kind: self.target_type,
            schema: self.schema.map(Value::Object),
            evaluator: self.evaluator,
            provider: self.provider,
            model: self.model,
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            max_iterations: self.max_iterations,
            success_threshold: self.success_threshold,
            patience: self.patience,
            max_budget_usd: self.max_budget,
            repeat_limit: self.repeat_limit,
            text: self.text,
            prompt_style: self.prompt_style.map(|s| match s {
                PromptStyleArg::Schema => PromptStyle::Schema,
                PromptStyleArg::Example => PromptStyle::Example,
                PromptStyleArg::Both => PromptStyle::Both,
            }),
            artifact_ext: self.artifact_ext,
            check_formats: self.check_formats,
            coerce: self.coerce,
            sandbox: self.sandbox.map(|s| match s {
                SandboxArg::Name(name) => Value::String(name),
                SandboxArg::Spec(spec) => Value::Object(spec),
            }),
            on_escalation: self.on_escalation.map(|o| match o {
                OnEscalationArg::Fail => OnEscalation::Fail,
                OnEscalationArg::Await => OnEscalation::Await,
            }),
            // Agent commands are for the local CLI only.
            ..RunSpec::default()
        })
    }
}

/// Arguments of `validate`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateArgs {
    /// The registered kind to check against: its JSON Schema, then its rules (`kind` is
    /// accepted too). Give this or `schema`.
    #[serde(default, alias = "kind", skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
    /// An inline JSON Schema to check against. Give this or `target_type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Object>,
    /// The artifact: a JSON value (a string holding JSON is read as JSON when the target
    /// expects no string).
    #[schemars(with = "AnyValue")]
    pub artifact: Value,
    /// The JSON object a kind's rules read as `context`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Object>,
    /// Whether JSON Schema `format`s are checked (`"date"` rejects `"July 4th"`); `false` makes
    /// them annotations only. By default, the server's `check_formats` (`true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_formats: Option<bool>,
}

/// Arguments of `example`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExampleArgs {
    /// The registered kind whose example and schema to show (`kind` is accepted too).
    #[serde(default, alias = "kind", skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
    /// Or an inline JSON Schema, to get a skeleton instance of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Object>,
}

/// Arguments of `submit`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitArgs {
    /// The registered kind the artifact is (`kind` is accepted too). Give this or `schema`.
    #[serde(default, alias = "kind", skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
    /// An inline JSON Schema the artifact must match. Give this or `target_type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Object>,
    /// The artifact: a JSON value (a string holding JSON is read as JSON when the target
    /// expects no string).
    #[schemars(with = "AnyValue")]
    pub artifact: Value,
    /// The JSON object a kind's rules read as `context`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Object>,
    /// How many submissions this target gets in this session (by default 3). Fixed by the
    /// first submission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Whether JSON Schema `format`s are checked (`"date"` rejects `"July 4th"`); `false` makes
    /// them annotations only. By default, the server's `check_formats` (`true`).
    /// Fixed by the first submission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_formats: Option<bool>,
}

/// Any JSON value.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct AnyValue(Value);

impl JsonSchema for AnyValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AnyValue".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": ["object", "array", "string", "number", "integer", "boolean", "null"]
        })
    }
}

/// Arguments of `decide`: one `iteration_check`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideArgs {
    /// The task the iterations belong to; earlier checks of the same task in this session are
    /// remembered for the escalation.
    pub task_id: String,
    /// The iteration just finished, from 1.
    pub current_iteration: u32,
    /// The iterations allowed.
    pub max_iterations: u32,
    /// What the tests said.
    pub test_result: TestResultArg,
    /// What the review said (by default pending).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_result: Option<ReviewResultArg>,
    /// Earlier iterations of the task, when the caller keeps them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<PriorCheckArg>,
}

/// A test run's outcome.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestResultArg {
    pub status: TestStatusArg,
    /// The test output (failures are read from it).
    #[serde(default)]
    pub output: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TestStatusArg {
    Pass,
    Fail,
}

/// A review's outcome.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewResultArg {
    pub status: ReviewStatusArg,
    /// What the reviewer wrote.
    #[serde(default)]
    pub feedback: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReviewStatusArg {
    Approve,
    Reject,
    Pending,
}

/// An earlier iteration.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PriorCheckArg {
    pub iteration: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_result: Option<TestResultArg>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_result: Option<ReviewResultArg>,
    /// A one-line summary; derived from the results when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

impl DecideArgs {
    /// The core's iteration check (the same names, so the conversion is a round trip).
    pub fn into_check(self) -> Result<IterationCheck, String> {
        let value = serde_json::to_value(&self).map_err(|e| e.to_string())?;
        serde_json::from_value(value).map_err(|e| e.to_string())
    }
}

/// Read a tool's arguments, naming what is wrong in words the caller can act on.
pub fn parse<T: DeserializeOwned>(tool: &str, args: Object) -> Result<T, String> {
    serde_json::from_value(Value::Object(args))
        .map_err(|e| format!("the arguments of `{tool}` are invalid: {e}\nhint: see the tool's input schema"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Object {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn iterate_takes_the_spec_names() {
        let args: IterateArgs = parse(
            "iterate",
            object(json!({
                "prompt": "Staff C-7",
                "target_type": "fill",
                "evaluator": ["exec:true"],
                "max_iterations": 4,
                "success_threshold": 0.8,
                "patience": 2,
                "max_budget": 0.5,
                "max_wall_time": "90s",
                "model": "openai/x",
                "timeout": 30,
                "sandbox": {"network": false}
            })),
        )
        .unwrap();
        let spec = args.into_spec().unwrap();
        assert_eq!(spec.kind.as_deref(), Some("fill"));
        assert_eq!(spec.max_budget_usd, Some(0.5));
        assert_eq!(spec.max_wall_time, Some(Duration::from_secs(90)));
        assert_eq!(spec.attempt_timeout, Some(Duration::from_secs(30)));
        assert_eq!(spec.sandbox, Some(json!({"network": false})));
        assert_eq!(spec.agent, None);
        let kind: IterateArgs = parse("iterate", object(json!({"prompt": "x", "kind": "fill"}))).unwrap();
        assert_eq!(kind.target_type.as_deref(), Some("fill"));
    }

    #[test]
    fn bad_arguments_are_named() {
        let err = parse::<IterateArgs>("iterate", object(json!({"prompt": "x", "max_iteration": 3}))).unwrap_err();
        assert!(err.contains("max_iteration") && err.contains("`iterate`"), "{err}");
        let err =
            IterateArgs { prompt: "x".into(), timeout: Some(HumanDuration::Text("soon".into())), ..Default::default() }
                .into_spec()
                .unwrap_err();
        assert!(err.contains("`timeout`") && err.contains("soon"), "{err}");
    }

    #[test]
    fn decide_args_are_the_core_iteration_check() {
        let args: DecideArgs = parse(
            "decide",
            object(json!({
                "task_id": "t", "current_iteration": 2, "max_iterations": 3,
                "test_result": {"status": "fail", "output": "FAIL x"},
                "review_result": {"status": "pending"},
                "history": [{"iteration": 1, "test_result": {"status": "fail"}, "summary": "s"}]
            })),
        )
        .unwrap();
        let check = args.into_check().unwrap();
        assert_eq!((check.current_iteration, check.history.len()), (2, 1));
    }
}
