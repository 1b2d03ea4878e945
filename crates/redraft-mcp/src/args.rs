//! The tools' arguments, as their input schemas show them. `iterate` takes the one run request,
//! [`RunSpec`](redraft::RunSpec), as every face does (with the names MCP clients use —
//! `target_type`, `max_budget`, `timeout` — shown in its schema too: [`iterate_schema`]);
//! `decide` mirrors the core's `IterationCheck` so that it has a schema.

#[cfg(test)]
use redraft::RunSpec;
use redraft::core::decide::IterationCheck;
#[cfg(test)]
use redraft::spec::SandboxRequest;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON object.
pub type Object = Map<String, Value>;

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

/// The input schema of `iterate`: the run request's, with the names MCP clients use beside
/// the request's own (`target_type` for `kind`, `max_budget` for `max_budget_usd`, `timeout`
/// for `attempt_timeout`), which the request reads as the same fields.
pub fn iterate_schema(mut schema: Object) -> Object {
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for (alias, name) in [("target_type", "kind"), ("max_budget", "max_budget_usd"), ("timeout", "attempt_timeout")]
        {
            if let Some(Value::Object(field)) = properties.get(name) {
                let mut field = field.clone();
                field.insert("description".into(), Value::String(format!("The same as `{name}`.")));
                properties.insert(alias.to_owned(), Value::Object(field));
            }
        }
    }
    schema
}

/// Read a tool's arguments, naming what is wrong in words the caller can act on.
pub fn parse<T: DeserializeOwned>(tool: &str, args: Object) -> Result<T, String> {
    serde_path_to_error::deserialize(Value::Object(args)).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." { String::new() } else { format!("`{path}`: ") };
        format!("the arguments of `{tool}` are invalid: {at}{}\nhint: see the tool's input schema", e.into_inner())
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn object(v: Value) -> Object {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn iterate_takes_the_one_run_request_with_the_mcp_names() {
        let spec: RunSpec = parse(
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
        assert_eq!(spec.kind.as_deref(), Some("fill"));
        assert_eq!(spec.max_budget_usd, Some(0.5));
        assert_eq!(spec.max_wall_time, Some(Duration::from_secs(90)));
        assert_eq!(spec.attempt_timeout, Some(Duration::from_secs(30)));
        assert_eq!(
            spec.sandbox,
            Some(SandboxRequest::Inline(redraft::sandbox::Sandbox { network: false, ..Default::default() }))
        );
        assert_eq!(spec.agent, None);
        let kind: RunSpec = parse("iterate", object(json!({"prompt": "x", "kind": "fill"}))).unwrap();
        assert_eq!(kind.kind.as_deref(), Some("fill"));
        // The schema shows what is read, the MCP names included.
        let schema =
            iterate_schema(serde_json::to_value(schemars::schema_for!(RunSpec)).unwrap().as_object().unwrap().clone());
        let properties = schema.get("properties").and_then(Value::as_object).unwrap();
        for name in ["prompt", "kind", "target_type", "max_budget_usd", "max_budget", "attempt_timeout", "timeout"] {
            assert!(properties.contains_key(name), "{name}");
        }
    }

    #[test]
    fn bad_arguments_are_named() {
        let err = parse::<RunSpec>("iterate", object(json!({"prompt": "x", "max_iteration": 3}))).unwrap_err();
        assert!(err.contains("max_iteration") && err.contains("`iterate`"), "{err}");
        let err = parse::<RunSpec>("iterate", object(json!({"prompt": "x", "timeout": "soon"}))).unwrap_err();
        assert!(err.contains("soon"), "{err}");
        let err = parse::<RunSpec>("iterate", object(json!({"prompt": "x", "sandbox": 3}))).unwrap_err();
        assert!(err.contains("sandbox"), "{err}");
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
