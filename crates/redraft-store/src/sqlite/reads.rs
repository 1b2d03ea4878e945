//! Reading runs (through the readers, never the writer): one run with its attempts,
//! listings and states.

use redraft_core::store::{RunFilter, RunState, RunSummary, StoreError, StoredRun};

use super::SqliteStore;
use crate::rows::{AttemptRow, RunRow, SummaryRow, failed};

/// Runs listed when the filter sets no limit.
const DEFAULT_LIMIT: u32 = 50;

pub(super) async fn run(store: &SqliteStore, run_id: &str) -> Result<Option<StoredRun>, StoreError> {
    let action = || format!("read run `{run_id}`");
    // One read transaction: the run and its attempts from the same snapshot.
    let mut tx = store.reader.begin().await.map_err(|e| failed(action(), e))?;
    let row = sqlx::query_as::<_, RunRow>(
        "SELECT id, state, spec, created_at, updated_at, result, worker_id, lease_until, answers, origin, local
         FROM runs WHERE id = $1",
    )
    .bind(run_id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(|e| failed(action(), e))?;
    let Some(row) = row else { return Ok(None) };
    let attempts =
        sqlx::query_as::<_, AttemptRow>("SELECT iteration, record FROM attempts WHERE run_id = $1 ORDER BY iteration")
            .bind(run_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| failed(action(), e))?;
    tx.commit().await.map_err(|e| failed(action(), e))?;
    row.into_stored(attempts).map(Some)
}

pub(super) async fn list(store: &SqliteStore, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
    let mut query = sqlx::QueryBuilder::new(
        "SELECT id, state, created_at, updated_at, iterations, halted_because, best_score, model, json_extract(spec, '$.kind') AS kind
         FROM runs WHERE TRUE",
    );
    if let Some(state) = filter.state {
        query.push(" AND state = ").push_bind(state.as_str());
    }
    if let Some(model) = &filter.model {
        query.push(" AND model = ").push_bind(model.clone());
    }
    if let Some(kind) = &filter.kind {
        query.push(" AND json_extract(spec, '$.kind') = ").push_bind(kind.clone());
    }
    if let Some(text) = filter.text.as_deref().filter(|t| !t.is_empty()) {
        query
            .push(" AND instr(lower(id || ' ' || coalesce(model, '') || ' ' || coalesce(json_extract(spec, '$.kind'), '') || ' ' || coalesce(json_extract(spec, '$.prompt'), '')), lower(")
            .push_bind(text.to_owned())
            .push(")) > 0");
    }
    query
        .push(" ORDER BY created_at DESC, seq DESC LIMIT ")
        .push_bind(i64::from(filter.limit.unwrap_or(DEFAULT_LIMIT)))
        .push(" OFFSET ")
        .push_bind(i64::from(filter.offset.unwrap_or(0)));
    let rows =
        query.build_query_as::<SummaryRow>().fetch_all(&store.reader).await.map_err(|e| failed("list runs", e))?;
    rows.into_iter().map(SummaryRow::into_summary).collect()
}

pub(super) async fn unfinished(store: &SqliteStore) -> Result<Vec<String>, StoreError> {
    sqlx::query_scalar::<_, String>("SELECT id FROM runs WHERE state IN ('running', 'queued') ORDER BY created_at, seq")
        .fetch_all(&store.reader)
        .await
        .map_err(|e| failed("list unfinished runs", e))
}

pub(super) async fn states(store: &SqliteStore, run_ids: &[String]) -> Result<Vec<(String, RunState)>, StoreError> {
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    let ids = serde_json::to_string(run_ids)
        .map_err(|e| StoreError::Query { action: "read the states of runs".into(), message: e.to_string() })?;
    let rows = sqlx::query_as::<_, (String, String)>(
        "SELECT id, state FROM runs WHERE id IN (SELECT value FROM json_each($1))",
    )
    .bind(ids)
    .fetch_all(&store.reader)
    .await
    .map_err(|e| failed("read the states of runs", e))?;
    rows.into_iter().map(|(id, state)| Ok((crate::rows::state(&id, &state)?, id)).map(|(s, id)| (id, s))).collect()
}
