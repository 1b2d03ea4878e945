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

/// What a verifier printed, fed back to the model: it holds a known secret.
const FED_BACK: &str = "sk-providers-fed-back-fedcba9876543210";

/// A conversation holding [`FED_BACK`] everywhere a request carries text.
fn leaky_request() -> ChatRequest {
    let mut request = ChatRequest::new(vec![
        Message::system(format!("system {FED_BACK}")),
        Message::user("Which city?"),
        Message::assistant(format!("{{\"city\": \"{FED_BACK}\"}}")),
        Message::user(format!("verifier saw {FED_BACK}; exit 1")),
    ]);
    let parameters = serde_json::json!({"user": FED_BACK});
    request.parameters = std::sync::Arc::new(parameters.as_object().unwrap().clone());
    request
}

#[tokio::test]
async fn no_request_to_a_model_carries_a_known_secret_and_the_key_still_goes_in_its_header() {
    redraft_core::secrets::register(KEY);
    redraft_core::secrets::register(FED_BACK);
    // OpenAI-compatible: a completion, a pass-through, a streamed pass-through.
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
    provider.complete(&leaky_request()).await.unwrap();
    let forwarded =
        serde_json::json!({"messages": [{"role": "user", "content": format!("see {FED_BACK}")}], FED_BACK: 1});
    provider.forward(forwarded.clone()).await.unwrap().unwrap();
    let streamed = provider.forward_stream(forwarded).await.unwrap();
    assert!(streamed.is_ok(), "{:?}", streamed.err().map(|e| e.to_string()));
    let bodies = server.bodies().await;
    assert_eq!(bodies.len(), 3);
    for body in &bodies {
        assert!(!body.contains(FED_BACK) && !body.contains(KEY), "{body}");
        assert!(body.contains("[redacted]"), "{body}");
        serde_json::from_str::<serde_json::Value>(body).unwrap();
    }
    assert_eq!(server.authorizations().await, vec![format!("Bearer {KEY}"); 3]);

    // Anthropic, and its key header.
    let fake = redraft_testkit::anthropic::FakeAnthropic::start(vec![redraft_testkit::anthropic::reply("{}")]).await;
    let anthropic = redraft_providers::AnthropicProvider::new(redraft_providers::AnthropicConfig {
        name: "anthropic/claude-test".into(),
        model: "claude-test".into(),
        base_url: fake.base_url(),
        api_key: Some(KEY.into()),
        api_key_env: "ANTHROPIC_API_KEY".into(),
        request_timeout: Duration::from_secs(5),
        max_response_bytes: redraft_providers::DEFAULT_MAX_RESPONSE_BYTES,
    })
    .unwrap();
    let mut request = leaky_request();
    request.parameters = Default::default();
    anthropic.complete(&request).await.unwrap();
    let body = fake.bodies().await[0].to_string();
    assert!(!body.contains(FED_BACK) && body.contains("[redacted]"), "{body}");
    assert_eq!(fake.headers("x-api-key").await, vec![Some(KEY.to_owned())]);

    // Ollama.
    let fake = redraft_testkit::ollama::FakeOllama::start(vec![redraft_testkit::ollama::reply("{}")]).await;
    let ollama = redraft_providers::OllamaProvider::new(redraft_providers::OllamaConfig {
        name: "ollama/m".into(),
        model: "m".into(),
        base_url: fake.base_url(),
        request_timeout: Duration::from_secs(5),
        max_response_bytes: redraft_providers::DEFAULT_MAX_RESPONSE_BYTES,
    })
    .unwrap();
    ollama.complete(&request).await.unwrap();
    let body = fake.bodies().await[0].to_string();
    assert!(!body.contains(FED_BACK) && body.contains("[redacted]"), "{body}");
}

#[tokio::test]
async fn a_command_provider_is_never_shown_a_known_secret() {
    redraft_core::secrets::register(FED_BACK);
    let dir = tempfile::tempdir().unwrap();
    // What the program got, each way: stdin, the prompt file, `{prompt}`.
    let agent = redraft_providers::CommandProvider::new(
        "command/a",
        redraft_providers::AgentCommand::Shell(
            "echo STDIN; cat; echo FILE; cat \"$REDRAFT_PROMPT_FILE\"; echo ARG; printf '%s\\n' {prompt}".into(),
        ),
        dir.path().to_owned(),
    );
    let answer = agent.complete(&leaky_request()).await.unwrap();
    assert!(!answer.text.contains(FED_BACK), "{}", answer.text);
    assert_eq!(answer.text.matches("verifier saw [redacted]").count(), 3, "{}", answer.text);
}
