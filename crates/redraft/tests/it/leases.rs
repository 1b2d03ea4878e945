//! A worker that loses a run's lease (another worker took it over after a pause) stops the run
//! and records nothing more: no attempt, no `cancelled` result over the new holder's work.

use std::path::Path;
use std::time::Duration;

use redraft::config::Config;
use redraft::core::{Claim, Lease};
use redraft::queue::Worker;
use redraft::recorder::{self, Start};
use redraft::{HaltReason, RunSpec, SpecSetup};
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
    while model.calls().await < 1 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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
