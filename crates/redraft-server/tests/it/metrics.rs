//! `/metrics` as an operator's scraper sees it: real HTTP requests to a server listening on
//! 127.0.0.1, then the exposition parsed sample by sample.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use redraft_testkit::{reply, status};
use serde_json::{Value, json};

use crate::{Harness, harness};

/// One sample: its metric name, labels and value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of a Prometheus text exposition (comments skipped; label values unescaped).
fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|line| {
            let name_end = line.find(['{', ' ']).unwrap();
            let name = line[..name_end].to_owned();
            let mut labels = BTreeMap::new();
            let mut rest = &line[name_end..];
            if let Some(inner) = rest.strip_prefix('{') {
                let mut chars = inner.char_indices();
                loop {
                    let (start, c) = chars.next().unwrap();
                    if c == '}' {
                        rest = &inner[start + 1..];
                        break;
                    }
                    if c == ',' {
                        continue;
                    }
                    let eq = inner[start..].find('=').unwrap() + start;
                    let key = inner[start..eq].to_owned();
                    while chars.next().unwrap().0 < eq + 1 {}
                    let mut value = String::new();
                    loop {
                        match chars.next().unwrap().1 {
                            '"' => break,
                            '\\' => match chars.next().unwrap().1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            other => value.push(other),
                        }
                    }
                    labels.insert(key, value);
                }
            }
            let value = rest.trim().parse().unwrap_or_else(|_| panic!("no value in `{line}`"));
            Sample { name, labels, value }
        })
        .collect()
}

/// The value of the one sample named `name` whose labels include `labels` exactly (0 when no
/// sample matches, as Prometheus reads a counter never incremented).
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let matching: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
        .collect();
    assert!(matching.len() <= 1, "several samples match {name} {labels:?}: {matching:?}");
    matching.first().map_or(0.0, |s| s.value)
}

/// The harness's router served on 127.0.0.1, and a client for it.
struct Live {
    addr: SocketAddr,
    client: reqwest::Client,
}

async fn serve(h: &Harness) -> Live {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = h.app.clone();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Live { addr, client: reqwest::Client::new() }
}

impl Live {
    async fn get(&self, path: &str) -> (u16, String) {
        let res = self.client.get(format!("http://{}{path}", self.addr)).send().await.unwrap();
        (res.status().as_u16(), res.text().await.unwrap())
    }

