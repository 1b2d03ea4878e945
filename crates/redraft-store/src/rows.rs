//! What both stores share: rows as read, columns as written, errors.

use std::time::Duration;

use redraft_core::policy::HaltReason;
use redraft_core::record::{AttemptRecord, PersonReply, RunResult, RunStatus};
use redraft_core::secrets;
use redraft_core::store::{Claim, Holder, Origin, Renewal, RunState, RunSummary, StoreError, StoredRun};
use serde_json::Value;

/// A `runs` row as [`Store::run`](redraft_core::store::Store::run) reads it.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct RunRow {
    pub id: String,
    pub state: String,
    pub spec: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub result: Option<String>,
    pub worker_id: Option<String>,
    pub lease_until: Option<i64>,
    /// The answers people gave (a JSON array), if any.
    pub answers: Option<String>,
    /// The face its request came through (`cli`, `http`, `mcp`); none for runs recorded before.
    pub origin: Option<String>,
    /// Started by the user's own process.
    pub local: bool,
}

/// A `runs` row as a list reads it: summary columns only.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct SummaryRow {
    pub id: String,
    pub state: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub iterations: i64,
    pub halted_because: Option<String>,
    pub best_score: Option<f64>,
    pub model: Option<String>,
    pub kind: Option<String>,
}

/// An `attempts` row.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct AttemptRow {
    pub iteration: i64,
    pub record: String,
}

/// The columns of an attempt to write.
#[derive(Debug)]
pub(crate) struct AttemptColumns {
    pub iteration: i64,
    pub status: &'static str,
    pub score: f64,
    pub has_artifact: bool,
    pub model: Option<String>,
    pub record: String,
}

/// Marks a stored attempt whose artifact is its raw text (text mode): the text is stored once,
/// as `raw`, and the artifact rebuilt from it on read.
const ARTIFACT_IS_RAW: &str = "artifact_is_raw";

/// Marks a stored result whose artifact is its best attempt's: the artifact is stored once, in
/// that attempt, and put back on read.
const ARTIFACT_IN_BEST_ATTEMPT: &str = "artifact_in_best_attempt";

/// The text of a JSON column, with every known secret ([`redraft_core::secrets`]) taken out:
/// every JSON the store writes — specs, attempts (raw output, issues, errors), results
/// (escalations), answers — is made here, so nothing that repeats an API key is kept. A text
/// holding none is written as serialized.
fn json_column(value: &impl serde::Serialize) -> Result<String, serde_json::Error> {
    let text = serde_json::to_string(value)?;
    if !secrets::contains(text.as_bytes()) {
        return Ok(text);
    }
    let mut value: Value = serde_json::from_str(&text)?;
    secrets::redact_json(&mut value);
    serde_json::to_string(&value)
}

/// An attempt as stored: its JSON, with a text-mode artifact (a copy of `raw`) left out.
fn encode_attempt(attempt: &AttemptRecord) -> Result<String, serde_json::Error> {
    if !matches!(&attempt.artifact, Some(Value::String(text)) if *text == attempt.raw) {
        return json_column(attempt);
    }
    let mut value = serde_json::to_value(attempt)?;
    if let Some(fields) = value.as_object_mut() {
        fields.insert("artifact".into(), Value::Null);
        fields.insert(ARTIFACT_IS_RAW.into(), Value::Bool(true));
    }
    json_column(&value)
}

/// An attempt as read back: stored by [`encode_attempt`], or whole (as earlier versions stored
/// every attempt).
fn decode_attempt(text: &str) -> Result<AttemptRecord, serde_json::Error> {
    let mut value: Value = serde_json::from_str(text)?;
    let from_raw = value.as_object_mut().and_then(|fields| fields.remove(ARTIFACT_IS_RAW)) == Some(Value::Bool(true));
    let mut attempt: AttemptRecord = serde_json::from_value(value)?;
    if from_raw {
        attempt.artifact = Some(Value::String(attempt.raw.clone()));
    }
    Ok(attempt)
}

