use std::time::Duration;

use redraft_core::{ChatProvider, ChatRequest, FinishReason, Message, ProviderError, Usage};
use redraft_providers::{AnthropicConfig, AnthropicProvider};
use serde_json::json;

use redraft_testkit::anthropic::{self as fake, FakeAnthropic};

fn provider_at(base_url: String, timeout: Duration) -> AnthropicProvider {
    AnthropicProvider::new(AnthropicConfig {
        name: "anthropic/claude-test".into(),
        model: "claude-test".into(),
        base_url,
        api_key: Some("sk-ant-test".into()),
        api_key_env: "ANTHROPIC_API_KEY".into(),
        request_timeout: timeout,
        max_response_bytes: redraft_providers::DEFAULT_MAX_RESPONSE_BYTES,
    })
    .unwrap()
}

fn provider(fake: &FakeAnthropic) -> AnthropicProvider {
    provider_at(fake.base_url(), Duration::from_secs(5))
}

fn hello() -> ChatRequest {
    ChatRequest::new(vec![Message::user("hello")])
}

#[tokio::test]
async fn a_good_reply_and_the_exact_request() {
    let fake = FakeAnthropic::start(vec![fake::reply("{\"ok\":true}")]).await;
    let mut request = ChatRequest::new(vec![
        Message::system("You answer in JSON."),
        Message::user("Give me an object."),
        Message::assistant("{oops"),
        Message::user("That was not JSON."),
        Message::user("Try again."),
    ]);
    request.temperature = Some(0.2);
    request.max_tokens = Some(1000);

    let response = provider(&fake).complete(&request).await.unwrap();
    assert_eq!(response.text, "{\"ok\":true}");
    assert_eq!(response.usage, Some(Usage { input_tokens: 100, output_tokens: 20 }));
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));

    let bodies = fake.bodies().await;
    assert_eq!(bodies.len(), 1);
    assert_eq!(
        bodies[0],
        json!({
            "model": "claude-test",
            "max_tokens": 1000,
            "system": "You answer in JSON.",
            "messages": [
                {"role": "user", "content": "Give me an object."},
                {"role": "assistant", "content": "{oops"},
                {"role": "user", "content": "That was not JSON.\n\nTry again."}
            ],
            "temperature": 0.2
        })
    );
    assert_eq!(bodies[0]["temperature"].to_string(), "0.2");
    assert_eq!(fake.headers("x-api-key").await, [Some("sk-ant-test".to_owned())]);
    assert_eq!(fake.headers("anthropic-version").await, [Some("2023-06-01".to_owned())]);
    assert_eq!(fake.headers("content-type").await, [Some("application/json".to_owned())]);
}

#[tokio::test]
async fn max_tokens_defaults_and_a_missing_key_sends_no_header() {
    let fake = FakeAnthropic::start(vec![fake::reply("x")]).await;
    let provider = AnthropicProvider::new(AnthropicConfig {
        name: "anthropic/claude-test".into(),
        model: "claude-test".into(),
        base_url: format!("{}/", fake.base_url()),
        api_key: None,
        api_key_env: "ANTHROPIC_API_KEY".into(),
        request_timeout: Duration::from_secs(5),
        max_response_bytes: redraft_providers::DEFAULT_MAX_RESPONSE_BYTES,
    })
    .unwrap();
    provider.complete(&hello()).await.unwrap();
    assert_eq!(
        fake.bodies().await[0],
        json!({"model": "claude-test", "max_tokens": 4096, "messages": [{"role": "user", "content": "hello"}]})
    );
    assert_eq!(fake.headers("x-api-key").await, [None]);
}

#[tokio::test]
async fn a_reply_without_usage_has_none_and_a_cut_reply_is_length() {
    let fake = FakeAnthropic::start(vec![fake::reply_without_usage("a"), fake::truncated("b")]).await;
    let provider = provider(&fake);
    let r = provider.complete(&hello()).await.unwrap();
    assert_eq!((r.text.as_str(), r.usage), ("a", None));
    let r = provider.complete(&hello()).await.unwrap();
    assert_eq!(r.finish_reason, Some(FinishReason::Length));
}

