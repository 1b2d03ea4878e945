//! Timeouts, backoff, wall time and cancellation under tokio's paused clock: no real sleeps.

use std::sync::Arc;
use std::time::Duration;

use redraft::providers::{MockProvider, MockReply};
use redraft::{AttemptStatus, CancellationToken, HaltReason, Policy, Runner, Task};
use serde_json::json;
use tokio::time::Instant;

fn text(t: &str) -> MockReply {
    MockReply::Text(t.into())
}

fn error(status: u16, retry_after: Option<f64>) -> MockReply {
    serde_json::from_value(json!({"error": {"status": status, "retry_after": retry_after}})).unwrap()
}

fn slow(t: &str, ms: u64) -> MockReply {
    MockReply::Answer { text: t.into(), usage: None, finish_reason: None, delay_ms: ms }
}

fn runner(replies: Vec<MockReply>, policy: Policy) -> (Runner, Arc<MockProvider>) {
    let provider = Arc::new(MockProvider::new("mock/paused", replies));
    let runner = Runner::builder()
        .provider(provider.clone())
        .schema(json!({"type": "object", "required": ["ok"]}))
        .policy(policy)
        .build()
        .unwrap();
    (runner, provider)
}

#[tokio::test(start_paused = true)]
async fn backoff_is_exponential_and_not_an_attempt() {
    let (runner, provider) = runner(vec![error(500, None), error(502, None), text(r#"{"ok": 1}"#)], Policy::default());
    let t0 = Instant::now();
    let result = runner.run("go").await.unwrap();
    let waited = t0.elapsed();
    assert_eq!(result.halted_because, HaltReason::Success);
    assert_eq!(result.iterations, 1);
    assert_eq!(provider.calls().len(), 3);
    // 500 ms then 1000 ms, each scaled by jitter into [50 %, 100 %].
    assert!(waited >= Duration::from_millis(750) && waited <= Duration::from_millis(1500), "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured() {
    let (runner, _) = runner(vec![error(429, Some(7.0)), text(r#"{"ok": 1}"#)], Policy::default());
    let t0 = Instant::now();
    let result = runner.run("go").await.unwrap();
    assert_eq!(result.iterations, 1);
    assert!(t0.elapsed() >= Duration::from_secs(7), "{:?}", t0.elapsed());
    assert!(t0.elapsed() < Duration::from_secs(8));
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_times_out_as_an_error_and_the_loop_goes_on() {
    let policy = Policy { attempt_timeout: Duration::from_secs(5), ..Policy::default() };
    let (runner, _) = runner(vec![slow(r#"{"ok": 1}"#, 60_000), text(r#"{"ok": 2}"#)], policy);
    let result = runner.run("go").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::Success);
    assert_eq!(result.history[0].status, AttemptStatus::Error);
    assert_eq!(result.history[0].issues[0].code, "timeout");
    assert!(result.history[0].wall_ms >= 5000);
    assert_eq!(result.artifact, Some(json!({"ok": 2})));
}

#[tokio::test(start_paused = true)]
async fn wall_time_cancels_the_attempt_in_flight() {
    let policy = Policy { max_wall_time: Some(Duration::from_secs(30)), ..Policy::default() };
    let (runner, _) = runner(vec![text(r#"{"nope": 1}"#), MockReply::Hang { hang: true }], policy);
    let t0 = Instant::now();
    let result = runner.run("go").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::WallTime);
    assert_eq!(result.iterations, 2);
    assert_eq!(result.history[1].issues[0].code, "wall_time");
    assert_eq!(result.artifact, Some(json!({"nope": 1})), "best so far is returned");
    let elapsed = t0.elapsed();
    assert!(elapsed >= Duration::from_secs(30) && elapsed < Duration::from_secs(31), "{elapsed:?}");
}

#[tokio::test(start_paused = true)]
async fn cancelling_stops_the_run_with_cancelled() {
    let (runner, _) = runner(vec![MockReply::Hang { hang: true }], Policy::default());
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        trigger.cancel();
    });
    let result = runner.run_until_cancelled(Task::new("go"), cancel).await.unwrap();
    assert_eq!(result.halted_because, HaltReason::Cancelled);
    assert_eq!(result.history[0].issues[0].code, "cancelled");
    assert!(result.escalation.is_some());
}

#[tokio::test(start_paused = true)]
async fn an_exhausted_script_is_a_provider_error_not_a_panic() {
    let (runner, _) = runner(vec![text(r#"{"nope": 1}"#)], Policy::default());
    let result = runner.run("go").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::ProviderError);
    assert!(result.error.unwrap().message.contains("no reply left"));
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_longer_than_the_attempt_timeout_is_waited_for_and_costs_no_attempt() {
    let policy = Policy { attempt_timeout: Duration::from_secs(5), ..Policy::default() };
    let (runner, provider) = runner(vec![error(429, Some(10.0)), text(r#"{"ok": 1}"#)], policy);
    let t0 = Instant::now();
    let result = runner.run("go").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::Success);
    assert_eq!(result.iterations, 1, "waiting is not an attempt, and not a timeout: {:?}", result.history);
    assert_eq!(provider.calls().len(), 2);
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_secs(10) && waited < Duration::from_secs(11), "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn a_long_retry_after_is_waited_for_within_the_wall_time() {
    let policy = Policy {
        attempt_timeout: Duration::from_secs(5),
        max_wall_time: Some(Duration::from_secs(300)),
        ..Policy::default()
    };
    // Longer than the retry policy's longest backoff (30 s), shorter than the wall time.
    let (runner, provider) = runner(vec![error(429, Some(120.0)), text(r#"{"ok": 1}"#)], policy);
    let t0 = Instant::now();
    let result = runner.run("go").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::Success, "{:?}", result.error);
    assert_eq!(result.iterations, 1);
    assert_eq!(provider.calls().len(), 2);
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_secs(120) && waited < Duration::from_secs(121), "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn backoff_does_not_count_against_the_attempt_timeout() {
    let policy = Policy { attempt_timeout: Duration::from_secs(1), ..Policy::default() };
    let provider =
        Arc::new(MockProvider::new("mock/paused", vec![error(500, None), error(503, None), text(r#"{"ok": 1}"#)]));
    let runner = Runner::builder()
        .provider(provider.clone())
        .schema(json!({"type": "object", "required": ["ok"]}))
        .policy(policy)
        // Backoff of 1-2 s, then 2-4 s: each longer than the whole attempt timeout.
        .retry(redraft::core::RetryPolicy { base_delay: Duration::from_secs(2), ..Default::default() })
        .build()
        .unwrap();
    let result = runner.run("go").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::Success, "{:?}", result.history);
    assert_eq!(result.iterations, 1);
    assert_eq!(provider.calls().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn the_attempt_timeout_still_bounds_the_calls_together() {
    let policy = Policy { attempt_timeout: Duration::from_secs(5), ..Policy::default() };
    // A failure after 3 s, then an answer after 3 s more: 6 s of calls in an attempt of 5 s.
    let provider = Arc::new(MockProvider::new(
        "mock/paused",
        vec![slow_error(3000), slow(r#"{"ok": 1}"#, 3000), text(r#"{"ok": 2}"#)],
    ));
    let runner = Runner::builder()
        .provider(provider.clone())
        .schema(json!({"type": "object", "required": ["ok"]}))
        .policy(policy)
        .build()
        .unwrap();
    let result = runner.run("go").await.unwrap();
    assert_eq!(result.history[0].issues[0].code, "timeout");
    assert!(result.history[0].wall_ms >= 5000, "{}", result.history[0].wall_ms);
    assert_eq!(result.artifact, Some(json!({"ok": 2})));
}

/// A server error that arrives after `ms`.
fn slow_error(ms: u64) -> MockReply {
    serde_json::from_value(json!({"error": {"status": 500, "delay_ms": ms}})).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_past_the_wall_time_halts_with_provider_error_naming_the_wait() {
    let policy = Policy { max_wall_time: Some(Duration::from_secs(90)), ..Policy::default() };
    let (runner, provider) = runner(vec![slow(r#"{"nope": 1}"#, 5000), error(429, Some(600.0))], policy);
    let t0 = Instant::now();
    let result = runner.run("go").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::ProviderError);
    assert_eq!(result.iterations, 1, "the refused wait is not an attempt");
    assert_eq!(provider.calls().len(), 2);
    assert!(t0.elapsed() < Duration::from_secs(6), "nothing was waited for: {:?}", t0.elapsed());
    let error = result.error.unwrap();
    assert_eq!(error.code, "provider_error");
    assert!(
        error.message.contains("asked to wait 600s (Retry-After), more than the 85s left of `max_wall_time`"),
        "{}",
        error.message
    );
    assert!(error.message.contains("hint: "), "{}", error.message);
}

#[tokio::test(start_paused = true)]
async fn without_a_wall_time_a_retry_after_past_the_longest_wait_halts_naming_it() {
    let (runner, provider) = runner(vec![error(429, Some(600.0))], Policy::default());
    let result = runner.run("go").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::ProviderError);
    assert_eq!(result.iterations, 0);
    assert_eq!(provider.calls().len(), 1);
    let message = result.error.unwrap().message;
    assert!(message.contains("asked to wait 600s (Retry-After)") && message.contains("(30s)"), "{message}");
    assert!(message.contains("max_wall_time"), "{message}");
}