/// A result as stored, without its history (which goes to `attempts`) and, when it is the best
/// attempt's, without its artifact (which that attempt holds).
fn encode_result(result: &RunResult) -> Result<String, serde_json::Error> {
    let in_best_attempt = result.artifact.is_some()
        && result
            .best_iteration
            .and_then(|best| result.history.iter().find(|a| a.iteration == best))
            .is_some_and(|best| best.artifact == result.artifact);
    // Field by field rather than `..result.clone()`, which would copy the whole history.
    let stored = RunResult {
        run_id: result.run_id.clone(),
        status: result.status,
        halted_because: result.halted_because,
        artifact: if in_best_attempt { None } else { result.artifact.clone() },
        validation: result.validation.clone(),
        iterations: result.iterations,
        best_iteration: result.best_iteration,
        best_score: result.best_score,
        best_ref: result.best_ref.clone(),
        artifact_sha256: result.artifact_sha256.clone(),
        metrics: result.metrics.clone(),
        history: Vec::new(),
        escalation: result.escalation.clone(),
        error: result.error.clone(),
    };
    if !in_best_attempt {
        return json_column(&stored);
    }
    let mut value = serde_json::to_value(&stored)?;
    if let Some(fields) = value.as_object_mut() {
        fields.insert(ARTIFACT_IN_BEST_ATTEMPT.into(), Value::Bool(true));
    }
    json_column(&value)
}

/// A result as read back, its history (and, when stored there, its artifact) taken from
/// `attempts`. `None` when the result names a best attempt that is not there.
fn decode_result(text: &str, attempts: &[AttemptRecord]) -> Result<Option<RunResult>, serde_json::Error> {
    let mut value: Value = serde_json::from_str(text)?;
    let in_best_attempt =
        value.as_object_mut().and_then(|fields| fields.remove(ARTIFACT_IN_BEST_ATTEMPT)) == Some(Value::Bool(true));
    let mut result: RunResult = serde_json::from_value(value)?;
    if in_best_attempt {
        let best = result.best_iteration.and_then(|i| attempts.iter().find(|a| a.iteration == i));
        match best {
            Some(best) => result.artifact = best.artifact.clone(),
            None => return Ok(None),
        }
    }
    result.history = attempts.to_vec();
    Ok(Some(result))
}

impl AttemptColumns {
    pub fn new(run_id: &str, attempt: &AttemptRecord) -> Result<Self, StoreError> {
        let record = encode_attempt(attempt).map_err(|e| StoreError::Query {
            action: format!("save attempt {} of run `{run_id}`", attempt.iteration),
            message: format!("cannot encode the attempt as JSON: {e}"),
        })?;
        Ok(Self {
            iteration: i64::from(attempt.iteration),
            status: attempt.status.as_str(),
            score: attempt.score.get(),
            has_artifact: attempt.artifact.is_some(),
            model: attempt.model.clone(),
            record,
        })
    }
}

/// The columns of a finished run to write.
#[derive(Debug)]
pub(crate) struct ResultColumns {
    pub state: &'static str,
    pub halted_because: &'static str,
    pub iterations: i64,
    pub best_score: Option<f64>,
    /// The result without its history, which goes to `attempts`.
    pub result: String,
    pub history: Vec<AttemptColumns>,
}

impl ResultColumns {
    pub fn new(result: &RunResult) -> Result<Self, StoreError> {
        let run_id = &result.run_id;
        let history =
            result.history.iter().map(|attempt| AttemptColumns::new(run_id, attempt)).collect::<Result<Vec<_>, _>>()?;
        let text = encode_result(result).map_err(|e| StoreError::Query {
            action: format!("finish run `{run_id}`"),
            message: format!("cannot encode the result as JSON: {e}"),
        })?;
        let state = match result.status {
            RunStatus::Succeeded => RunState::Succeeded,
            RunStatus::Failed => RunState::Failed,
            RunStatus::AwaitingInput => RunState::AwaitingInput,
        };
        Ok(Self {
            state: state.as_str(),
            halted_because: result.halted_because.as_str(),
            iterations: i64::from(result.iterations),
            best_score: result.best_score.map(|s| s.get()),
            result: text,
            history,
        })
    }

