//! Huge answers and broken transports, through the whole runner: an answer past
//! `max_response_bytes` is a failed attempt that is neither retried nor sent back; a connection
//! cut while an answer is read is retried like any transport failure and costs no attempt.

use std::path::Path;
use std::time::Duration;

use redraft::core::RetryPolicy;
use redraft::{AttemptStatus, Config, HaltReason, Model, Runner};
use redraft_testkit::{RawReply, RawServer, completion};
use serde_json::{Value, json};

const FIFTY_MB: usize = 50_000_000;

/// `fake/m`: an OpenAI-compatible provider at `server`, configured as users configure one,
/// with `extra` lines in its `[providers.fake]` table.
fn model(server: &RawServer, extra: &str) -> Model {
    let text = format!("[providers.fake]\ntype = \"openai\"\nbase_url = \"{}/v1\"\n{extra}\n", server.uri());
    Config::parse(&text, Path::new("redraft.toml")).unwrap().model("fake/m").unwrap()
}

fn runner(model: &Model) -> Runner {
    Runner::builder()
        .model(model)
        .schema(json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}))
        .retry(RetryPolicy { base_delay: Duration::from_millis(1), ..RetryPolicy::default() })
        .build()
        .unwrap()
}

fn good() -> RawReply {
    RawReply::json(&completion(r#"{"city": "Toledo"}"#))
}

#[tokio::test]
async fn a_fifty_megabyte_answer_is_a_failed_attempt_and_is_not_sent_back() {
    let huge = RawReply::huge_json(&completion("{\"city\": \"@@FILL@@\"}"), FIFTY_MB, false);
    let server = RawServer::start(vec![huge, good()]).await.unwrap();
    let result = runner(&model(&server, "")).run("Where is contract C-7?").await.unwrap();

    assert_eq!(result.halted_because, HaltReason::Success);
    assert_eq!(result.iterations, 2, "the huge answer used up an attempt, and only one");
    let first = &result.history[0];
    assert_eq!(first.status, AttemptStatus::Error);
    assert_eq!(first.raw, "", "nothing of it is kept");
    assert_eq!(first.issues.len(), 1);
    assert_eq!(first.issues[0].code, "response_too_large");
    let message = &first.issues[0].message;
    assert!(message.contains("4194304") && message.contains("max_response_bytes"), "{message}");
    assert_eq!(result.artifact, Some(json!({"city": "Toledo"})));

    // Reading stopped at the limit: the fake could not push more than the socket buffers hold.
    assert!(server.streamed_bytes() < FIFTY_MB / 2, "{} bytes were taken", server.streamed_bytes());
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "not retried as a transport failure");
    let (asked, again) = (requests[0].body.len(), requests[1].body.len());
    // The second request is the first plus the feedback, whose echo is bounded by
    // `feedback_max_chars` (4000): nothing of the 50 MB answer goes back upstream.
    assert!(again < asked + 4000, "the second request is {again} bytes, the first {asked}");
    let feedback = redraft_testkit::last_user_message(&requests[1].json());
    assert!(feedback.contains("[response_too_large]"), "{feedback}");
    let roles: Vec<Value> =
        requests[1].json()["messages"].as_array().unwrap().iter().map(|m| m["role"].clone()).collect();
    assert_eq!(roles, ["user", "user"], "no assistant message stands for an answer that was not kept");
}

#[tokio::test]
async fn max_response_bytes_is_read_from_the_provider_table() {
    let long = RawReply::json(&completion(&format!("{{\"city\": \"{}\"}}", "T".repeat(3000))));
    let server = RawServer::start(vec![long, good()]).await.unwrap();
    let result = runner(&model(&server, "max_response_bytes = 2000")).run("Where?").await.unwrap();
    assert_eq!(result.history[0].issues[0].code, "response_too_large");
    assert!(result.history[0].issues[0].message.contains("2000 bytes"), "{}", result.history[0].issues[0].message);
    assert_eq!(result.history[1].status, AttemptStatus::Accepted);
}

#[tokio::test]
async fn a_connection_cut_while_the_answer_is_read_is_retried_and_costs_no_attempt() {
    let body = completion(r#"{"city": "Toledo"}"#).to_string().into_bytes();
    let half = body.len() / 2;
    for (fault, cut) in [
        ("reset in the middle of the body", RawReply::ResetMidBody { body: body.clone(), sent: half }),
        ("closed before Content-Length", RawReply::ShortBody { body: body.clone(), sent: half }),
        ("close-delimited, cut in the JSON", RawReply::CloseDelimited { body: body.clone(), sent: half }),
    ] {
        let server = RawServer::start(vec![cut, good()]).await.unwrap();
        let result = runner(&model(&server, "")).run("Where?").await.unwrap();
        assert_eq!(result.halted_because, HaltReason::Success, "{fault}: {:?}", result.error);
        assert_eq!(result.iterations, 1, "{fault}: a retry is not an attempt");
        assert_eq!(server.calls(), 2, "{fault}");
    }
}

#[tokio::test]
async fn cuts_that_persist_halt_with_provider_error_after_the_retries() {
    let body = completion(r#"{"city": "Toledo"}"#).to_string().into_bytes();
    let cut = RawReply::ShortBody { sent: body.len() / 2, body };
    let server = RawServer::start(vec![cut.clone(), cut.clone(), cut]).await.unwrap();
    let result = runner(&model(&server, "")).run("Where?").await.unwrap();
    assert_eq!(result.halted_because, HaltReason::ProviderError);
    assert_eq!(result.iterations, 0);
    assert_eq!(server.calls(), 3, "one call and `transport_retries` (2) retries");
    let error = result.error.unwrap();
    assert!(error.message.contains("was cut off") && error.message.contains("end of file"), "{}", error.message);
}

#[tokio::test]
async fn a_long_answer_kept_in_the_conversation_is_cut_like_every_echo() {
    let long = format!("Here is what I found: {}", "Toledo is in Ohio. ".repeat(10_000));
    let server = RawServer::start(vec![RawReply::json(&completion(&long)), good()]).await.unwrap();
    let runner = Runner::builder()
        .model(&model(&server, ""))
        .schema(json!({"type": "object", "required": ["city"]}))
        .feedback_max_chars(1000)
        .build()
        .unwrap();
    let result = runner.run("Where?").await.unwrap();
    assert_eq!(result.history[0].status, AttemptStatus::InvalidJson);
    assert_eq!(result.history[0].raw, long, "the history keeps the answer verbatim");

    let second = server.requests()[1].json();
    let messages = second["messages"].as_array().unwrap();
    let kept = messages.iter().find(|m| m["role"] == "assistant").unwrap()["content"].as_str().unwrap();
    let chars = long.chars().count();
    let marker = format!("[truncated: showing the first 1000 of {chars} characters]");
    assert_eq!(kept, format!("{}\n{marker}", long.chars().take(1000).collect::<String>()));
    let feedback = redraft_testkit::last_user_message(&second);
    assert!(feedback.contains(&marker), "the feedback's echo uses the same marker: {feedback}");
    assert!(server.requests()[1].body.len() < 3 * 1000 + server.requests()[0].body.len() + 1000);
}
