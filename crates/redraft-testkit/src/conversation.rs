//! A fake OpenAI-compatible server for many runs at once: it answers by where each
//! conversation is (the assistant messages already in it), not by a global script, so any
//! number of runs can interleave. Every answer comes after a fixed delay; the server counts the
//! calls and can tell how many are in flight.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::completion;

/// Answers `answers[n]` to a conversation holding `n` assistant messages (the last one
/// beyond), after `delay`.
#[derive(Debug)]
pub struct ByAttempt {
    server: MockServer,
    calls: Arc<Mutex<Vec<Instant>>>,
    delay: Duration,
}

struct Answers {
    answers: Vec<String>,
    delay: Duration,
    calls: Arc<Mutex<Vec<Instant>>>,
}

impl Respond for Answers {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(Instant::now());
        }
        let body: Value = request.body_json().unwrap_or(Value::Null);
        let said = body["messages"].as_array().map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
        let answer = self.answers.get(said).or(self.answers.last()).cloned().unwrap_or_default();
        ResponseTemplate::new(200).set_body_json(completion(&answer)).set_delay(self.delay)
    }
}

impl ByAttempt {
    pub async fn start(answers: &[&str], delay: Duration) -> Self {
        let server = MockServer::builder().body_print_limit(wiremock::BodyPrintLimit::Limited(0)).start().await;
        let calls = Arc::new(Mutex::new(Vec::new()));
        let answers =
            Answers { answers: answers.iter().map(|a| (*a).to_owned()).collect(), delay, calls: calls.clone() };
        Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(answers).mount(&server).await;
        Self { server, calls, delay }
    }

    /// The base URL, as `OPENAI_BASE_URL` holds it (ends in `/v1`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// Calls received so far.
    pub fn calls(&self) -> usize {
        self.calls.lock().map_or(0, |c| c.len())
    }

    /// Calls received whose answer had not been sent yet at `at` (give or take 5 ms).
    pub fn in_flight_at(&self, at: Instant) -> usize {
        let (from, to) = (at.checked_sub(self.delay).unwrap_or(at), at + Duration::from_millis(5));
        self.calls.lock().map_or(0, |c| c.iter().filter(|t| **t > from && **t <= to).count())
    }
}
