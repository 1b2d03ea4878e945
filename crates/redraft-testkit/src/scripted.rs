//! The mechanism under every fake: a server on `127.0.0.1:0` that answers `POST PATH` from a
//! script, reply by reply, and answers a call beyond the script with the fake's own "unexpected
//! call" error, so a test that calls more than it scripted fails visibly.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

struct Script {
    replies: Mutex<VecDeque<ResponseTemplate>>,
    exhausted: ResponseTemplate,
}

impl Respond for Script {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let next = self.replies.lock().ok().and_then(|mut q| q.pop_front());
        next.unwrap_or_else(|| self.exhausted.clone())
    }
}

/// A scripted server.
#[derive(Debug)]
pub struct ScriptedServer {
    server: MockServer,
}

impl ScriptedServer {
    /// Answer `POST route` with `replies` in order, then with `exhausted`.
    pub async fn start(route: &str, replies: Vec<ResponseTemplate>, exhausted: ResponseTemplate) -> Self {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(route))
            .respond_with(Script { replies: Mutex::new(replies.into()), exhausted })
            .mount(&server)
            .await;
        Self { server }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn uri(&self) -> String {
        self.server.uri()
    }

    /// The JSON bodies received so far.
    pub async fn bodies(&self) -> Vec<Value> {
        let requests = self.server.received_requests().await.unwrap_or_default();
        requests.iter().filter_map(|r| r.body_json().ok()).collect()
    }

    /// How many requests were received.
    pub async fn calls(&self) -> usize {
        self.server.received_requests().await.map(|r| r.len()).unwrap_or(0)
    }

    /// The value of header `name` in each request received (`None` where it was missing).
    pub async fn headers(&self, name: &str) -> Vec<Option<String>> {
        let requests = self.server.received_requests().await.unwrap_or_default();
        requests.iter().map(|r| r.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)).collect()
    }
}