    /// The model of the first attempt that names one: the run's, when its spec named none.
    pub fn model(&self) -> Option<&str> {
        self.history.iter().find_map(|a| a.model.as_deref())
    }

    /// The iterations of the history, for deleting attempts the result does not list.
    pub fn iterations_in_history(&self) -> Vec<i64> {
        self.history.iter().map(|a| a.iteration).collect()
    }
}

/// The spec as stored.
pub(crate) fn encode_spec(run_id: &str, spec: &Value) -> Result<String, StoreError> {
    json_column(spec).map_err(|e| StoreError::Query {
        action: format!("insert run `{run_id}`"),
        message: format!("cannot encode the spec as JSON: {e}"),
    })
}

/// The proposer's `provider/model` a spec names, if any (`model`, prefixed by `provider` when
/// it is not already).
pub(crate) fn model_of_spec(spec: &Value) -> Option<String> {
    let model = spec.get("model").and_then(Value::as_str).filter(|m| !m.is_empty())?;
    match spec.get("provider").and_then(Value::as_str).filter(|p| !p.is_empty()) {
        Some(provider) if !model.starts_with(&format!("{provider}/")) => Some(format!("{provider}/{model}")),
        _ => Some(model.to_owned()),
    }
}

/// What claiming a run in `state`, held by `holder` until `lease_until`, comes to for
/// `worker_id`: `Ok` to take it (the claim to report), `Err` to leave it (the answer).
pub(crate) fn decide_claim(
    state: RunState,
    holder: Option<String>,
    lease_until: Option<i64>,
    worker_id: &str,
    now: i64,
    force: bool,
) -> Result<Claim, Claim> {
    match state {
        // A run awaiting an answer is taken by the answer, not by a claim.
        RunState::Succeeded | RunState::Failed | RunState::AwaitingInput => Err(Claim::Finished(state)),
        RunState::Queued => Ok(Claim::Claimed { takeover: false }),
        RunState::Running => match (holder, lease_until) {
            (Some(holder), _) if holder == worker_id => Ok(Claim::Claimed { takeover: false }),
            (Some(worker_id), Some(lease_until_ms)) if lease_until_ms >= now && !force => {
                Err(Claim::Held(Holder { worker_id, lease_until_ms }))
            }
            // Expired, broken by force, or written by a version without leases.
            _ => Ok(Claim::Claimed { takeover: true }),
        },
    }
}

/// The runs a renewal returned, with their cancel flags.
pub(crate) fn renewal(rows: Vec<(String, bool)>) -> Renewal {
    let cancel = rows.iter().filter(|(_, cancel)| *cancel).map(|(id, _)| id.clone()).collect();
    Renewal { held: rows.into_iter().map(|(id, _)| id).collect(), cancel }
}

/// A lease as milliseconds, bounded so that `now + lease` cannot overflow.
/// Whether `worker_id` may write to run `run_id`, given its `(state, holder)` row: it holds the
/// run running, or (when `finished` is allowed) finished it — writing a result again is
/// harmless.
pub(crate) fn check_holder(
    run_id: &str,
    row: Option<(String, Option<String>)>,
    worker_id: &str,
    finished: bool,
) -> Result<(), StoreError> {
    match row {
        None => Err(StoreError::NotFound { run_id: run_id.to_owned() }),
        Some((state, holder))
            if holder.as_deref() == Some(worker_id)
                && (state == "running"
                    || (finished && (state == "succeeded" || state == "failed" || state == "awaiting_input"))) =>
        {
            Ok(())
        }
        Some(_) => Err(StoreError::LeaseLost { run_id: run_id.to_owned(), worker_id: worker_id.to_owned() }),
    }
}

