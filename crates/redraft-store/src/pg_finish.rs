//! Group commit for runs finishing on PostgreSQL. A worker finishing thousands of runs at once
//! made one statement and one commit per run, and the database spent more CPU planning and
//! committing them than the worker spent running the loop; the results waiting to be written
//! now go through one task that writes all of them in one statement (one round trip, one
//! commit) while the next batch gathers. Each run is still written or refused on its own: the
//! statement only writes a run its worker holds, and says which it wrote; a run whose worker
//! no longer holds it is answered "not written", for the caller to say why. When the database
//! refuses the statement, each result is written again on its own (the same statement, one run),
//! so that one bad row cannot fail the others; when the database cannot be reached, every run
//! of the batch is told so at once. No caller is answered before the commit that holds its
//! result.

use std::collections::HashSet;

use redraft_core::store::StoreError;
use sqlx::PgPool;

use crate::pg_group::{self, Batches, Queue};
use crate::rows::ResultColumns;

/// The most results gathered at once.
const MAX_BATCH: usize = 256;
/// The most JSON text (results and attempt records) in one statement, so that a batch of runs
/// with long histories stays a statement the database takes without trouble.
const MAX_STATEMENT_BYTES: usize = 8 << 20;

/// A result to write, by the worker holding its run.
#[derive(Debug)]
pub(crate) struct Finish {
    pub run_id: String,
    pub worker_id: String,
    pub columns: ResultColumns,
}

impl Finish {
    fn bytes(&self) -> usize {
        self.columns.result.len() + self.columns.history.iter().map(|a| a.record.len()).sum::<usize>()
    }
}

/// A result to write, answered with whether it was written (`false`: the worker does not hold
/// the run).
type Job = pg_group::Job<Finish, bool>;

/// Where finished runs are sent to be written together.
#[derive(Debug, Clone)]
pub(crate) struct Finishes {
    queue: Queue<Finish, bool>,
}

/// Where the results are written, and announced.
struct Target {
    pool: PgPool,
    /// The channel finished runs are announced on (`pg_signal`).
    channel: String,
}

/// Write the results given as arrays (`$1`…`$8`, one element per run, each run at most once)
/// to the runs their workers hold (running, or already finished by them; the runs' rows are
/// locked first, in the order of their ids as every statement locking several runs does, so
/// that two of them never wait for each other, and the holder is checked), with their attempts (`$9`…`$14`, one element per attempt,
/// named by run) written where they differ from what is stored, keeping the time each was
/// first recorded, and every other attempt of those runs deleted. A run's model, when it has
/// none yet, is the first one its history names. Returns the ids of the runs written.
const FINISH_RUNS: &str = "WITH f AS (
         SELECT * FROM UNNEST($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::BIGINT[],
                              $6::DOUBLE PRECISION[], $7::TEXT[], $8::TEXT[])
             AS f (id, worker_id, state, halted_because, iterations, best_score, result, model)),
     locked AS MATERIALIZED (
         SELECT runs.id FROM runs JOIN f ON runs.id = f.id AND runs.worker_id = f.worker_id
         WHERE runs.state IN ('running', 'succeeded', 'failed', 'awaiting_input')
         ORDER BY runs.id FOR UPDATE OF runs),
     run AS (
         UPDATE runs SET state = f.state, halted_because = f.halted_because, iterations = f.iterations,
             best_score = f.best_score, result = f.result::json, updated_at = redraft_now_ms(),
             lease_until = NULL, model = COALESCE(runs.model, f.model)
         FROM f JOIN locked ON locked.id = f.id
         WHERE runs.id = f.id AND runs.worker_id = f.worker_id
             AND runs.state IN ('running', 'succeeded', 'failed', 'awaiting_input')
         RETURNING runs.id),
     h AS (
         SELECT * FROM UNNEST($9::TEXT[], $10::BIGINT[], $11::TEXT[], $12::DOUBLE PRECISION[], $13::BOOLEAN[],
                              $14::TEXT[])
             AS h (run_id, iteration, status, score, has_artifact, record)),
     kept AS (
         INSERT INTO attempts (run_id, iteration, status, score, has_artifact, record, recorded_at)
         SELECT h.run_id, h.iteration, h.status, h.score, h.has_artifact, h.record::json, redraft_now_ms()
         FROM h JOIN run ON run.id = h.run_id
         ON CONFLICT (run_id, iteration) DO UPDATE SET
             status = excluded.status, score = excluded.score, has_artifact = excluded.has_artifact,
             record = excluded.record
         WHERE attempts.record::text IS DISTINCT FROM excluded.record::text
             OR attempts.status IS DISTINCT FROM excluded.status
             OR attempts.score IS DISTINCT FROM excluded.score
             OR attempts.has_artifact IS DISTINCT FROM excluded.has_artifact),
     dropped AS (
         DELETE FROM attempts USING run WHERE attempts.run_id = run.id
             AND NOT EXISTS (SELECT 1 FROM h WHERE h.run_id = attempts.run_id AND h.iteration = attempts.iteration))
     SELECT id FROM run";