    async fn post(&self, path: &str, content_type: &str, body: String) -> (u16, String) {
        let res = self
            .client
            .post(format!("http://{}{path}", self.addr))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.text().await.unwrap())
    }

    async fn scrape(&self) -> (String, Vec<Sample>) {
        let (status, text) = self.get("/metrics").await;
        assert_eq!(status, 200, "{text}");
        let samples = parse(&text);
        (text, samples)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_counted_by_route_template_method_and_status() {
    let h = harness(vec![reply(r#"{"city": "X"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    let live = serve(&h).await;
    let run = json!({"kind": "city", "prompt": "city?", "context": {"city": "Toledo"}});
    let (code, text) = live.post("/v1/iterate", "application/json", run.to_string()).await;
    assert_eq!(code, 200, "{text}");
    let result: Value = serde_json::from_str(&text).unwrap();
    let run_id = result["run_id"].as_str().unwrap();
    for _ in 0..2 {
        let (code, text) = live.get(&format!("/v1/runs/{run_id}")).await;
        assert_eq!(code, 200, "{text}");
    }
    assert_eq!(live.get("/v1/runs/no-such-run").await.0, 404);
    assert_eq!(live.get("/v2/nothing").await.0, 404);
    assert_eq!(live.post("/v1/iterate", "application/json", "{not json".into()).await.0, 400);
    assert_eq!(live.post("/v1/iterate", "text/plain", run.to_string()).await.0, 415, "the gate refuses it");
    assert_eq!(live.get("/healthz").await.0, 200);

    let (text, samples) = live.scrape().await;
    let requests = |route: &str, method: &str, status: &str| {
        value(&samples, "redraft_http_requests_total", &[("route", route), ("method", method), ("status", status)])
    };
    assert_eq!(requests("/v1/iterate", "POST", "200"), 1.0, "{text}");
    assert_eq!(requests("/v1/iterate", "POST", "400"), 1.0, "{text}");
    assert_eq!(requests("/v1/iterate", "POST", "415"), 1.0, "{text}");
    assert_eq!(requests("/v1/runs/{id}", "GET", "200"), 2.0, "{text}");
    assert_eq!(requests("/v1/runs/{id}", "GET", "404"), 1.0, "{text}");
    assert_eq!(requests("unmatched", "GET", "404"), 1.0, "{text}");
    assert_eq!(requests("/healthz", "GET", "200"), 1.0, "{text}");
    assert_eq!(requests("/metrics", "GET", "200"), 0.0, "a scrape is counted once it has been answered");
    let total: f64 = samples.iter().filter(|s| s.name == "redraft_http_requests_total").map(|s| s.value).sum();
    assert_eq!(total, 8.0, "every request once: {text}");
    assert!(!text.contains(run_id), "a raw path never becomes a label: {text}");
    assert!(!text.contains("no-such-run") && !text.contains("/v2/nothing"), "{text}");

    // The latency histogram: every request of a route and method, in cumulative buckets.
    let histogram = |suffix: &str, extra: &[(&str, &str)]| {
        let mut labels = vec![("route", "/v1/runs/{id}"), ("method", "GET")];
        labels.extend_from_slice(extra);
        value(&samples, &format!("redraft_http_request_duration_seconds{suffix}"), &labels)
    };
    assert_eq!(histogram("_count", &[]), 3.0, "{text}");
    assert_eq!(histogram("_bucket", &[("le", "+Inf")]), 3.0, "{text}");
    let buckets: Vec<f64> = samples
        .iter()
        .filter(|s| {
            s.name == "redraft_http_request_duration_seconds_bucket"
                && s.labels.get("route").map(String::as_str) == Some("/v1/runs/{id}")
        })
        .map(|s| s.value)
        .collect();
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "cumulative: {buckets:?}");
    assert!(histogram("_sum", &[]) > 0.0, "{text}");

    // The scrape itself shows up in the next one.
    let (text, samples) = live.scrape().await;
    let scrapes =
        value(&samples, "redraft_http_requests_total", &[("route", "/metrics"), ("method", "GET"), ("status", "200")]);
    assert_eq!(scrapes, 1.0, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_tokens_and_cost_carry_the_proposer_model() {
    let h = harness(vec![reply(r#"{"city": "X"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    let live = serve(&h).await;
    let run = json!({"kind": "city", "prompt": "city?", "context": {"city": "Toledo"}});
    let (code, text) = live.post("/v1/iterate", "application/json", run.to_string()).await;
    assert_eq!(code, 200, "{text}");
    let result: Value = serde_json::from_str(&text).unwrap();
    let models: Vec<&str> =
        result["history"].as_array().unwrap().iter().map(|a| a["model"].as_str().unwrap()).collect();
    assert_eq!(models, ["fake/m", "fake/m"]);

    let (text, samples) = live.scrape().await;
    let attempts = |status: &str| value(&samples, "redraft_attempts_total", &[("model", "fake/m"), ("status", status)]);
    assert_eq!((attempts("rejected"), attempts("accepted")), (1.0, 1.0), "{text}");
    let tokens =
        |direction: &str| value(&samples, "redraft_tokens_total", &[("model", "fake/m"), ("direction", direction)]);
    assert_eq!(tokens("in"), result["metrics"]["tokens_in"].as_f64().unwrap(), "{text}");
    assert_eq!(tokens("out"), result["metrics"]["tokens_out"].as_f64().unwrap(), "{text}");
    assert_eq!(value(&samples, "redraft_cost_usd_total", &[("model", "fake/m")]), 0.0, "no price is configured");
    assert!(
        samples
            .iter()
            .any(|s| s.name == "redraft_cost_usd_total" && s.labels.get("model").map(String::as_str) == Some("fake/m")),
        "the cost of the model is exposed: {text}"
    );
    for family in ["redraft_attempts_total", "redraft_tokens_total", "redraft_cost_usd_total"] {
        assert!(
            samples.iter().filter(|s| s.name == family).all(|s| s.labels.contains_key("model")),
            "every {family} sample has a model: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_retries_are_counted_by_model() {
    let h = harness(vec![status(500), reply(r#"{"city": "Toledo"}"#)]).await;
    let live = serve(&h).await;
    let run = json!({"kind": "city", "prompt": "city?", "context": {"city": "Toledo"}});
    let (code, text) = live.post("/v1/iterate", "application/json", run.to_string()).await;
    assert_eq!(code, 200, "{text}");
    let result: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(result["iterations"], 1, "a retry is not an attempt");
    assert_eq!(h.model.calls().await, 2);

    let (text, samples) = live.scrape().await;
    assert_eq!(value(&samples, "redraft_transport_retries_total", &[("model", "fake/m")]), 1.0, "{text}");
    assert_eq!(value(&samples, "redraft_attempts_total", &[("model", "fake/m"), ("status", "accepted")]), 1.0);
    for (family, kind) in [
        ("redraft_queue_depth", "gauge"),
        ("redraft_runs_waiting", "gauge"),
        ("redraft_runs_shed_total", "counter"),
        ("redraft_lease_takeovers_total", "counter"),
        ("redraft_transport_retries_total", "counter"),
        ("redraft_http_requests_total", "counter"),
        ("redraft_http_request_duration_seconds", "histogram"),
    ] {
        assert!(text.lines().any(|l| l == format!("# TYPE {family} {kind}")), "no TYPE for {family}: {text}");
        assert!(text.lines().any(|l| l.starts_with(&format!("# HELP {family} "))), "no HELP for {family}: {text}");
    }
}
