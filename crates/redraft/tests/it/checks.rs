//! Checking an answer cannot pin the process: evaluators that compute run off the runtime's
//! threads under a cancellation flag they look at, a cancelled run stops its check, a check past
//! the attempt's time is recorded as `check_timeout` and not done again when the run resumes, and
//! no evaluator can make an attempt keep more than 1,000 issues.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redraft::config::Config;
use redraft::core::{CancelFlag, EvaluatorError, codes};
use redraft::providers::MockProvider;
use redraft::queue::Worker;
use redraft::recorder::{self, Start};
use redraft::{
    AttemptStatus, CancellationToken, EvalInput, Evaluator, HaltReason, Issue, Policy, RunOptions, RunSpec, Runner,
    Task, Verdict,
};
use redraft_testkit::processes::eventually;
use serde_json::{Value, json};

/// How long a test waits for what it started to happen (a bound, not a guess).
const WAIT: Duration = Duration::from_secs(10);

/// A check that computes until it is told to stop, on the answers it `hangs_on` (every answer
/// when `None`; the others pass): it spins on its cancellation flag. It counts the checks that
/// began and those that saw the flag, and keeps the artifacts it was given. Should the flag never
/// come, it gives up after a minute (and says so), so that a broken runner fails the test
/// instead of hanging it.
#[derive(Debug, Default)]
pub struct HangingEvaluator {
    hangs_on: Option<Value>,
    pub started: AtomicUsize,
    pub stopped: AtomicUsize,
    pub given_up: AtomicUsize,
    pub seen: Mutex<Vec<Value>>,
}

const GIVE_UP: Duration = Duration::from_secs(60);

#[async_trait::async_trait]
impl Evaluator for HangingEvaluator {
    fn name(&self) -> &str {
        "hanging"
    }

    async fn evaluate(&self, input: EvalInput<'_>) -> Result<Verdict, EvaluatorError> {
        self.seen.lock().unwrap().push(input.artifact.clone());
        if self.hangs_on.as_ref().is_some_and(|hostile| hostile != input.artifact) {
            return Ok(Verdict::pass());
        }
        self.started.fetch_add(1, Ordering::SeqCst);
        let t0 = Instant::now();
        while !input.cancel.is_cancelled() {
            if t0.elapsed() > GIVE_UP {
                self.given_up.fetch_add(1, Ordering::SeqCst);
                return Ok(Verdict::pass());
            }
            std::hint::spin_loop();
        }
        self.stopped.fetch_add(1, Ordering::SeqCst);
        Ok(Verdict::pass())
    }
}

fn runner(texts: &[&str], evaluator: Arc<dyn Evaluator>, policy: Policy) -> Runner {
    Runner::builder()
        .provider(Arc::new(MockProvider::texts("mock/checks", texts.iter().copied())))
        .evaluator(evaluator)
        .policy(policy)
        .build()
        .unwrap()
}

