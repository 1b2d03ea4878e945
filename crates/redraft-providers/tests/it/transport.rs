//! Every HTTP adapter against broken transports and huge answers, served by the testkit's raw
//! server: the body is read bounded by `max_response_bytes`, and a connection cut while the
//! body is read is a transient failure.

use std::time::Duration;

use redraft_core::{ChatProvider, ChatRequest, Message, ProviderError};
use redraft_providers::{
    AnthropicConfig, AnthropicProvider, OllamaConfig, OllamaProvider, OpenAiConfig, OpenAiProvider,
};
use redraft_testkit::{RawReply, RawServer};
use serde_json::Value;

const FIFTY_MB: usize = 50_000_000;

/// The three HTTP adapters, each with the body of a good answer in its own wire format.
#[derive(Debug, Clone, Copy)]
enum Api {
    OpenAi,
    Anthropic,
    Ollama,
}

const APIS: [Api; 3] = [Api::OpenAi, Api::Anthropic, Api::Ollama];

impl Api {
    fn provider(self, server: &RawServer, max_response_bytes: usize) -> Box<dyn ChatProvider> {
        let request_timeout = Duration::from_secs(10);
        match self {
            Api::OpenAi => Box::new(
                OpenAiProvider::new(OpenAiConfig {
                    name: "openai/fake".into(),
                    model: "fake".into(),
                    base_url: format!("{}/v1", server.uri()),
                    api_key: None,
                    api_key_env: "OPENAI_API_KEY".into(),
                    request_timeout,
                    max_response_bytes,
                    native_response_format: false,
                })
                .unwrap(),
            ),
            Api::Anthropic => Box::new(
                AnthropicProvider::new(AnthropicConfig {
                    name: "anthropic/fake".into(),
                    model: "fake".into(),
                    base_url: server.uri(),
                    api_key: None,
                    api_key_env: "ANTHROPIC_API_KEY".into(),
                    request_timeout,
                    max_response_bytes,
                })
                .unwrap(),
            ),
            Api::Ollama => Box::new(
                OllamaProvider::new(OllamaConfig {
                    name: "ollama/fake".into(),
                    model: "fake".into(),
                    base_url: server.uri(),
                    request_timeout,
                    max_response_bytes,
                })
                .unwrap(),
            ),
        }
    }

    fn answer(self, text: &str) -> Value {
        match self {
            Api::OpenAi => redraft_testkit::completion(text),
            Api::Anthropic => redraft_testkit::anthropic::message_body(text),
            Api::Ollama => redraft_testkit::ollama::chat_body(text),
        }
    }

    fn answer_bytes(self, text: &str) -> Vec<u8> {
        self.answer(text).to_string().into_bytes()
    }
}

fn hello() -> ChatRequest {
    ChatRequest::new(vec![Message::user("hello")])
}

const LIMIT: usize = redraft_providers::DEFAULT_MAX_RESPONSE_BYTES;

fn assert_too_large(api: Api, e: &ProviderError, limit: usize) {
    assert!(matches!(e, ProviderError::ResponseTooLarge { limit: l, .. } if *l == limit), "{api:?}: {e:?}");
    assert!(!e.is_transient(), "{api:?}: the same request would get the same answer");
    let shown = e.to_string();
    assert!(shown.contains("max_response_bytes") && shown.contains(&limit.to_string()), "{shown}");
}

#[tokio::test]
async fn a_fifty_megabyte_answer_is_refused_at_the_limit_whether_announced_or_streamed() {
    for api in APIS {
        for announce in [true, false] {
            let huge = RawReply::huge_json(&api.answer("@@FILL@@"), FIFTY_MB, announce);
            let server = RawServer::start(vec![huge]).await.unwrap();
            let e = api.provider(&server, LIMIT).complete(&hello()).await.unwrap_err();
            assert_too_large(api, &e, LIMIT);
            assert_eq!(server.calls(), 1, "{api:?}");
        }
    }
}

#[tokio::test]
async fn an_answer_up_to_the_limit_is_read_and_one_byte_more_is_not() {
    for api in APIS {
        let text = "y".repeat(1000);
        let exact = api.answer_bytes(&text).len();
        for announce in [true, false] {
            let fits = RawReply::huge_json(&api.answer("@@FILL@@"), 1000, announce);
            let server = RawServer::start(vec![fits.clone(), fits]).await.unwrap();
            let answer = api.provider(&server, exact).complete(&hello()).await.unwrap();
            assert_eq!(answer.text, "x".repeat(1000), "{api:?}");
            let e = api.provider(&server, exact - 1).complete(&hello()).await.unwrap_err();
            assert_too_large(api, &e, exact - 1);
        }
    }
}

#[tokio::test]
async fn a_huge_error_body_is_still_its_status() {
    for api in APIS {
        let body = format!("{{\"error\": \"{}\"}}", "e".repeat(2_000_000)).into_bytes();
        let server = RawServer::start(vec![RawReply::Full { status: 503, headers: Vec::new(), body }]).await.unwrap();
        let e = api.provider(&server, 1000).complete(&hello()).await.unwrap_err();
        assert!(matches!(e, ProviderError::Status { status: 503, .. }), "{api:?}: {e:?}");
        assert!(e.is_transient());
    }
}