pub(crate) fn lease_ms(lease: Duration) -> i64 {
    i64::try_from(lease.as_millis()).unwrap_or(i64::MAX).min(i64::MAX / 4)
}

/// A query failed while doing `action`.
pub(crate) fn failed(action: impl Into<String>, error: sqlx::Error) -> StoreError {
    StoreError::Query { action: action.into(), message: error.to_string() }
}

fn corrupt(what: String, message: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt { what, message: message.to_string() }
}

pub(crate) fn state(run_id: &str, text: &str) -> Result<RunState, StoreError> {
    text.parse().map_err(|message: String| corrupt(format!("state of run `{run_id}`"), message))
}

fn u32_column(run_id: &str, column: &str, value: i64) -> Result<u32, StoreError> {
    u32::try_from(value)
        .map_err(|_| corrupt(format!("{column} of run `{run_id}`"), format!("`{value}` is out of range")))
}

impl SummaryRow {
    pub fn into_summary(self) -> Result<RunSummary, StoreError> {
        let halted_because = match &self.halted_because {
            None => None,
            Some(word) => Some(serde_json::from_value::<HaltReason>(Value::String(word.clone())).map_err(|e| {
                corrupt(format!("halt reason of run `{}`", self.id), format!("`{word}` is not a halt reason: {e}"))
            })?),
        };
        Ok(RunSummary {
            state: state(&self.id, &self.state)?,
            created_at_ms: self.created_at,
            updated_at_ms: self.updated_at,
            iterations: u32_column(&self.id, "iterations", self.iterations)?,
            halted_because,
            best_score: self.best_score,
            model: self.model,
            kind: self.kind,
            run_id: self.id,
        })
    }
}

