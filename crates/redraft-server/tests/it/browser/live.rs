//! The viewer on runs that go on while it is open: an answer typed into the page continues a run
//! awaiting one, and what a reader opened stays open while attempts arrive.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use redraft_testkit::processes::eventually_async;
use redraft_testkit::reply;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{
    DETAIL_STATE, assert_no_page_errors, attempts_shown, chromium, open, seen, serve, serve_logged, start_run, stored,
};
use crate::cdp::js_string;
use crate::{CITY_SCHEMA, harness, harness_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_typed_in_the_box_continues_an_awaiting_run() {
    let Some(chromium) = chromium("live::an_answer_typed_in_the_box_continues_an_awaiting_run") else { return };
    let h = harness(vec![reply(r#"{"town": "Toledo"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    let spec = json!({
        "prompt": "Which city is the contract in?",
        "schema": serde_json::from_str::<Value>(CITY_SCHEMA).unwrap(),
        "max_iterations": 1,
        "on_escalation": "await",
    });
    let run_id = start_run(&h, spec).await;
    let waiting = h.finished(&run_id).await;
    assert_eq!(waiting["status"], "awaiting_input", "{waiting}");
    let (target, log) = serve_logged(&h).await;

    let (_browser, page) = open(&chromium, &format!("{target}/runs/{run_id}"), 1400).await;
    page.wait_for(&format!("{DETAIL_STATE} === 'awaiting_input' && document.querySelector('#answer')")).await;
    let question = waiting["escalation"]["question"].as_str().unwrap();
    let escalation = page.eval("document.querySelector('#escalation').textContent").await;
    assert!(escalation.as_str().unwrap().contains(question), "{escalation}");
    let answer = "The contract says Toledo: answer {\"city\": \"Toledo\"}.";
    page.type_into("#answer", answer).await;
    // What is typed survives the list refreshing around it.
    page.eval("loadRuns()").await;
    page.wait_for("document.querySelector('#runs tr.run')").await;
    assert_eq!(page.eval("document.querySelector('#answer').value").await, json!(answer));
    page.click("#answer-send").await;

    page.wait_for(&format!("{DETAIL_STATE} === 'succeeded' && {}", attempts_shown(2))).await;
    let reply = page.eval("document.querySelector('.attempt[data-iteration=\"2\"] .reply-answer').textContent").await;
    assert_eq!(reply, json!(answer));
    assert_eq!(page.eval("document.querySelector('#answer')").await, Value::Null, "the answer box is gone");
    // The store agrees.
    let run = stored(&h, &run_id).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["history"].as_array().map(Vec::len), Some(2), "{run}");
    assert_eq!(run["history"][1]["reply"]["answer"], answer, "{run}");
    assert_eq!(seen(&log, "POST", &format!("/v1/runs/{run_id}/answer")), [202]);
    assert!(
        seen(&log, "GET", &format!("/v1/runs/{run_id}/events")).contains(&200),
        "the page followed the run's events"
    );
    assert_no_page_errors(&page);
}

/// Every pair of boxes among the page's main elements that overlap, and what sticks out.
/// An answer of a [`Gated`] model, and what it waits for (`None`: nothing).
type GatedAnswer = (String, Option<Arc<Notify>>);

/// A model whose answers come in order, each when the test lets it.
#[derive(Clone)]
struct Gated(Arc<Mutex<VecDeque<GatedAnswer>>>);

async fn gated_answer(State(script): State<Gated>) -> Response {
    let next = script.0.lock().unwrap().pop_front();
    let Some((text, gate)) = next else {
        return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "unexpected call: the script is exhausted")
            .into_response();
    };
    if let Some(gate) = gate {
        gate.notified().await;
    }
    Json(redraft_testkit::completion(&text)).into_response()
}

