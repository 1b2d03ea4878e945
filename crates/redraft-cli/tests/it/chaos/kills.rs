//! `kill -9` mid-run: of workers sharing a PostgreSQL queue, and of `redraft serve` on SQLite
//! right after it acknowledged a run and in the middle of the work.

use std::time::Duration;

use redraft_testkit::ByAttempt;

use super::{
    ANSWERS, DELAY, all_finished_once, held_by, kill9, postgres, serve, server_worker_id, submit, terminate,
    until_calls, worker, write_config,
};

/// Three workers share a PostgreSQL queue fed by an API node that executes nothing itself;
/// twice a random worker is killed with SIGKILL while runs are in flight (and replaced). All
/// 200 runs of 3 attempts finish; no attempt is recorded twice or lost; the model is asked
/// again only for the calls in flight at the kills.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_workers_killed_mid_run_lose_and_repeat_nothing() {
    let Some(url) = postgres("workers").await else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = ByAttempt::start(&ANSWERS, DELAY).await;
    write_config(dir.path(), &model, Some(&url));
    let (mut api, base) = serve(dir.path(), &["--no-worker"], "api");
    let mut workers = Vec::new();
    for i in 0..3 {
        workers.push(worker(dir.path(), &format!("worker{i}")).await);
    }

    let client = reqwest::Client::new();
    let submitting: Vec<_> = (0..200)
        .map(|_| {
            let (client, base) = (client.clone(), base.clone());
            tokio::spawn(async move { submit(&client, &base).await })
        })
        .collect();
    let mut ids = Vec::new();
    for s in submitting {
        ids.push(s.await.unwrap());
    }

    let mut in_flight_at_kills = 0;
    for (k, progress) in [150, 350].into_iter().enumerate() {
        until_calls(&model, progress).await;
        let victim = (std::process::id() as usize + k) % workers.len();
        kill9(&mut workers[victim].0);
        in_flight_at_kills += held_by(&url, &workers[victim].1).await;
        workers[victim] = worker(dir.path(), &format!("replacement{k}")).await;
    }

    let recorded = all_finished_once(&base, &ids, Duration::from_secs(120), dir.path()).await;
    assert_eq!(recorded, 600);
    let calls = model.calls();
    eprintln!("chaos: {calls} model calls, {recorded} recorded attempts, {in_flight_at_kills} runs held at the kills");
    assert!(
        calls <= recorded + in_flight_at_kills,
        "{calls} calls for {recorded} recorded attempts and {in_flight_at_kills} in flight at the kills"
    );
    assert!(in_flight_at_kills > 0, "the kills happened while runs were in flight");

    for (mut w, _) in workers {
        assert_eq!(terminate(&mut w), Some(0));
    }
    assert_eq!(terminate(&mut api), Some(0));
}

/// One `redraft serve` on SQLite, killed with SIGKILL right after it acknowledged a run, then
/// again in the middle of the work, and restarted each time: every acknowledged run is stored,
/// resumed by the restarted server and finished, with no attempt recorded twice or lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sqlite_server_killed_after_a_202_and_mid_run_loses_and_repeats_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = ByAttempt::start(&ANSWERS, DELAY).await;
    write_config(dir.path(), &model, None);
    let db = dir.path().join(".redraft/redraft.db").display().to_string();
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    let mut in_flight_at_kills = 0;

    // Killed at once after acknowledging a run.
    let (mut server, base) = serve(dir.path(), &[], "serve0");
    for _ in 0..20 {
        ids.push(submit(&client, &base).await);
    }
    kill9(&mut server);
    in_flight_at_kills += held_by(&db, &server_worker_id(dir.path(), "serve0")).await;

    // Restarted; more runs; killed in the middle of the work.
    let (mut server, base) = serve(dir.path(), &[], "serve1");
    for _ in 0..40 {
        ids.push(submit(&client, &base).await);
    }
    until_calls(&model, 90).await;
    kill9(&mut server);
    in_flight_at_kills += held_by(&db, &server_worker_id(dir.path(), "serve1")).await;

    let (mut server, base) = serve(dir.path(), &[], "serve2");
    let recorded = all_finished_once(&base, &ids, Duration::from_secs(120), dir.path()).await;
    assert_eq!(recorded, 180);
    let calls = model.calls();
    eprintln!("chaos: {calls} model calls, {recorded} recorded attempts, {in_flight_at_kills} runs held at the kills");
    assert!(
        calls <= recorded + in_flight_at_kills,
        "{calls} calls for {recorded} recorded attempts and {in_flight_at_kills} in flight at the kills"
    );
    assert_eq!(terminate(&mut server), Some(0));
}