// One runtime thread: a check computing on it would hold it, and nothing could cancel the run.
#[tokio::test(flavor = "current_thread")]
async fn a_run_cancelled_during_a_check_returns_and_the_check_sees_its_flag() {
    let hanging = Arc::new(HangingEvaluator::default());
    let runner = runner(&[r#"{"n": 1}"#], hanging.clone(), Policy::default());
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { runner.run_until_cancelled(Task::from("go"), cancel).await }
    });
    assert!(eventually(WAIT, || hanging.started.load(Ordering::SeqCst) == 1).await, "the check never began");

    cancel.cancel();
    let result = tokio::time::timeout(WAIT, run).await.expect("the run did not stop").unwrap().unwrap();
    assert_eq!(result.halted_because, HaltReason::Cancelled);
    assert!(eventually(WAIT, || hanging.stopped.load(Ordering::SeqCst) == 1).await, "the check never saw its flag");
    assert_eq!(hanging.given_up.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_check_dropped_from_outside_is_told_to_stop() {
    let hanging = Arc::new(HangingEvaluator::default());
    let evaluators: Vec<Arc<dyn Evaluator>> = vec![hanging.clone()];
    let check = tokio::spawn(async move { redraft::runner::verdict(&evaluators, &json!(1), &Value::Null, 1).await });
    assert!(eventually(WAIT, || hanging.started.load(Ordering::SeqCst) == 1).await, "the check never began");
    check.abort();
    assert!(eventually(WAIT, || hanging.stopped.load(Ordering::SeqCst) == 1).await, "the check never saw its flag");
}

fn config(dir: &Path) -> Config {
    let text = format!("database_url = '{}'\n", dir.join("redraft.db").display());
    Config::parse(&text, Path::new("test.toml")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_past_the_attempt_time_is_recorded_and_not_done_again_when_the_run_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let store = redraft::store::open(&config).await.unwrap();
    let worker = Worker::start(store.clone(), &config.queue);
    let hostile = json!({"n": 1});
    let policy = Policy { attempt_timeout: Duration::from_millis(300), max_iterations: 1, ..Policy::default() };
    let spec: RunSpec = serde_json::from_value(json!({"prompt": "go"})).unwrap();

    // The first process: the check does not end within the attempt's time.
    let first = Arc::new(HangingEvaluator { hangs_on: Some(hostile.clone()), ..HangingEvaluator::default() });
    let run_id = redraft::new_run_id();
    let how = Start { run_id: Some(run_id.clone()), ..Start::default() };
    let runner1 = runner(&[r#"{"n": 1}"#], first.clone(), policy.clone());
    let result = recorder::start_prepared(&spec, redraft::core::Origin::Cli, runner1, Task::from("go"), &worker, how)
        .await
        .unwrap();
    let attempt = &result.history[0];
    assert_eq!(attempt.status, AttemptStatus::Rejected);
    assert_eq!(attempt.issues.len(), 1);
    assert_eq!(attempt.issues[0].code, codes::CHECK_TIMEOUT);
    let message = &attempt.issues[0].message;
    assert!(message.contains("attempt_timeout") && message.contains("unchecked"), "{message}");
    assert_eq!(attempt.raw, r#"{"n": 1}"#, "the answer is kept");
    assert_eq!(attempt.artifact, Some(hostile.clone()));
    assert!(eventually(WAIT, || first.stopped.load(Ordering::SeqCst) == 1).await, "the check never saw its flag");

    // As stored, so as a process resuming the run reads it.
    let stored = store.run(&run_id).await.unwrap().unwrap();
    assert_eq!(stored.attempts.len(), 1);
    assert_eq!(stored.attempts[0].issues[0].code, codes::CHECK_TIMEOUT);

    // The next process resumes it with one more attempt: the recorded one is replayed, not
    // checked again; the next answer is checked.
    let second = Arc::new(HangingEvaluator { hangs_on: Some(hostile), ..HangingEvaluator::default() });
    let provider = Arc::new(MockProvider::texts("mock/checks", [r#"{"n": 2}"#]));
    let runner2 = Runner::builder()
        .provider(provider.clone())
        .evaluator(second.clone())
        .policy(Policy { max_iterations: 2, ..policy })
        .build()
        .unwrap();
    let options = RunOptions { restore: stored.attempts, ..RunOptions::default() };
    let resumed = runner2.run_with(Task::from("go"), options).await.unwrap();
    assert_eq!(resumed.halted_because, HaltReason::Success);
    assert_eq!(resumed.iterations, 2);
    assert_eq!(*second.seen.lock().unwrap(), [json!({"n": 2})], "only the new answer was checked");
    assert_eq!(second.started.load(Ordering::SeqCst), 0);
    assert_eq!(provider.calls().len(), 1);
}

#[tokio::test]
async fn a_check_that_panics_is_an_evaluator_error_not_a_broken_run() {
    let runner = Runner::builder()
        .provider(Arc::new(MockProvider::texts("mock/checks", [r#"{"n": 1}"#])))
        .check("explodes", |_artifact: &Value| -> Result<(), String> { panic!("boom") })
        .max_iterations(1)
        .build()
        .unwrap();
    let result = runner.run("go").await.unwrap();
    let issue = &result.history[0].issues[0];
    assert_eq!(issue.code, codes::EVALUATOR_ERROR);
    assert!(issue.message.contains("it panicked: boom"), "{}", issue.message);
}

#[tokio::test]
async fn a_users_check_cannot_make_an_attempt_keep_more_than_a_thousand_issues() {
    let runner = Runner::builder()
        .provider(Arc::new(MockProvider::texts("mock/checks", [r#"{"n": 1}"#])))
        .check("nitpicks", |_artifact: &Value| -> Result<(), Vec<Issue>> {
            Err((0..5_000).map(|i| Issue::new(format!("/{i}"), "nit", format!("nit {i}"))).collect())
        })
        .max_iterations(1)
        .build()
        .unwrap();
    let result = runner.run("go").await.unwrap();
    let issues = &result.history[0].issues;
    assert_eq!(issues.len(), redraft::core::MAX_ISSUES_PER_ATTEMPT + 1);
    assert_eq!(issues[999].message, "nit 999", "the first ones, in order");
    assert_eq!(issues[1000].code, codes::TOO_MANY_ISSUES);
    assert_eq!(issues[1000].found.as_deref(), Some(&json!(4_000)));
}

#[test]
fn a_flag_is_shared_by_its_clones() {
    let flag = CancelFlag::new();
    let seen = flag.clone();
    assert!(!seen.is_cancelled());
    flag.cancel();
    assert!(seen.is_cancelled());
}
