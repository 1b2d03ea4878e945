//! A worker that loses a run's lease (another worker took it over after a pause) stops the run
//! and records nothing more: no attempt, no `cancelled` result over the new holder's work.

use std::path::Path;
use std::time::Duration;

use redraft::config::Config;
use redraft::core::{Claim, Lease};
use redraft::queue::Worker;
use redraft::recorder::{self, Start};
use redraft::{HaltReason, RunSpec, SpecSetup};
use redraft_testkit::processes::eventually_async;
use redraft_testkit::{FakeOpenAi, slow};

fn config(base_url: &str, dir: &Path) -> Config {
    let text = format!(
        "default_model = \"fake/m\"\ndatabase_url = '{}'\n\n[queue]\nlease = \"600ms\"\nheartbeat = \"100ms\"\n\n\
         [providers.fake]\ntype = \"openai\"\nbase_url = \"{base_url}\"\n",
        dir.join("redraft.db").display(),
    );
    Config::parse(&text, Path::new("test.toml")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_lost_the_lease_stops_and_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeOpenAi::start(vec![slow(r#"{"city": "Toledo"}"#, Duration::from_secs(5))]).await;
    let config = config(&model.base_url(), dir.path());
    let store = redraft::store::open(&config).await.unwrap();
    let worker = Worker::start(store.clone(), &config.queue);
    let spec: RunSpec =
        serde_json::from_value(serde_json::json!({"prompt": "city?", "schema": {"type": "object"}})).unwrap();
    let run_id = redraft::new_run_id();
    let how = Start { run_id: Some(run_id.clone()), ..Start::default() };
    let setup = SpecSetup::local(&config, dir.path().to_owned());
    let running = {
        let (spec, worker) = (spec.clone(), worker.clone());
        let config = config.clone();
        let dir = dir.path().to_owned();
        tokio::spawn(async move {
            let setup = SpecSetup::local(&config, dir);
            recorder::start(&spec, &setup, Some(&worker), how).await
        })
    };
    drop(setup);
    // The attempt is in flight; another worker breaks the lease (it believes the holder dead).
    let in_flight = eventually_async(Duration::from_secs(10), || async { model.calls().await >= 1 }).await;
    assert!(in_flight, "the attempt never reached the model");
    let other = Lease { worker_id: "other-worker", ttl: Duration::from_secs(600) };
    assert_eq!(store.claim_run(&run_id, &other, true).await.unwrap(), Claim::Claimed { takeover: true });

    // The first worker sees it at its next renewal and stops the run without waiting for the
    // model's answer.
    let result =
        tokio::time::timeout(Duration::from_secs(3), running).await.expect("the run did not stop").unwrap().unwrap();
    assert_eq!(result.halted_because, HaltReason::Cancelled);
    let stored = store.run(&run_id).await.unwrap().unwrap();
    assert!(stored.attempts.is_empty(), "the abandoned attempt was recorded: {:?}", stored.attempts);
    assert!(stored.result.is_none(), "a result was written over the new holder's run");
    assert_eq!(stored.holder.unwrap().worker_id, "other-worker");
}

/// An agent-mode run (`redraft until`) reads a working directory only `redraft until` has: a
/// resume elsewhere refuses it and leaves it as it is, rather than running the agent with no
/// verifier or failing the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_mode_run_is_not_resumed_without_its_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let config = config("http://127.0.0.1:9/v1", dir.path());
    let store = redraft::store::open(&config).await.unwrap();
    let spec = RunSpec {
        prompt: "Make the tests pass.".into(),
        agent: Some(vec!["sh".into(), "agent.sh".into()]),
        text: true,
        workspace: Some(redraft::WorkspaceSpec { verify: "sh test.sh".into(), protect: Vec::new(), task: "t".into() }),
        ..RunSpec::default()
    };
    let run_id = redraft::new_run_id();
    let value = serde_json::to_value(&spec).unwrap();
    let gone = Lease { worker_id: "gone-worker", ttl: Duration::from_millis(1) };
    let new = redraft::core::NewRun {
        run_id: &run_id,
        spec: &value,
        holder: Some(gone),
        max_queued: None,
        origin: redraft::core::Origin::Cli,
    };
    store.insert_run(&new).await.unwrap();

    let worker = Worker::start(store.clone(), &config.queue);
    let setup = SpecSetup::local(&config, dir.path().to_owned());
    let err = recorder::resume(&run_id, &setup, &worker, Start::default(), true).await.unwrap_err().to_string();
    assert!(err.contains("agent-mode") && err.contains("redraft until"), "{err}");
    let stored = store.run(&run_id).await.unwrap().unwrap();
    assert!(stored.result.is_none(), "the run was failed: {:?}", stored.result);
    assert!(stored.attempts.is_empty());

    // Nor is it answered from elsewhere while `redraft until` waits for its person: the answer
    // would leave it where nothing runs it.
    let mut awaiting = store.run(&run_id).await.unwrap().unwrap();
    awaiting.state = redraft::core::RunState::AwaitingInput;
    let err = recorder::person_reply(&awaiting, "go on", None, &setup).unwrap_err().to_string();
    assert!(err.contains("agent-mode") && err.contains("redraft until"), "{err}");

    // Over the network, such a spec is refused before anything runs.
    let network = redraft::Guard::network(redraft::Face::Http, &config.server).unwrap();
    let setup = SpecSetup { guard: std::sync::Arc::new(network), ..SpecSetup::local(&config, dir.path().to_owned()) };
    let err = spec.prepare(&setup).unwrap_err().to_string();
    assert!(err.contains("not allowed over HTTP"), "{err}");
}

/// A run keeps the trust of the face its request came through, whoever continues it: the CLI
/// resuming a run a network client started sets it up under the network's guard (its command
/// is refused when `exec_allow` does not admit it, and would otherwise run with a clean
/// environment), and a network face may not answer a run the CLI started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_continued_with_the_trust_of_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let model = FakeOpenAi::start(vec![redraft_testkit::reply(r#"{"city": "Toledo"}"#)]).await;
    let config = config(&model.base_url(), dir.path());
    let store = redraft::store::open(&config).await.unwrap();
    let marker = dir.path().join("ran");
    let spec: RunSpec = serde_json::from_value(serde_json::json!({
        "prompt": "city?", "evaluator": format!("exec:touch {}", marker.display())
    }))
    .unwrap();
    let value = serde_json::to_value(&spec).unwrap();
    let worker = Worker::start(store.clone(), &config.queue);
    let local = SpecSetup::local(&config, dir.path().to_owned());
    for (origin, over) in [(redraft::core::Origin::Http, "over HTTP"), (redraft::core::Origin::Mcp, "over MCP")] {
        let run_id = redraft::new_run_id();
        let gone = Lease { worker_id: "gone-worker", ttl: Duration::from_millis(1) };
        let new = redraft::core::NewRun { run_id: &run_id, spec: &value, holder: Some(gone), max_queued: None, origin };
        store.insert_run(&new).await.unwrap();
        let err = recorder::resume(&run_id, &local, &worker, Start::default(), true).await.unwrap_err().to_string();
        assert!(err.contains(over) && err.contains("exec_allow"), "{origin:?}: {err}");
        assert!(!marker.exists(), "{origin:?}: the command ran with the CLI's trust");
        assert_eq!(model.calls().await, 0, "nothing was sent to the model");
    }

    // The same request from the CLI itself runs as the CLI's user asked.
    let run_id = redraft::new_run_id();
    let gone = Lease { worker_id: "gone-worker", ttl: Duration::from_millis(1) };
    let new = redraft::core::NewRun {
        run_id: &run_id,
        spec: &value,
        holder: Some(gone),
        max_queued: None,
        origin: redraft::core::Origin::Cli,
    };
    store.insert_run(&new).await.unwrap();
    let mut stored = store.run(&run_id).await.unwrap().unwrap();
    // A network face cannot answer it.
    stored.state = redraft::core::RunState::AwaitingInput;
    let network = redraft::Guard::network(redraft::Face::Http, &config.server).unwrap();
    let over_http =
        SpecSetup { guard: std::sync::Arc::new(network), ..SpecSetup::local(&config, dir.path().to_owned()) };
    let err = recorder::person_reply(&stored, "go on", None, &over_http).unwrap_err().to_string();
    assert!(err.contains("started by the CLI") && err.contains("over HTTP"), "{err}");
    let result = recorder::resume(&run_id, &local, &worker, Start::default(), true).await.unwrap();
    assert_eq!(result.status, redraft::core::RunStatus::Succeeded, "{result:?}");
    assert!(marker.exists(), "the CLI's own run ran its command");
}