impl RunRow {
    /// The stored run, its attempts (in order) put back as the result's history.
    pub fn into_stored(self, attempts: Vec<AttemptRow>) -> Result<StoredRun, StoreError> {
        let run_id = self.id;
        let spec = serde_json::from_str(&self.spec).map_err(|e| corrupt(format!("spec of run `{run_id}`"), e))?;
        let attempts = attempts
            .into_iter()
            .map(|row| {
                decode_attempt(&row.record)
                    .map_err(|e| corrupt(format!("attempt {} of run `{run_id}`", row.iteration), e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let result = match &self.result {
            None => None,
            Some(text) => Some(
                decode_result(text, &attempts)
                    .map_err(|e| corrupt(format!("result of run `{run_id}`"), e))?
                    .ok_or_else(|| {
                        corrupt(
                            format!("result of run `{run_id}`"),
                            "its artifact is in a best attempt that is missing",
                        )
                    })?,
            ),
        };
        let answers = match &self.answers {
            None => Vec::new(),
            Some(text) => serde_json::from_str(text).map_err(|e| corrupt(format!("answers of run `{run_id}`"), e))?,
        };
        let state = state(&run_id, &self.state)?;
        let holder = match (state, self.worker_id, self.lease_until) {
            (RunState::Running, Some(worker_id), Some(lease_until_ms)) => Some(Holder { worker_id, lease_until_ms }),
            _ => None,
        };
        Ok(StoredRun {
            state,
            holder,
            run_id,
            spec,
            origin: Origin::stored(self.origin.as_deref(), self.local),
            created_at_ms: self.created_at,
            updated_at_ms: self.updated_at,
            attempts,
            result,
            answers,
        })
    }
}

/// The answers of a run with `reply` added, as stored.
pub(crate) fn with_answer(run_id: &str, stored: Option<&str>, reply: &PersonReply) -> Result<String, StoreError> {
    let mut answers: Vec<Value> = match stored {
        None => Vec::new(),
        Some(text) => serde_json::from_str(text).map_err(|e| corrupt(format!("answers of run `{run_id}`"), e))?,
    };
    let encode = |e: serde_json::Error| StoreError::Query {
        action: format!("answer run `{run_id}`"),
        message: format!("cannot encode the answer as JSON: {e}"),
    };
    answers.push(serde_json::to_value(reply).map_err(encode)?);
    json_column(&answers).map_err(encode)
}

/// A stored result (without its history) with its status set to `failed`: a run awaiting an
/// answer that was aborted.
pub(crate) fn aborted_result(run_id: &str, stored: Option<&str>) -> Result<String, StoreError> {
    let text =
        stored.ok_or_else(|| corrupt(format!("result of run `{run_id}`"), "a run awaiting an answer has none"))?;
    let mut value: Value = serde_json::from_str(text).map_err(|e| corrupt(format!("result of run `{run_id}`"), e))?;
    let fields =
        value.as_object_mut().ok_or_else(|| corrupt(format!("result of run `{run_id}`"), "it is not a JSON object"))?;
    fields.insert("status".into(), Value::String(RunStatus::Failed.as_str().into()));
    json_column(&value).map_err(|e| corrupt(format!("result of run `{run_id}`"), e))
}

/// The answers to store once `reply` answers run `run_id` (stored in `state`, with `answers`):
/// refused unless it awaits one.
pub(crate) fn answered(
    run_id: &str,
    state_text: &str,
    answers: Option<&str>,
    reply: &PersonReply,
) -> Result<String, StoreError> {
    must_await(run_id, state(run_id, state_text)?)?;
    with_answer(run_id, answers, reply)
}

/// The result to store once run `run_id` (stored in `state`, with `result`) is aborted:
/// refused unless it awaits an answer.
pub(crate) fn aborted(run_id: &str, state_text: &str, result: Option<&str>) -> Result<String, StoreError> {
    must_await(run_id, state(run_id, state_text)?)?;
    aborted_result(run_id, result)
}

/// Refuse an answer or an abort unless the run awaits one.
pub(crate) fn must_await(run_id: &str, state: RunState) -> Result<(), StoreError> {
    if state == RunState::AwaitingInput {
        Ok(())
    } else {
        Err(StoreError::NotAwaiting { run_id: run_id.to_owned(), state })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_model_comes_from_the_spec() {
        assert_eq!(model_of_spec(&json!({"model": "openai/gpt-5"})).as_deref(), Some("openai/gpt-5"));
        assert_eq!(model_of_spec(&json!({"provider": "local", "model": "qwen"})).as_deref(), Some("local/qwen"));
        assert_eq!(model_of_spec(&json!({"provider": "local", "model": "local/qwen"})).as_deref(), Some("local/qwen"));
        assert_eq!(model_of_spec(&json!({"provider": "local"})), None);
        assert_eq!(model_of_spec(&json!({"prompt": "x"})), None);
        assert_eq!(model_of_spec(&json!("not an object")), None);
    }

    #[test]
    fn leases_never_overflow() {
        assert_eq!(lease_ms(Duration::from_millis(1500)), 1500);
        assert_eq!(lease_ms(Duration::MAX), i64::MAX / 4);
    }

    #[test]
    fn damaged_rows_are_corrupt_not_panics() {
        let row = SummaryRow {
            id: "r".into(),
            state: "paused".into(),
            created_at: 0,
            updated_at: 0,
            iterations: 0,
            halted_because: None,
            best_score: None,
            model: None,
            kind: None,
        };
        assert!(matches!(row.into_summary(), Err(StoreError::Corrupt { .. })));
        let row = RunRow {
            id: "r".into(),
            state: "running".into(),
            spec: "{}".into(),
            created_at: 0,
            updated_at: 0,
            result: None,
            worker_id: None,
            lease_until: None,
            answers: None,
            origin: None,
            local: false,
        };
        let err = row.into_stored(vec![AttemptRow { iteration: 1, record: "{".into() }]).unwrap_err();
        assert!(err.to_string().starts_with("the stored attempt 1 of run `r` is damaged: "), "{err}");
    }
}