/// Serve `answers` as an OpenAI-compatible model; its base URL (ending in `/v1`).
async fn gated_model(answers: Vec<GatedAnswer>) -> String {
    let app = Router::new()
        .route("/v1/chat/completions", post(gated_answer))
        .with_state(Gated(Arc::new(Mutex::new(answers.into()))));
    format!("{}/v1", serve(app).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opened_sections_stay_open_while_the_run_goes_on() {
    let Some(chromium) = chromium("live::opened_sections_stay_open_while_the_run_goes_on") else { return };
    let second = Arc::new(Notify::new());
    let wrong = format!("{} {{\"town\": \"Toledo\"}}", "A long preamble that scrolls sideways. ".repeat(40));
    let model = gated_model(vec![(wrong, None), (r#"{"city": "Toledo"}"#.into(), Some(second.clone()))]).await;
    let h = harness_with(vec![], vec![], |c| {
        c.providers.get_mut("fake").unwrap().base_url = Some(model);
    })
    .await;
    let spec = json!({"prompt": "Which city is the contract in?", "schema": serde_json::from_str::<Value>(CITY_SCHEMA).unwrap()});
    let run_id = start_run(&h, spec).await;
    // Attempt 1 is recorded; attempt 2 waits for the gate.
    let recorded = eventually_async(Duration::from_secs(20), || async {
        stored(&h, &run_id).await["history"].as_array().is_some_and(|h| h.len() == 1)
    });
    assert!(recorded.await, "attempt 1 was not recorded: {}", stored(&h, &run_id).await);
    let (target, log) = serve_logged(&h).await;

    let (_browser, page) = open(&chromium, &format!("{target}/runs/{run_id}"), 1400).await;
    page.wait_for(&format!("{} && {DETAIL_STATE} === 'running'", attempts_shown(1))).await;
    page.wait_for("!document.querySelector('#progress').hidden && document.querySelector('#progress').textContent.includes('Attempt 2')").await;
    // A reader opens attempt 1's raw output, scrolls it sideways, and scrolls the page to it.
    let raw = ".attempt[data-iteration=\"1\"] details.raw-box";
    assert_eq!(page.eval(&format!("document.querySelector({}).open", js_string(raw))).await, json!(false));
    page.click(&format!("{raw} > summary")).await;
    page.wait_for(&format!("document.querySelector({}).open", js_string(raw))).await;
    let before = page
        .eval(&format!(
            "(() => {{ const d = document.querySelector({}); const pre = d.querySelector('pre');
               pre.scrollLeft = 120; window.kept = {{ d, pre, task: document.querySelector('#task'), head: document.querySelector('#run-head') }};
               d.scrollIntoView({{block: 'start'}}); return [pre.scrollLeft, scrollY, d.getBoundingClientRect().top]; }})()",
            js_string(raw)
        ))
        .await;
    assert!(before[0].as_f64() > Some(0.0) && before[1].as_f64() > Some(0.0), "{before}");

    second.notify_one();
    page.wait_for(&format!("{} && {DETAIL_STATE} === 'succeeded'", attempts_shown(2))).await;
    let after = page
        .eval(&format!(
            "(() => {{ const k = window.kept, d = document.querySelector({});
               return [k.d === d && d.isConnected && d.open, k.pre.isConnected && k.pre.scrollLeft, k.task.isConnected && k.head.isConnected,
                       scrollY, d.getBoundingClientRect().top]; }})()",
            js_string(raw)
        ))
        .await;
    assert_eq!(after[0], json!(true), "attempt 1's raw output closed or was rebuilt: {after}");
    assert_eq!(after[1], before[0], "its sideways scroll was reset: {after}");
    assert_eq!(after[2], json!(true), "the panel was rebuilt: {after}");
    let moved = (after[4].as_f64().unwrap() - before[2].as_f64().unwrap()).abs();
    assert!(after[3].as_f64() > Some(0.0) && moved < 40.0, "the page jumped: before {before}, after {after}");
    // The new attempt came from the run's events, not from reading the run again and again.
    assert!(seen(&log, "GET", &format!("/v1/runs/{run_id}/events")).contains(&200));
    assert!(seen(&log, "GET", &format!("/v1/runs/{run_id}")).len() <= 2, "{:?}", log.lock().unwrap());
    assert_eq!(stored(&h, &run_id).await["status"], "succeeded");
    assert_no_page_errors(&page);
}
