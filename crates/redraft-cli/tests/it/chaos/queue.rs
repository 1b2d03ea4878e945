//! An API node that executes nothing, and workers sharing its queue: requests waiting for their
//! runs get what the workers wrote, and a stopped worker hands its runs to another.

use std::time::{Duration, Instant};

use redraft_testkit::ByAttempt;
use serde_json::Value;

use super::{
    ANSWERS, SPEC, all_finished_once_each, postgres, serve, submit, terminate, until_calls, worker, write_config,
};
use crate::write;

/// An API node that executes nothing answers requests waiting for their runs (`/v1/iterate`)
/// with the results the workers wrote: each request its own run's whole result, the same one
/// the store holds, whichever worker ran it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_api_node_answers_waiting_requests_with_what_its_workers_wrote() {
    let Some(url) = postgres("waiting").await else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = ByAttempt::start(&ANSWERS, Duration::from_millis(50)).await;
    write_config(dir.path(), &model, Some(&url));
    let (_api, base) = serve(dir.path(), &["--no-worker"], "api");
    let _workers = [worker(dir.path(), "w1").await, worker(dir.path(), "w2").await];
    let client = reqwest::Client::new();
    let waiting: Vec<_> = (0..40)
        .map(|_| {
            let (client, base) = (client.clone(), base.clone());
            tokio::spawn(async move {
                let response = client
                    .post(format!("{base}/v1/iterate"))
                    .header("content-type", "application/json")
                    .body(SPEC)
                    .send()
                    .await
                    .unwrap();
                (response.status(), response.json::<Value>().await.unwrap())
            })
        })
        .collect();
    let mut ids = std::collections::HashSet::new();
    for request in waiting {
        let (status, result) = request.await.unwrap();
        assert_eq!(status, 200, "{result}");
        assert_eq!(result["status"], "succeeded", "{result}");
        assert_eq!(result["artifact"], serde_json::json!({"city": "Toledo"}), "{result}");
        let run_id = result["run_id"].as_str().unwrap().to_owned();
        let stored: Value = client.get(format!("{base}/v1/runs/{run_id}")).send().await.unwrap().json().await.unwrap();
        assert_eq!(stored["history"], result["history"], "the answer is the stored result");
        assert_eq!(result["history"].as_array().map(Vec::len), Some(3), "{result}");
        assert!(ids.insert(run_id), "two requests were answered with one run");
    }
    assert_eq!(model.calls(), 120, "one call per attempt");
}

/// SIGTERM to a worker whose runs outlast the grace period: it stops claiming, waits the grace
/// period, puts its runs back in the queue at once (no lease to wait out) and exits 0; another
/// worker finishes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_worker_puts_its_runs_back_for_another() {
    let dir = tempfile::tempdir().unwrap();
    let model = ByAttempt::start(&[ANSWERS[2]], Duration::from_secs(3)).await;
    write_config(dir.path(), &model, None);
    // A long lease: only the release can hand the runs over within this test's time.
    let config = std::fs::read_to_string(dir.path().join("redraft.toml")).unwrap();
    let config = config
        .replace("lease = \"2s\"", "lease = \"10m\"")
        .replace("grace_period = \"5s\"", "grace_period = \"500ms\"");
    write(dir.path(), "redraft.toml", &config);
    let (mut api, base) = serve(dir.path(), &["--no-worker"], "api");
    let (mut first, _) = worker(dir.path(), "first").await;
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(submit(&client, &base).await);
    }
    until_calls(&model, 4).await;
    let started = Instant::now();
    assert_eq!(terminate(&mut first), Some(0));
    assert!(started.elapsed() < Duration::from_secs(3), "it did not wait for the model past its grace period");
    let log = std::fs::read_to_string(dir.path().join("first.log")).unwrap();
    assert!(log.contains("4 unfinished run(s) went back to the queue"), "{log}");

    let (_second, _) = worker(dir.path(), "second").await;
    let recorded = all_finished_once_each(&base, &ids, 1, Duration::from_secs(30), dir.path()).await;
    assert_eq!(recorded, 4);
    assert_eq!(terminate(&mut api), Some(0));
}