impl Finishes {
    /// Start the task writing results over `pool` and announcing them on `channel`. It ends
    /// when every `Finishes` is dropped.
    pub(crate) fn start(pool: PgPool, channel: String) -> Self {
        let (queue, batches) = pg_group::queue("finish a run", MAX_BATCH);
        tokio::spawn(run(Target { pool, channel }, batches));
        Self { queue }
    }

    /// Write `finish` in the next batch; answered once that batch is committed, with whether
    /// the run was written (`false`: its worker does not hold it).
    pub(crate) async fn finish(&self, finish: Finish) -> Result<bool, StoreError> {
        self.queue.submit(finish).await
    }
}

async fn run(target: Target, mut batches: Batches<Finish, bool>) {
    while let Some(batch) = batches.next().await {
        let mut written = Vec::new();
        for statement in statements(batch) {
            written.extend(write(&target.pool, statement).await);
        }
        if !written.is_empty() {
            // API nodes waiting for them answer now (after the answers: workers wait for nothing).
            let (pool, channel) = (target.pool.clone(), target.channel.clone());
            tokio::spawn(async move { crate::pg_signal::announce_finished(&pool, &channel, &written).await });
        }
    }
}

/// Split `jobs` into statements, in order: a run at most once per statement (a run finished
/// twice in a batch is written twice, in order), and at most [`MAX_STATEMENT_BYTES`] of JSON in
/// one (a single larger result has a statement of its own).
fn statements(jobs: Vec<Job>) -> Vec<Vec<Job>> {
    let mut statements: Vec<Vec<Job>> = Vec::new();
    let mut current: Vec<Job> = Vec::new();
    let mut ids: HashSet<String> = HashSet::new();
    let mut bytes = 0;
    for job in jobs {
        let size = job.item.bytes();
        let full = !current.is_empty() && bytes + size > MAX_STATEMENT_BYTES;
        if full || ids.contains(&job.item.run_id) {
            statements.push(std::mem::take(&mut current));
            ids.clear();
            bytes = 0;
        }
        ids.insert(job.item.run_id.clone());
        bytes += size;
        current.push(job);
    }
    if !current.is_empty() {
        statements.push(current);
    }
    statements
}

