//! Group commit for runs queued on PostgreSQL. An API node accepting thousands of runs at once
//! made one statement and one commit per run, each waiting for a pooled connection; the runs
//! waiting to be queued now go through one task that stores all of them in one statement (one
//! round trip, one commit) while the next batch gathers. Each run still succeeds or fails on
//! its own: the bound on the queue is checked per row in order, a run whose id is already
//! stored is refused alone, and when the database refuses the statement each run is stored
//! again on its own (the single-row insert), so one bad row cannot fail the others; when the
//! database cannot be reached, every run of the batch is told so at once. No caller is
//! answered before the commit that holds its run: acknowledged is stored.

use std::collections::HashMap;

use redraft_core::store::{Origin, StoreError};
use sqlx::PgPool;

use crate::pg_group::{self, Batches, Queue};

/// The most runs in one statement.
const MAX_BATCH: usize = 512;

/// A run to store as queued.
#[derive(Debug)]
pub(crate) struct QueuedRun {
    pub run_id: String,
    /// The spec, as JSON text.
    pub spec: String,
    pub model: Option<String>,
    /// Where its request came from.
    pub origin: Origin,
    /// Refuse the run when this many runs already wait.
    pub max_queued: Option<i64>,
}

type Job = pg_group::Job<QueuedRun, ()>;

/// Where queued runs are sent to be stored together.
#[derive(Debug, Clone)]
pub(crate) struct Inserts {
    queue: Queue<QueuedRun, ()>,
}

/// Where the batches are stored, and announced.
struct Target {
    pool: PgPool,
    /// The channel queued runs are announced on (`pg_signal`).
    channel: String,
}

/// Insert the runs given as arrays (in order), as queued, within the bound `$5` on waiting
/// runs (the runs before each in the batch counted); the ids inserted.
const INSERT_QUEUED: &str =
    "INSERT INTO runs (id, state, spec, created_at, updated_at, model, worker_id, lease_until, local, origin)
     SELECT u.id, 'queued', u.spec::json, redraft_now_ms(), redraft_now_ms(), u.model, NULL, NULL, u.local, u.origin
     FROM UNNEST($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::BOOLEAN[], $6::TEXT[]) WITH ORDINALITY
          AS u (id, spec, model, local, origin, n)
     WHERE $5::BIGINT IS NULL OR (SELECT COUNT(*) FROM runs WHERE state = 'queued') + u.n <= $5::BIGINT
     ORDER BY u.n
     ON CONFLICT (id) DO NOTHING
     RETURNING id";

impl Inserts {
    /// Start the task storing queued runs over `pool`. It ends when every `Inserts` is dropped.
    pub(crate) fn start(pool: PgPool, channel: String) -> Self {
        let (queue, batches) = pg_group::queue("queue a run", MAX_BATCH);
        tokio::spawn(run(Target { pool, channel }, batches));
        Self { queue }
    }

    /// Store `run` as queued in the next batch; answered once that batch is committed.
    pub(crate) async fn insert(&self, run: QueuedRun) -> Result<(), StoreError> {
        self.queue.submit(run).await
    }
}

async fn run(target: Target, mut batches: Batches<QueuedRun, ()>) {
    while let Some(batch) = batches.next().await {
        // One statement per bound (every caller of a process passes the same one).
        let mut groups: Vec<(Option<i64>, Vec<Job>)> = Vec::new();
        for job in batch {
            match groups.iter_mut().find(|(bound, _)| *bound == job.item.max_queued) {
                Some((_, jobs)) => jobs.push(job),
                None => groups.push((job.item.max_queued, vec![job])),
            }
        }
        for (bound, jobs) in groups {
            store(&target, bound, jobs).await;
        }
    }
}

/// Store `jobs` in one statement and answer each.
async fn store(target: &Target, bound: Option<i64>, jobs: Vec<Job>) {
    let pool = &target.pool;
    let column = |f: fn(&QueuedRun) -> Option<String>| jobs.iter().map(|j| f(&j.item)).collect::<Vec<_>>();
    let inserted = sqlx::query_scalar::<_, String>(INSERT_QUEUED)
        .bind(column(|r| Some(r.run_id.clone())))
        .bind(column(|r| Some(r.spec.clone())))
        .bind(column(|r| r.model.clone()))
        .bind(jobs.iter().map(|j| j.item.origin.is_local()).collect::<Vec<_>>())
        .bind(bound)
        .bind(column(|r| Some(r.origin.as_str().to_owned())))
        .fetch_all(pool)
        .await;
    let inserted = match inserted {
        Ok(ids) => ids,
        // The database refused a row: each on its own, so that it does not fail the others.
        Err(sqlx::Error::Database(e)) => {
            tracing::debug!("storing {} queued runs together failed ({e}); storing each on its own", jobs.len());
            for job in jobs {
                let outcome = crate::postgres::insert_queued(pool, &target.channel, &job.item).await;
                job.answer(outcome);
            }
            return;
        }
        // The database cannot be reached (no connection, a broken one): every run is told at
        // once (trying each again would hold the queue for a connection timeout per run).
        Err(e) => {
            pg_group::fail_all(jobs, |run| format!("insert run `{}`", run.run_id), &e.to_string());
            return;
        }
    };
    let mut fresh: HashMap<&str, usize> = HashMap::new();
    for id in &inserted {
        *fresh.entry(id.as_str()).or_default() += 1;
    }
    let mut refused = Vec::new();
    let mut answers = Vec::with_capacity(jobs.len());
    for job in &jobs {
        match fresh.get_mut(job.item.run_id.as_str()).filter(|n| **n > 0) {
            Some(n) => {
                *n -= 1;
                answers.push(Some(Ok(())));
            }
            None => {
                refused.push(job.item.run_id.clone());
                answers.push(None);
            }
        }
    }
    // Not inserted: already stored (refused alone), or over the bound (the queue is full).
    let (stored, queued) = if refused.is_empty() {
        (Vec::new(), 0)
    } else {
        let stored =
            sqlx::query_scalar::<_, String>("SELECT id FROM runs WHERE id = ANY($1)").bind(&refused).fetch_all(pool);
        let queued = sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM runs WHERE state = 'queued'").fetch_one(pool);
        match tokio::try_join!(stored, queued) {
            Ok((stored, queued)) => (stored, u64::try_from(queued).unwrap_or(0)),
            Err(e) => {
                let message = e.to_string();
                for (job, answer) in jobs.into_iter().zip(answers) {
                    let action = format!("insert run `{}`", job.item.run_id);
                    job.answer(answer.unwrap_or_else(|| Err(StoreError::Query { action, message: message.clone() })));
                }
                return;
            }
        }
    };
    if !inserted.is_empty() {
        // Workers listening claim them now (after the answers: they wait for nothing).
        let (pool, channel) = (pool.clone(), target.channel.clone());
        tokio::spawn(async move { crate::pg_signal::announce(&pool, &channel).await });
    }
    for (job, answer) in jobs.into_iter().zip(answers) {
        let answer = answer.unwrap_or_else(|| {
            if stored.contains(&job.item.run_id) {
                Err(StoreError::Query {
                    action: format!("insert run `{}`", job.item.run_id),
                    message: "a run with this id is already stored".into(),
                })
            } else {
                Err(StoreError::QueueFull { queued })
            }
        });
        job.answer(answer);
    }
}
