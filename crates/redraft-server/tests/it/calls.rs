//! One call to a model outside a run — `/v1/chat` and the proxy's pass-through — goes through
//! the runner: a transient failure is retried as in a run, and the call holds one of the
//! server's slots while it lasts.

use std::time::Duration;

use redraft_testkit::processes::eventually_async;
use redraft_testkit::{reply, slow, status};
use serde_json::json;

use crate::{harness, harness_with};

fn passed_through(stream: bool) -> serde_json::Value {
    json!({"model": "fake/m", "stream": stream, "messages": [{"role": "user", "content": "Say hello."}]})
}

#[tokio::test]
async fn a_passed_through_call_is_retried_after_a_transient_failure() {
    let h = harness(vec![status(503), reply("hello")]).await;
    let a = h.call("POST", "/v1/chat/completions", Some(passed_through(false))).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json["choices"][0]["message"]["content"], "hello");
    assert_eq!(h.model.calls().await, 2, "the 503 was retried once");
}

#[tokio::test]
async fn a_streamed_pass_through_retries_opening_the_stream() {
    let h = harness(vec![status(502), reply("hello")]).await;
    let a = h.call("POST", "/v1/chat/completions", Some(passed_through(true))).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert!(a.text.contains("hello") && a.text.contains("[DONE]"), "{}", a.text);
    assert_eq!(h.model.calls().await, 2);
}

#[tokio::test]
async fn a_chat_call_is_retried_and_gives_up_after_the_policys_retries() {
    let h = harness(vec![status(500), reply("hi")]).await;
    let a = h.call("POST", "/v1/chat", Some(json!({"prompt": "Say hi."}))).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json["text"], "hi");
    assert_eq!(a.json["model"], "fake/m");
    assert_eq!(h.model.calls().await, 2);

    // A backend that keeps failing: one call, then `transport_retries` more, then a 502.
    let h = harness_with(vec![status(500)], Vec::new(), |c| c.policy.transport_retries = 2).await;
    let a = h.call("POST", "/v1/chat", Some(json!({"prompt": "Say hi."}))).await;
    assert_eq!(a.status, 502, "{}", a.text);
    assert_eq!(a.json["error"]["code"], "provider_error", "{}", a.text);
    assert_eq!(h.model.calls().await, 3);
}

#[tokio::test]
async fn a_call_holds_a_slot_and_one_that_finds_none_free_is_told_to_come_back() {
    let h = harness_with(vec![slow("slow", Duration::from_millis(1500)), reply("hi")], Vec::new(), |c| {
        c.server.max_concurrent_runs = 1;
        c.queue.max_wait = Duration::from_millis(200);
    })
    .await;
    let body = || Some(json!({"prompt": "Say hi."}));
    let (first, second) = tokio::join!(h.call("POST", "/v1/chat", body()), async {
        // The second comes once the first holds the only slot (its call reached the backend).
        let reached = eventually_async(Duration::from_secs(10), || async { h.model.calls().await == 1 }).await;
        assert!(reached, "the first call never reached the backend");
        h.call("POST", "/v1/chat", body()).await
    });
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(second.status, 503, "{}", second.text);
    assert!(second.header("retry-after").is_some(), "{:?}", second.headers);
    assert_eq!(h.model.calls().await, 1, "the refused call never reached the model");

    // With the slot free again, a call goes through.
    let third = h.call("POST", "/v1/chat", body()).await;
    assert_eq!(third.status, 200, "{}", third.text);
}

#[tokio::test]
async fn calls_wait_their_turn_for_a_slot_within_max_wait() {
    let replies = vec![slow("one", Duration::from_millis(300)), slow("two", Duration::from_millis(300))];
    let h = harness_with(replies, Vec::new(), |c| {
        c.server.max_concurrent_runs = 1;
        c.queue.max_wait = Duration::from_secs(30);
    })
    .await;
    let body = || Some(json!({"prompt": "Say hi."}));
    let started = std::time::Instant::now();
    let (a, b) = tokio::join!(h.call("POST", "/v1/chat", body()), h.call("POST", "/v1/chat", body()));
    assert_eq!((a.status, b.status), (200, 200), "{} / {}", a.text, b.text);
    // One after the other: the backend's 300 ms twice.
    assert!(started.elapsed() >= Duration::from_millis(600), "{:?}", started.elapsed());
}
