//! Runs in the background: started, listed, followed over SSE, cancelled, resumed on start.

use std::time::Duration;

use futures_util::StreamExt;
use redraft::RunSpec;
use redraft::core::{NewRun, RunState, Store};
use redraft::queue::Worker;
use redraft::recorder::{self, Start};
use redraft_server::{AppState, router};
use redraft_testkit::processes::eventually_async;
use redraft_testkit::{reply, slow};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::{WAIT, assert_result_snapshot, config, harness, request, sse_events, write_kind};

fn city_spec() -> Value {
    json!({"kind": "city", "prompt": "Which city is the contract in?", "context": {"city": "Toledo"}})
}

#[tokio::test]
async fn a_background_run_is_accepted_then_shown_and_listed() {
    let h =
        harness(vec![reply(r#"{"city": "Louisville"}"#), slow(r#"{"city": "Toledo"}"#, Duration::from_millis(300))])
            .await;
    let a = h.call("POST", "/v1/runs", Some(city_spec())).await;
    assert_eq!(a.status, 202, "{}", a.text);
    let run_id = a.json["run_id"].as_str().unwrap().to_owned();
    assert_eq!(a.json, json!({"run_id": run_id}));
    assert_eq!(a.header("location"), Some(format!("/v1/runs/{run_id}").as_str()));
    // In flight: the run so far.
    let so_far = h.call("GET", &format!("/v1/runs/{run_id}"), None).await;
    assert_eq!(so_far.status, 200);
    assert_eq!(so_far.json["state"], "running", "{}", so_far.text);
    let result = h.finished(&run_id).await;
    assert_eq!(result["status"], "succeeded");
    assert_eq!(result["iterations"], 2);

    let listed = h.call("GET", "/v1/runs?status=succeeded&limit=5", None).await;
    assert_eq!(listed.status, 200);
    let runs = listed.json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0]["run_id"].as_str(), runs[0]["iterations"].as_u64()), (Some(run_id.as_str()), Some(2)));
    assert_eq!(runs[0]["model"], "fake/m");
    assert_eq!(runs[0]["kind"], "city");
    assert_eq!(listed.json["next_offset"], Value::Null);
    assert_eq!(h.call("GET", "/v1/runs?status=failed", None).await.json["runs"], json!([]));
    // Filters by model, kind and text, and pages.
    for (query, found) in [
        ("model=fake/m&kind=city", true),
        ("kind=invoice", false),
        ("q=CONTRACT", true),
        ("q=no+such+words", false),
        ("model=fake", false),
    ] {
        let a = h.call("GET", &format!("/v1/runs?{query}"), None).await;
        assert_eq!((a.status, a.json["runs"].as_array().unwrap().len()), (200, usize::from(found)), "{query}");
    }
    let first = h.call("GET", "/v1/runs?limit=1", None).await;
    assert_eq!((first.json["runs"].as_array().unwrap().len(), first.json["next_offset"].as_u64()), (1, None));
    assert_eq!(h.call("GET", "/v1/runs?offset=1", None).await.json["runs"], json!([]));
    // The whole run: its result, its state and what was asked.
    let shown = h.call("GET", &format!("/v1/runs/{run_id}"), None).await;
    assert_eq!((shown.json["state"].as_str(), shown.json["status"].as_str()), (Some("succeeded"), Some("succeeded")));
    assert_eq!(shown.json["spec"]["prompt"], "Which city is the contract in?");
    assert_eq!(shown.json["spec"]["kind"], "city");
    assert_eq!(shown.json["history"][0]["prompt"].as_str().map(|p| p.contains("Which city")), Some(true));
    assert!(
        shown.json["history"][1]["prompt"].as_str().unwrap().contains("Louisville"),
        "the feedback: {}",
        shown.text
    );
    for bad in ["/v1/runs?status=done", "/v1/runs?limit=0", "/v1/runs?limit=many", "/v1/runs?offset=-1"] {
        let a = h.call("GET", bad, None).await;
        assert_eq!((a.status, a.json["error"]["code"].as_str()), (400, Some("invalid_field")), "{bad}");
    }
    let a = h.call("GET", "/v1/runs/nope", None).await;
    assert_eq!((a.status, a.json["error"]["code"].as_str()), (404, Some("unknown_run")));
    assert_eq!(h.call("GET", "/v1/runs/nope/events", None).await.status, 404);
    assert_eq!(h.call("DELETE", "/v1/runs/nope", None).await.status, 404);
}

