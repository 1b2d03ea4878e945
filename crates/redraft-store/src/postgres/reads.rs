//! Reading runs: one run with its attempts, the results of many, listings and states.

use redraft_core::record::RunResult;
use redraft_core::store::{RunFilter, RunState, RunSummary, StoreError, StoredRun};

use super::PostgresStore;
use crate::rows::{AttemptRow, RunRow, SummaryRow, failed};

/// Runs listed when the filter sets no limit.
const DEFAULT_LIMIT: u32 = 50;

/// Read runs (add the `WHERE`) with their attempts, as [`RunWithAttempts`], in one statement
/// (so one snapshot).
macro_rules! run_with_attempts {
    () => {
        concat!("SELECT ", run_with_attempts_columns!(), " FROM runs")
    };
}

/// The columns of [`RunWithAttempts`], for a `SELECT` or a `RETURNING`.
/// With a `spec` expression, the columns read in its place (`'null'` where the spec is not
/// wanted, so that it is neither sent nor parsed).
macro_rules! run_with_attempts_columns {
    () => {
        run_with_attempts_columns!("spec::text")
    };
    ($spec:literal) => {
        concat!(
            "id, state, ",
            $spec,
            " AS spec, created_at, updated_at, result::text AS result, worker_id, lease_until, answers, origin, local,
         ARRAY(SELECT iteration FROM attempts WHERE run_id = runs.id ORDER BY iteration) AS iterations,
         ARRAY(SELECT record::text FROM attempts WHERE run_id = runs.id ORDER BY iteration) AS records"
        )
    };
}
pub(super) use run_with_attempts_columns;

/// A run's row and its attempts.
#[derive(sqlx::FromRow)]
pub(super) struct RunWithAttempts {
    #[sqlx(flatten)]
    pub(super) run: RunRow,
    iterations: Vec<i64>,
    records: Vec<String>,
}

impl RunWithAttempts {
    pub(super) fn into_stored(self) -> Result<StoredRun, StoreError> {
        let Self { run, iterations, records } = self;
        let attempts =
            iterations.into_iter().zip(records).map(|(iteration, record)| AttemptRow { iteration, record }).collect();
        run.into_stored(attempts)
    }
}

/// Text PostgreSQL takes as a parameter: it refuses NUL characters, which the listed specs
/// show as U+FFFD (see `list`).
fn no_nul(text: &str) -> String {
    text.replace('\0', "\u{fffd}")
}

pub(super) async fn run(store: &PostgresStore, run_id: &str) -> Result<Option<StoredRun>, StoreError> {
    // One statement, so one snapshot for the run and its attempts.
    let row = sqlx::query_as::<_, RunWithAttempts>(concat!(run_with_attempts!(), " WHERE id = $1"))
        .bind(run_id)
        .fetch_optional(&store.pool)
        .await
        .map_err(|e| failed(format!("read run `{run_id}`"), e))?;
    row.map(RunWithAttempts::into_stored).transpose()
}

pub(super) async fn results(store: &PostgresStore, run_ids: &[String]) -> Result<Vec<(String, RunResult)>, StoreError> {
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    // The results only: the specs (as long as the prompts) are not read.
    let rows = sqlx::query_as::<_, RunWithAttempts>(concat!(
        "SELECT ",
        run_with_attempts_columns!("'null'"),
        " FROM runs WHERE id = ANY($1) AND state IN ('succeeded', 'failed', 'awaiting_input')"
    ))
    .bind(run_ids)
    .fetch_all(&store.pool)
    .await
    .map_err(|e| failed("read the results of runs", e))?;
    let mut results = Vec::with_capacity(rows.len());
    for row in rows {
        let stored = row.into_stored()?;
        if let Some(result) = stored.result {
            results.push((stored.run_id, result));
        }
    }
    Ok(results)
}

pub(super) async fn list(store: &PostgresStore, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
    // The spec is read as `s`, with every `\u0000` in its text made U+FFFD first: PostgreSQL
    // cannot extract a field of JSON holding one, and a single such request (a prompt with
    // a NUL character) would otherwise fail every listing.
    let mut query = sqlx::QueryBuilder::new(
        "SELECT id, state, created_at, updated_at, iterations, halted_because, best_score, model,
                s->>'kind' AS kind
         FROM runs, LATERAL (SELECT replace(spec::text, '\\u0000', '\\ufffd')::json AS s) AS safe WHERE TRUE",
    );
    if let Some(state) = filter.state {
        query.push(" AND state = ").push_bind(state.as_str());
    }
    if let Some(model) = &filter.model {
        query.push(" AND model = ").push_bind(no_nul(model));
    }
    if let Some(kind) = &filter.kind {
        query.push(" AND (s->>'kind') = ").push_bind(no_nul(kind));
    }
    if let Some(text) = filter.text.as_deref().filter(|t| !t.is_empty()) {
        query
            .push(" AND strpos(lower(id || ' ' || coalesce(model, '') || ' ' || coalesce((s->>'kind'), '') || ' ' || coalesce((s->>'prompt'), '')), lower(")
            .push_bind(no_nul(text))
            .push(")) > 0");
    }
    query
        .push(" ORDER BY created_at DESC, seq DESC LIMIT ")
        .push_bind(i64::from(filter.limit.unwrap_or(DEFAULT_LIMIT)))
        .push(" OFFSET ")
        .push_bind(i64::from(filter.offset.unwrap_or(0)));
    let rows = query.build_query_as::<SummaryRow>().fetch_all(&store.pool).await.map_err(|e| failed("list runs", e))?;
    rows.into_iter().map(SummaryRow::into_summary).collect()
}

pub(super) async fn unfinished(store: &PostgresStore) -> Result<Vec<String>, StoreError> {
    sqlx::query_scalar::<_, String>("SELECT id FROM runs WHERE state IN ('running', 'queued') ORDER BY created_at, seq")
        .fetch_all(&store.pool)
        .await
        .map_err(|e| failed("list unfinished runs", e))
}

pub(super) async fn states(store: &PostgresStore, run_ids: &[String]) -> Result<Vec<(String, RunState)>, StoreError> {
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = sqlx::query_as::<_, (String, String)>("SELECT id, state FROM runs WHERE id = ANY($1)")
        .bind(run_ids)
        .fetch_all(&store.pool)
        .await
        .map_err(|e| failed("read the states of runs", e))?;
    rows.into_iter().map(|(id, state)| Ok((crate::rows::state(&id, &state)?, id)).map(|(s, id)| (id, s))).collect()
}