#[tokio::test]
async fn rate_limits_carry_the_delay() {
    let fake = FakeAnthropic::start(vec![fake::rate_limited(3)]).await;
    let e = provider(&fake).complete(&hello()).await.unwrap_err();
    assert!(matches!(e, ProviderError::RateLimited { .. }), "{e:?}");
    assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
    assert!(e.is_transient());
}

#[tokio::test]
async fn overloaded_and_server_errors_are_transient() {
    let fake = FakeAnthropic::start(vec![fake::overloaded(), fake::status(500)]).await;
    let provider = provider(&fake);
    let e = provider.complete(&hello()).await.unwrap_err();
    match &e {
        ProviderError::Status { status: 529, body, .. } => assert_eq!(body, "overloaded_error: Overloaded"),
        other => panic!("expected 529, got {other:?}"),
    }
    assert!(e.is_transient());
    let e = provider.complete(&hello()).await.unwrap_err();
    assert!(matches!(e, ProviderError::Status { status: 500, .. }), "{e:?}");
    assert!(e.is_transient());
}

#[tokio::test]
async fn bad_requests_are_not_transient() {
    let fake = FakeAnthropic::start(vec![fake::status(400)]).await;
    let e = provider(&fake).complete(&hello()).await.unwrap_err();
    match &e {
        ProviderError::Status { status: 400, body, .. } => assert_eq!(body, "invalid_request_error: scripted 400"),
        other => panic!("expected 400, got {other:?}"),
    }
    assert!(!e.is_transient());
}

#[tokio::test]
async fn refused_credentials_name_the_key_variable() {
    let fake = FakeAnthropic::start(vec![fake::status(401)]).await;
    let e = provider(&fake).complete(&hello()).await.unwrap_err();
    assert!(
        matches!(e, ProviderError::Unauthorized { status: 401, ref key_env, .. } if key_env == "ANTHROPIC_API_KEY"),
        "{e:?}"
    );
    assert!(!e.is_transient());
    let shown = e.to_string();
    assert!(shown.contains("ANTHROPIC_API_KEY") && !shown.contains("sk-ant-test"), "{shown}");
}

#[tokio::test]
async fn malformed_bodies_are_invalid_responses() {
    let fake = FakeAnthropic::start(vec![fake::malformed()]).await;
    let e = provider(&fake).complete(&hello()).await.unwrap_err();
    assert!(matches!(e, ProviderError::InvalidResponse { ref message, .. } if message.contains("not JSON")), "{e:?}");
    assert!(!e.is_transient());
}

#[tokio::test]
async fn a_call_beyond_the_script_fails_visibly() {
    let fake = FakeAnthropic::start(vec![]).await;
    let e = provider(&fake).complete(&hello()).await.unwrap_err();
    assert!(e.to_string().contains("unexpected call"), "{e}");
    assert_eq!(fake.calls().await, 1);
}

#[tokio::test]
async fn slow_answers_time_out_and_refused_connections_are_transient() {
    let fake = FakeAnthropic::start(vec![fake::slow("late", Duration::from_secs(3))]).await;
    let e = provider_at(fake.base_url(), Duration::from_millis(200)).complete(&hello()).await.unwrap_err();
    assert!(matches!(e, ProviderError::Timeout { .. }), "{e:?}");
    assert!(e.is_transient());

    let e = provider_at(crate::refused_base_url(), Duration::from_secs(5)).complete(&hello()).await.unwrap_err();
    assert!(matches!(e, ProviderError::Connect { .. }), "{e:?}");
    assert!(e.is_transient());
}

#[tokio::test]
async fn a_conversation_without_a_user_message_is_refused_before_sending() {
    let fake = FakeAnthropic::start(vec![]).await;
    let request = ChatRequest::new(vec![Message::system("s"), Message::assistant("a")]);
    let e = provider(&fake).complete(&request).await.unwrap_err();
    assert!(matches!(e, ProviderError::Failed { .. }), "{e:?}");
    assert!(e.to_string().starts_with("anthropic/claude-test: "), "{e}");
    assert_eq!(fake.calls().await, 0);
}