#[tokio::test]
async fn a_finished_run_replays_all_its_events_in_order() {
    let h = harness(vec![reply("no json here"), reply(r#"{"city": "Dayton"}"#), reply(r#"{"city": "Toledo"}"#)]).await;
    let run = h.call("POST", "/v1/iterate", Some(city_spec())).await;
    assert_eq!(run.status, 200, "{}", run.text);
    let run_id = run.json["run_id"].as_str().unwrap();
    let a = h.call("GET", &format!("/v1/runs/{run_id}/events"), None).await;
    assert_eq!(a.status, 200);
    assert!(a.header("content-type").unwrap().starts_with("text/event-stream"));
    let events = sse_events(&a.text);
    let names: Vec<String> = events
        .iter()
        .map(|(e, d)| match d["iteration"].as_u64().or(d["attempt"]["iteration"].as_u64()) {
            Some(i) => format!("{e} {i} {}", d["attempt"]["status"].as_str().unwrap_or("")).trim().to_owned(),
            None => e.clone(),
        })
        .collect();
    assert_eq!(
        names,
        [
            "attempt_started 1",
            "attempt_finished 1 invalid_json",
            "attempt_started 2",
            "attempt_finished 2 rejected",
            "attempt_started 3",
            "attempt_finished 3 accepted",
            "run_finished"
        ]
    );
    assert_eq!(events[6].1, run.json, "run_finished carries the result");
    assert!(a.text.contains("id: 1\n") || a.text.contains("id:1\n"), "events are numbered: {}", a.text);
}

#[tokio::test]
async fn a_running_run_streams_live_events_until_it_finishes() {
    let h = harness(vec![
        slow(r#"{"city": "Dayton"}"#, Duration::from_millis(400)),
        slow(r#"{"city": "Toledo"}"#, Duration::from_millis(400)),
    ])
    .await;
    let a = h.call("POST", "/v1/runs", Some(city_spec())).await;
    let run_id = a.json["run_id"].as_str().unwrap().to_owned();
    let res = h.app.clone().oneshot(request("GET", &format!("/v1/runs/{run_id}/events"), None)).await.unwrap();
    assert_eq!(res.status(), 200);
    let mut body = res.into_body().into_data_stream();
    let mut text = String::new();
    let mut first_seen_while_running = None;
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(10), body.next()).await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        if first_seen_while_running.is_none() && text.contains("attempt_started") {
            let so_far = h.call("GET", &format!("/v1/runs/{run_id}"), None).await;
            first_seen_while_running = Some(so_far.json["state"].clone());
            // An operator sees who runs it, and until when its lease holds.
            let holder = &so_far.json["holder"];
            assert_eq!(holder["worker_id"], h.state.executor().worker().id(), "{}", so_far.text);
            assert!(holder["lease_until_ms"].as_i64().unwrap() > 1_700_000_000_000, "{}", so_far.text);
        }
    }
    assert_eq!(first_seen_while_running, Some(json!("running")), "the first event came while the run was in flight");
    let names: Vec<String> = sse_events(&text).into_iter().map(|(e, _)| e).collect();
    assert_eq!(
        names,
        ["attempt_started", "attempt_finished", "attempt_started", "attempt_finished", "run_finished"],
        "{text}"
    );
}

#[tokio::test]
async fn delete_cancels_a_run_in_flight() {
    let h = harness(vec![reply(r#"{"city": "Dayton"}"#), slow(r#"{"city": "Toledo"}"#, Duration::from_secs(30))]).await;
    let a = h.call("POST", "/v1/runs", Some(city_spec())).await;
    let run_id = a.json["run_id"].as_str().unwrap().to_owned();
    let in_flight = eventually_async(WAIT, || async { h.model.calls().await >= 2 }).await;
    assert!(in_flight, "attempt 2 never reached the model");
    let cancelled = h.call("DELETE", &format!("/v1/runs/{run_id}"), None).await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    assert_eq!(cancelled.json["halted_because"], "cancelled");
    assert_eq!(cancelled.json["status"], "failed");
    assert_eq!(cancelled.json["history"][1]["issues"][0]["code"], "cancelled", "the attempt in flight is recorded");
    assert_eq!(h.finished(&run_id).await["halted_because"], "cancelled", "as stored");
    let again = h.call("DELETE", &format!("/v1/runs/{run_id}"), None).await;
    assert_eq!((again.status, again.json["error"]["code"].as_str()), (409, Some("run_finished")));
}

#[tokio::test]
async fn iterate_can_be_cancelled_by_another_request() {
    let h = harness(vec![slow(r#"{"city": "Toledo"}"#, Duration::from_secs(30))]).await;
    let app = h.app.clone();
    let waiting = tokio::spawn(async move { app.oneshot(request("POST", "/v1/iterate", Some(&city_spec()))).await });
    let listed = eventually_async(WAIT, || async {
        h.call("GET", "/v1/runs", None).await.json["runs"][0]["run_id"].is_string()
    });
    assert!(listed.await, "the run was never listed");
    let runs = h.call("GET", "/v1/runs", None).await;
    let run_id = runs.json["runs"][0]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(h.call("DELETE", &format!("/v1/runs/{run_id}"), None).await.status, 200);
    let res = waiting.await.unwrap().unwrap();
    assert_eq!(res.status(), 422);
}

#[tokio::test]
async fn a_run_whose_worker_died_is_taken_over_with_nothing_lost_or_repeated() {
    let h = harness(vec![reply(r#"{"city": "Toledo"}"#)]).await;
    // A server recorded attempt 1 and died during attempt 2.
    let spec: RunSpec = serde_json::from_value(city_spec()).unwrap();
    let mut config = config(&h.model.base_url(), h.dir.path());
    config.queue.lease = Duration::from_millis(300);
    let store = redraft::store::open(&config).await.unwrap();
    let crashed = FakeDeath::run(&spec, &config, store.clone()).await;
    let stored = store.run(&crashed).await.unwrap().unwrap();
    assert_eq!((stored.state, stored.attempts.len()), (RunState::Running, 1));
    assert!(stored.holder.is_some(), "the dead worker's lease is recorded");

    // Another server over the same store takes it over once the lease has expired.
    write_kind(h.dir.path());
    let state = AppState::new(config, store.clone(), vec![]).unwrap();
    let app = router(state.clone());
    let stored = async || {
        let res = app.clone().oneshot(request("GET", &format!("/v1/runs/{crashed}"), None)).await.unwrap();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap();
        serde_json::from_slice::<Value>(&bytes).unwrap()
    };
    let halted = eventually_async(WAIT, || async { stored().await.get("status").is_some() }).await;
    assert!(halted, "the run was not taken over");
    let result = stored().await;
    assert_eq!(result["status"], "succeeded", "{result}");
    let cities: Vec<&str> =
        result["history"].as_array().unwrap().iter().map(|a| a["artifact"]["city"].as_str().unwrap()).collect();
    assert_eq!(cities, ["Dayton", "Toledo"], "attempt 1 kept, attempt 2 made once");
    assert_eq!(h.model.calls().await, 1, "only the missing attempt was asked for");
    // Both servers share the store: whichever took the run over counted it.
    let metrics = app.clone().oneshot(request("GET", "/metrics", None)).await.unwrap();
    let metrics = axum::body::to_bytes(metrics.into_body(), usize::MAX).await.unwrap();
    let metrics = String::from_utf8_lossy(&metrics).into_owned() + &h.call("GET", "/metrics", None).await.text;
    let takeovers: u32 = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("redraft_lease_takeovers_total "))
        .map(|n| n.parse::<u32>().unwrap())
        .sum();
    assert_eq!(takeovers, 1, "{metrics}");
    let feedback = redraft_testkit::last_user_message(&h.model.bodies().await[0]);
    assert!(feedback.starts_with("Attempt 2 of 3.") && feedback.contains("Dayton"), "{feedback}");
    assert_result_snapshot!(json!({"status": result["status"], "iterations": result["iterations"], "halted_because": result["halted_because"]}), @r#"
    {
      "status": "succeeded",
      "iterations": 2,
      "halted_because": "success"
    }
    "#);
}

/// A run whose process "dies" after its first attempt: recorded, then dropped mid-attempt 2.
struct FakeDeath;

impl FakeDeath {
    async fn run(spec: &RunSpec, config: &redraft::Config, store: std::sync::Arc<dyn Store>) -> String {
        let model = redraft_testkit::FakeOpenAi::start(vec![
            reply(r#"{"city": "Dayton"}"#),
            slow(r#"{"city": "never"}"#, Duration::from_secs(60)),
        ])
        .await;
        let mut config = config.clone();
        if let Some(p) = config.providers.get_mut("fake") {
            p.base_url = Some(model.base_url());
        }
        let setup = redraft::SpecSetup::local(&config, std::env::current_dir().unwrap());
        let run_id = redraft::new_run_id();
        let worker = Worker::start(store.clone(), &config.queue);
        let value = serde_json::to_value(spec).unwrap();
        let new = NewRun {
            run_id: &run_id,
            spec: &value,
            holder: Some(worker.lease()),
            max_queued: None,
            origin: redraft::core::Origin::Http,
        };
        store.insert_run(&new).await.unwrap();
        let how = Start { run_id: Some(run_id.clone()), ..Start::default() };
        let prepared = spec.prepare(&setup).unwrap();
        let running = recorder::run_built(prepared.runner, prepared.task, &worker, how);
        tokio::pin!(running);
        // The run goes on (it is polled) until attempt 2 reached the model.
        tokio::select! {
            _ = &mut running => panic!("the run was meant to hang"),
            in_flight = eventually_async(WAIT, || async { model.calls().await >= 2 }) => {
                assert!(in_flight, "attempt 2 never reached the model");
            }
        }
        // Dropping the future and the worker is the crash: nothing more is written, the lease
        // is no longer renewed.
        run_id
    }
}

/// A run accepted by an API node is set up again by the worker that claims it, through the
/// worker's own guard: a command the worker's allow-list does not admit is not run there — the
/// run fails with `cannot_run`, and nothing is sent to the model.
#[tokio::test]
async fn a_worker_checks_a_queued_run_against_its_own_allow_list() {
    // The API node admits `exec:true` and executes nothing itself.
    let api = crate::harness_with(vec![reply(r#"{"city": "Toledo"}"#)], vec![], |c| {
        c.server.max_concurrent_runs = 0;
        c.server.exec_allow = vec!["true".into()];
    })
    .await;
    let spec = json!({"prompt": "city?", "evaluator": "exec:true"});
    let accepted = api.call("POST", "/v1/runs", Some(spec)).await;
    assert_eq!(accepted.status, 202, "{}", accepted.text);
    let run_id = accepted.json["run_id"].as_str().unwrap().to_owned();
    let queued = api.call("GET", &format!("/v1/runs/{run_id}"), None).await.json;
    assert_eq!((queued["state"].as_str(), queued["holder"].is_null()), (Some("queued"), true), "{queued}");

    // A worker on the same store whose config admits no command.
    let config = config(&api.model.base_url(), api.dir.path());
    assert!(config.server.exec_allow.is_empty());
    let store = redraft::store::open(&config).await.unwrap();
    let _worker = AppState::new(config, store, vec![]).unwrap();
    let result = api.finished(&run_id).await;
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["error"]["code"], "cannot_run", "{result}");
    assert!(result["error"]["message"].as_str().unwrap().contains("exec_allow"), "{result}");
    assert_eq!(api.model.calls().await, 0, "nothing was sent to the model");
}

/// `DELETE` on an API node cancels a run another process executes: its worker sees the request
/// when it renews its lease, and the run halts as `cancelled` without waiting for the model.
#[tokio::test]
async fn delete_cancels_a_run_executing_in_another_process() {
    let api = crate::harness_with(vec![slow(r#"{"city": "Toledo"}"#, Duration::from_secs(30))], vec![], |c| {
        c.server.max_concurrent_runs = 0;
    })
    .await;
    let accepted = api.call("POST", "/v1/runs", Some(city_spec())).await;
    assert_eq!(accepted.status, 202, "{}", accepted.text);
    let run_id = accepted.json["run_id"].as_str().unwrap().to_owned();
    let mut config = config(&api.model.base_url(), api.dir.path());
    config.queue.heartbeat = Duration::from_millis(100);
    let store = redraft::store::open(&config).await.unwrap();
    let worker = AppState::new(config, store, vec![]).unwrap();
    let in_flight = eventually_async(WAIT, || async { api.model.calls().await >= 1 }).await;
    assert!(in_flight, "the run never reached the model");
    assert!(api.state.live(&run_id).is_none() && worker.live(&run_id).is_some(), "the other process runs it");

    let started = std::time::Instant::now();
    let cancelled = api.call("DELETE", &format!("/v1/runs/{run_id}"), None).await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    assert_eq!(cancelled.json["halted_because"], "cancelled", "{}", cancelled.text);
    assert!(started.elapsed() < Duration::from_secs(5), "it did not wait for the model");
    assert_eq!(api.model.calls().await, 1);
}

/// A run the user's own CLI started, in the same store, is not the network's to end: `DELETE`
/// and abort are refused (403), and the run is left as it was.
#[tokio::test]
async fn a_run_the_cli_started_cannot_be_cancelled_or_aborted_over_http() {
    let h = harness(vec![]).await;
    let store = h.state.store();
    let spec = city_spec();
    let gone = redraft::core::Lease { worker_id: "a-cli", ttl: Duration::from_secs(600) };
    for id in ["cli-running", "cli-queued"] {
        let holder = (id == "cli-running").then_some(gone);
        let new = NewRun { run_id: id, spec: &spec, holder, max_queued: None, origin: redraft::core::Origin::Cli };
        store.insert_run(&new).await.unwrap();
        let a = h.call("DELETE", &format!("/v1/runs/{id}"), None).await;
        assert_eq!((a.status, a.json["error"]["code"].as_str()), (403, Some("run_not_allowed")), "{}", a.text);
        assert!(a.text.contains("started by the CLI"), "{}", a.text);
        let a = h.call("POST", &format!("/v1/runs/{id}/abort"), Some(json!({}))).await;
        assert_eq!(a.status, 403, "{}", a.text);
        let stored = store.run(id).await.unwrap().unwrap();
        assert!(matches!(stored.state, RunState::Running | RunState::Queued), "{:?}", stored.state);
        assert!(stored.result.is_none());
    }
}