#[tokio::test]
async fn a_connection_cut_while_the_answer_is_read_is_transient() {
    for api in APIS {
        let body = api.answer_bytes(r#"{"city": "Toledo"}"#);
        let half = body.len() / 2;
        for (fault, reply) in [
            ("reset in the middle of the body", RawReply::ResetMidBody { body: body.clone(), sent: half }),
            ("closed before Content-Length", RawReply::ShortBody { body: body.clone(), sent: half }),
            ("close-delimited, cut in the JSON", RawReply::CloseDelimited { body: body.clone(), sent: half }),
        ] {
            let server = RawServer::start(vec![reply]).await.unwrap();
            let e = api.provider(&server, LIMIT).complete(&hello()).await.unwrap_err();
            assert!(matches!(e, ProviderError::Cut { .. }), "{api:?}, {fault}: {e:?}");
            assert!(e.is_transient(), "{api:?}, {fault}");
            assert!(e.to_string().contains("was cut off"), "{e}");
        }
    }
}

#[tokio::test]
async fn a_whole_close_delimited_answer_is_read_and_a_non_json_one_is_not_transient() {
    for api in APIS {
        let body = api.answer_bytes("fine");
        let server = RawServer::start(vec![RawReply::CloseDelimited { sent: body.len(), body }]).await.unwrap();
        assert_eq!(api.provider(&server, LIMIT).complete(&hello()).await.unwrap().text, "fine", "{api:?}");

        let html = b"<html>bad gateway</html>".to_vec();
        let server = RawServer::start(vec![RawReply::CloseDelimited { sent: html.len(), body: html }]).await.unwrap();
        let e = api.provider(&server, LIMIT).complete(&hello()).await.unwrap_err();
        assert!(matches!(e, ProviderError::InvalidResponse { .. }), "{api:?}: {e:?}");
        assert!(!e.is_transient());
    }
}

/// How reqwest itself reports each fault while a body is read (pinned, so that an upgrade that
/// changes it is noticed): a reset and a body shorter than its `Content-Length` are decode
/// errors — neither `is_body` nor `is_request` — and a close-delimited body cut short is no
/// error at all, only JSON that ends early.
#[tokio::test]
async fn reqwest_reports_cut_bodies_as_decode_errors() {
    let body = redraft_testkit::completion("{}").to_string().into_bytes();
    let half = body.len() / 2;
    for (reply, cause) in [
        (RawReply::ResetMidBody { body: body.clone(), sent: half }, "Connection reset by peer"),
        (RawReply::ShortBody { body: body.clone(), sent: half }, "end of file before message length reached"),
    ] {
        let server = RawServer::start(vec![reply]).await.unwrap();
        let mut response = reqwest::Client::new().post(server.uri()).body("{}").send().await.unwrap();
        let e = loop {
            match response.chunk().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("the body ended without an error"),
                Err(e) => break e,
            }
        };
        assert!(e.is_decode() && !e.is_body() && !e.is_request() && !e.is_connect() && !e.is_timeout(), "{e:?}");
        let mut root: &dyn std::error::Error = &e;
        while let Some(next) = root.source() {
            root = next;
        }
        assert!(root.to_string().contains(cause), "{root}");
    }
    let server = RawServer::start(vec![RawReply::CloseDelimited { body: body.clone(), sent: half }]).await.unwrap();
    let response = reqwest::Client::new().post(server.uri()).body("{}").send().await.unwrap();
    assert_eq!(response.bytes().await.unwrap().len(), half);
}

#[tokio::test]
async fn a_command_whose_stdout_passes_the_limit_is_refused() {
    use redraft_providers::{AgentCommand, CommandProvider};
    let dir = tempfile::tempdir().unwrap();
    let agent = |bytes: usize, limit: usize| {
        let script = format!("head -c {bytes} /dev/zero | tr '\\000' x");
        CommandProvider::new("command/big", AgentCommand::Shell(script), dir.path()).max_response_bytes(limit)
    };
    assert_eq!(agent(1000, 1000).complete(&hello()).await.unwrap().text.len(), 1000);
    let e = agent(1001, 1000).complete(&hello()).await.unwrap_err();
    assert!(matches!(e, ProviderError::ResponseTooLarge { limit: 1000, .. }), "{e:?}");
    assert!(!e.is_transient());
    // Past the output capture's own cap, what was kept is not the whole answer either.
    let capture = redraft_sandbox::DEFAULT_OUTPUT_CAP;
    let e = agent(capture + 10, LIMIT).complete(&hello()).await.unwrap_err();
    assert!(matches!(e, ProviderError::ResponseTooLarge { limit, .. } if limit <= capture), "{e:?}");
    // An agent that edits a workspace is judged by the verifier; its stdout is only a log.
    let log = agent(5000, 1000).require_success(false).complete(&hello()).await.unwrap();
    assert_eq!(log.text.len(), 5000);
}
