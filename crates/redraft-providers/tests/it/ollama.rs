use std::time::Duration;

use redraft_core::{ChatProvider, ChatRequest, FinishReason, Message, ProviderError, Usage};
use redraft_providers::ollama::base_url_from_host;
use redraft_providers::{OllamaConfig, OllamaProvider};
use serde_json::json;

use redraft_testkit::ollama::{self as fake, FakeOllama};

fn provider_at(base_url: String, timeout: Duration) -> OllamaProvider {
    OllamaProvider::new(OllamaConfig {
        name: "ollama/llama3.2".into(),
        model: "llama3.2".into(),
        base_url,
        request_timeout: timeout,
        max_response_bytes: redraft_providers::DEFAULT_MAX_RESPONSE_BYTES,
    })
    .unwrap()
}

fn provider(fake: &FakeOllama) -> OllamaProvider {
    provider_at(fake.base_url(), Duration::from_secs(5))
}

fn hello() -> ChatRequest {
    ChatRequest::new(vec![Message::user("hello")])
}

#[tokio::test]
async fn a_good_reply_and_the_exact_request() {
    let fake = FakeOllama::start(vec![fake::reply("{\"ok\":true}")]).await;
    let mut request = ChatRequest::new(vec![
        Message::system("You answer in JSON."),
        Message::user("Give me an object."),
        Message::assistant("{oops"),
        Message::user("That was not JSON."),
    ]);
    request.temperature = Some(0.2);
    request.max_tokens = Some(64);

    let response = provider(&fake).complete(&request).await.unwrap();
    assert_eq!(response.text, "{\"ok\":true}");
    assert_eq!(response.usage, Some(Usage { input_tokens: 100, output_tokens: 20 }));
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));

    let bodies = fake.bodies().await;
    assert_eq!(bodies.len(), 1);
    assert_eq!(
        bodies[0],
        json!({
            "model": "llama3.2",
            "messages": [
                {"role": "system", "content": "You answer in JSON."},
                {"role": "user", "content": "Give me an object."},
                {"role": "assistant", "content": "{oops"},
                {"role": "user", "content": "That was not JSON."}
            ],
            "stream": false,
            "options": {"temperature": 0.2, "num_predict": 64}
        })
    );
    assert_eq!(bodies[0]["options"]["temperature"].to_string(), "0.2");
}

#[tokio::test]
async fn ollama_host_without_a_scheme_reaches_the_server() {
    let fake = FakeOllama::start(vec![fake::reply("x")]).await;
    let host = fake.base_url().trim_start_matches("http://").to_owned();
    let response = provider_at(base_url_from_host(&host), Duration::from_secs(5)).complete(&hello()).await.unwrap();
    assert_eq!(response.text, "x");
    assert_eq!(
        fake.bodies().await[0],
        json!({"model": "llama3.2", "messages": [{"role": "user", "content": "hello"}], "stream": false})
    );
}

#[tokio::test]
async fn a_reply_without_counts_has_no_usage_and_a_cut_reply_is_length() {
    let fake = FakeOllama::start(vec![fake::reply_without_counts("a"), fake::truncated("b")]).await;
    let provider = provider(&fake);
    let r = provider.complete(&hello()).await.unwrap();
    assert_eq!((r.text.as_str(), r.usage), ("a", None));
    let r = provider.complete(&hello()).await.unwrap();
    assert_eq!(r.finish_reason, Some(FinishReason::Length));
}

#[tokio::test]
async fn a_missing_model_is_not_transient() {
    let fake = FakeOllama::start(vec![fake::not_found_model()]).await;
    let e = provider(&fake).complete(&hello()).await.unwrap_err();
    match &e {
        ProviderError::Status { status: 404, body, .. } => {
            assert_eq!(body, "model \"llama3.2\" not found, try pulling it first")
        }
        other => panic!("expected 404, got {other:?}"),
    }
    assert!(!e.is_transient());
}

#[tokio::test]
async fn server_errors_and_a_full_queue_are_transient() {
    let fake = FakeOllama::start(vec![fake::status(500), fake::busy()]).await;
    let provider = provider(&fake);
    let e = provider.complete(&hello()).await.unwrap_err();
    assert!(matches!(e, ProviderError::Status { status: 500, .. }), "{e:?}");
    assert!(e.is_transient());
    let e = provider.complete(&hello()).await.unwrap_err();
    assert!(
        matches!(e, ProviderError::Status { status: 503, ref body, .. } if body.starts_with("server busy")),
        "{e:?}"
    );
    assert!(e.is_transient());
}

#[tokio::test]
async fn a_proxy_rate_limit_carries_the_delay() {
    let fake = FakeOllama::start(vec![fake::status(429).insert_header("retry-after", "2")]).await;
    let e = provider(&fake).complete(&hello()).await.unwrap_err();
    assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
    assert!(e.is_transient());
}

#[tokio::test]
async fn malformed_bodies_are_invalid_responses() {
    let fake = FakeOllama::start(vec![fake::malformed()]).await;
    let e = provider(&fake).complete(&hello()).await.unwrap_err();
    assert!(matches!(e, ProviderError::InvalidResponse { .. }), "{e:?}");
    assert!(!e.is_transient());
}

#[tokio::test]
async fn a_call_beyond_the_script_fails_visibly() {
    let fake = FakeOllama::start(vec![]).await;
    let e = provider(&fake).complete(&hello()).await.unwrap_err();
    assert!(
        matches!(e, ProviderError::Status { status: 500, ref body, .. } if body.starts_with("unexpected call")),
        "{e:?}"
    );
    assert_eq!(fake.calls().await, 1);
}

#[tokio::test]
async fn slow_answers_time_out_and_a_stopped_server_says_so() {
    let fake = FakeOllama::start(vec![fake::slow("late", Duration::from_secs(3))]).await;
    let e = provider_at(fake.base_url(), Duration::from_millis(200)).complete(&hello()).await.unwrap_err();
    assert!(matches!(e, ProviderError::Timeout { .. }), "{e:?}");

    let e = provider_at(crate::refused_base_url(), Duration::from_secs(5)).complete(&hello()).await.unwrap_err();
    assert!(matches!(e, ProviderError::Connect { ref message, .. } if message.contains("ollama serve")), "{e:?}");
    assert!(e.is_transient());
}
