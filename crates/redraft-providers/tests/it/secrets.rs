//! A provider's key never comes back in its errors: a server whose error repeats the request's
//! `Authorization` header gives an error that holds `[redacted]` where the key was.

use std::time::Duration;

use redraft_core::{ChatProvider, ChatRequest, Message, ProviderError};
use redraft_providers::{OpenAiConfig, OpenAiProvider};
use redraft_testkit::EchoingOpenAi;

const KEY: &str = "sk-providers-test-0123456789abcdef";

#[tokio::test]
async fn an_error_body_repeating_the_key_is_redacted() {
    let server = EchoingOpenAi::start().await;
    let provider = OpenAiProvider::new(OpenAiConfig {
        name: "openai/echo".into(),
        model: "echo".into(),
        base_url: server.base_url(),
        api_key: Some(KEY.into()),
        api_key_env: "ECHO_API_KEY".into(),
        request_timeout: Duration::from_secs(10),
        max_response_bytes: redraft_providers::DEFAULT_MAX_RESPONSE_BYTES,
        native_response_format: false,
    })
    .unwrap();
    assert!(!format!("{provider:?}").contains(KEY), "the provider's Debug shows its key");
    for code in [400, 500] {
        let request = ChatRequest::new(vec![Message::user(format!("status {code}"))]);
        let err = provider.complete(&request).await.unwrap_err();
        let ProviderError::Status { status, body, .. } = &err else { panic!("{err}") };
        assert_eq!(*status, code);
        assert!(body.contains("Bearer [redacted]"), "{body}");
        for text in [err.to_string(), format!("{err:?}")] {
            assert!(!text.contains(KEY), "{text}");
        }
    }
    // The key was sent: it is only ever kept out of what comes back.
    assert_eq!(server.authorizations().await, vec![format!("Bearer {KEY}"); 2]);
}