/// Write `finishes` in one statement: the ids of the runs written.
async fn finish_all(pool: &PgPool, finishes: &[&Finish]) -> Result<Vec<String>, sqlx::Error> {
    let runs = finishes.iter();
    let attempts = || runs.clone().flat_map(|f| f.columns.history.iter().map(move |a| (f.run_id.as_str(), a)));
    sqlx::query_scalar::<_, String>(FINISH_RUNS)
        .bind(runs.clone().map(|f| f.run_id.as_str()).collect::<Vec<_>>())
        .bind(runs.clone().map(|f| f.worker_id.as_str()).collect::<Vec<_>>())
        .bind(runs.clone().map(|f| f.columns.state).collect::<Vec<_>>())
        .bind(runs.clone().map(|f| f.columns.halted_because).collect::<Vec<_>>())
        .bind(runs.clone().map(|f| f.columns.iterations).collect::<Vec<_>>())
        .bind(runs.clone().map(|f| f.columns.best_score).collect::<Vec<_>>())
        .bind(runs.clone().map(|f| f.columns.result.as_str()).collect::<Vec<_>>())
        .bind(runs.clone().map(|f| f.columns.model()).collect::<Vec<_>>())
        .bind(attempts().map(|(id, _)| id).collect::<Vec<_>>())
        .bind(attempts().map(|(_, a)| a.iteration).collect::<Vec<_>>())
        .bind(attempts().map(|(_, a)| a.status).collect::<Vec<_>>())
        .bind(attempts().map(|(_, a)| a.score).collect::<Vec<_>>())
        .bind(attempts().map(|(_, a)| a.has_artifact).collect::<Vec<_>>())
        .bind(attempts().map(|(_, a)| a.record.as_str()).collect::<Vec<_>>())
        .fetch_all(pool)
        .await
}

/// Write `jobs` in one statement and answer each; the ids of the runs written.
async fn write(pool: &PgPool, jobs: Vec<Job>) -> Vec<String> {
    let finishes: Vec<&Finish> = jobs.iter().map(|j| &j.item).collect();
    let written = finish_all(pool, &finishes).await;
    match written {
        Ok(ids) => {
            let written: HashSet<&String> = ids.iter().collect();
            for job in jobs {
                let wrote = written.contains(&job.item.run_id);
                job.answer(Ok(wrote));
            }
            ids
        }
        // The database refused a row: each on its own, so that it does not fail the others.
        Err(sqlx::Error::Database(e)) if jobs.len() > 1 => {
            tracing::debug!("writing {} results together failed ({e}); writing each on its own", jobs.len());
            let mut written = Vec::new();
            for job in jobs {
                let outcome = finish_all(pool, &[&job.item]).await.map(|ids| !ids.is_empty()).map_err(|e| {
                    StoreError::Query { action: format!("finish run `{}`", job.item.run_id), message: e.to_string() }
                });
                if matches!(outcome, Ok(true)) {
                    written.push(job.item.run_id.clone());
                }
                job.answer(outcome);
            }
            written
        }
        Err(e) => {
            pg_group::fail_all(jobs, |finish| format!("finish run `{}`", finish.run_id), &e.to_string());
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::ResultColumns;

    fn job(run_id: &str, result_bytes: usize) -> Job {
        let columns = ResultColumns {
            state: "succeeded",
            halted_because: "accepted",
            iterations: 1,
            best_score: None,
            result: "x".repeat(result_bytes),
            history: Vec::new(),
        };
        Job::detached(Finish { run_id: run_id.into(), worker_id: "w".into(), columns })
    }

    fn shape(statements: &[Vec<Job>]) -> Vec<Vec<&str>> {
        statements.iter().map(|s| s.iter().map(|j| j.item.run_id.as_str()).collect()).collect()
    }

    #[test]
    fn a_run_finished_twice_in_a_batch_is_written_twice_in_order() {
        let split = statements(vec![job("a", 1), job("b", 1), job("a", 2), job("c", 1), job("a", 3)]);
        assert_eq!(shape(&split), vec![vec!["a", "b"], vec!["a", "c"], vec!["a"]]);
        let last_a: Vec<usize> =
            split.iter().flatten().filter(|j| j.item.run_id == "a").map(|j| j.item.bytes()).collect();
        assert_eq!(last_a, vec![1, 2, 3]);
    }

    #[test]
    fn a_statement_holds_at_most_its_share_of_json_and_a_larger_result_goes_alone() {
        let half = MAX_STATEMENT_BYTES / 2;
        let split = statements(vec![
            job("a", half),
            job("b", half),
            job("c", 1),
            job("d", 2 * MAX_STATEMENT_BYTES),
            job("e", 1),
        ]);
        assert_eq!(shape(&split), vec![vec!["a", "b"], vec!["c"], vec!["d"], vec!["e"]]);
    }

    #[test]
    fn an_empty_batch_makes_no_statement() {
        assert!(statements(Vec::new()).is_empty());
    }
}
