//! The verdict on an artifact, with the work of checking kept off the threads that serve
//! requests: every evaluator that computes ([`Work::Compute`]: a schema, rules, a Rust closure)
//! runs on a blocking thread (`spawn_blocking`), as does reading the answer, while those that
//! wait on something outside are awaited where the run is. The work runs under a [`CancelFlag`]
//! that is set when its result is no longer wanted — the run was cancelled, the attempt's time
//! ran out, the process is stopping: whatever drops the future that waits for it — and that
//! the work looks at between its steps, so it ends soon after instead of running on unseen.

use std::sync::Arc;

use redraft_core::{CancelFlag, EvalInput, Evaluator, EvaluatorError, Verdict, Work};
use serde_json::Value;
use tracing::field::Empty;
use tracing::{Instrument, Span, info_span};

/// Sets its flag when dropped: the work of a check whose future is dropped is told to stop.
#[derive(Debug)]
pub(super) struct CancelOnDrop(pub(super) CancelFlag);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Run `work` on a blocking thread; `Err` with what it said when it panicked.
pub(super) async fn off_thread<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(work).await.map_err(|e| match e.try_into_panic() {
        Ok(panic) => match panic.downcast::<String>() {
            Ok(message) => format!("it panicked: {message}"),
            Err(panic) => match panic.downcast::<&str>() {
                Ok(message) => format!("it panicked: {message}"),
                Err(_) => "it panicked".to_owned(),
            },
        },
        Err(e) => format!("it was stopped: {e}"),
    })
}

/// Run every evaluator on `artifact`, each in its span, and combine their verdicts: how an
/// attempt is judged, and how a check outside a run (MCP `validate`) judges too. The
/// evaluators that compute run off the threads that serve requests; when this future is
/// dropped, they are told to stop.
pub async fn verdict(evaluators: &[Arc<dyn Evaluator>], artifact: &Value, context: &Value, iteration: u32) -> Verdict {
    let cancel = CancelFlag::new();
    let _stop = CancelOnDrop(cancel.clone());
    checked(evaluators, &Arc::new(artifact.clone()), &Arc::new(context.clone()), iteration, &cancel).await
}

/// [`verdict`] under `cancel`: once it is set, no further evaluator starts.
pub(super) async fn checked(
    evaluators: &[Arc<dyn Evaluator>],
    artifact: &Arc<Value>,
    context: &Arc<Value>,
    iteration: u32,
    cancel: &CancelFlag,
) -> Verdict {
    let mut outcomes = Vec::with_capacity(evaluators.len());
    for evaluator in evaluators {
        if cancel.is_cancelled() {
            break;
        }
        let span = info_span!(
            "evaluator",
            redraft.evaluator = evaluator.name(),
            redraft.iteration = i64::from(iteration),
            redraft.score = Empty,
            redraft.passed = Empty,
            error.type = Empty,
            otel.status_code = Empty,
        );
        let outcome = match evaluator.work() {
            Work::Wait => {
                let input = EvalInput { artifact, context, iteration, cancel };
                evaluator.evaluate(input).instrument(span.clone()).await
            }
            Work::Compute => compute(evaluator, artifact, context, iteration, cancel, span.clone()).await,
        };
        match &outcome {
            Ok(verdict) => span.record("redraft.score", verdict.score.get()).record("redraft.passed", verdict.passed),
            Err(_) => span.record("error.type", "evaluator_error").record("otel.status_code", "ERROR"),
        };
        let outcome = outcome.map(|mut verdict| {
            for issue in &mut verdict.issues {
                issue.evaluator.get_or_insert_with(|| evaluator.name().into());
            }
            verdict
        });
        outcomes.push(outcome);
    }
    redraft_core::evaluator::combine(outcomes)
}

/// `evaluator` run on a blocking thread. A panic in it is the evaluator breaking, not the run.
async fn compute(
    evaluator: &Arc<dyn Evaluator>,
    artifact: &Arc<Value>,
    context: &Arc<Value>,
    iteration: u32,
    cancel: &CancelFlag,
    span: Span,
) -> Result<Verdict, EvaluatorError> {
    let runtime = tokio::runtime::Handle::current();
    let (judge, artifact, context, cancel) = (evaluator.clone(), artifact.clone(), context.clone(), cancel.clone());
    let work = move || {
        let input = EvalInput { artifact: &artifact, context: &context, iteration, cancel: &cancel };
        runtime.block_on(judge.evaluate(input).instrument(span))
    };
    off_thread(work)
        .await
        .unwrap_or_else(|message| Err(EvaluatorError::Failed { evaluator: evaluator.name().to_owned(), message }))
}
