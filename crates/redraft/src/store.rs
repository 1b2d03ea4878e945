//! The store named by the config: SQLite at `.redraft/redraft.db` unless `database_url` says
//! otherwise.

use std::sync::Arc;

use redraft_core::{Store, StoreError};

use crate::config::Config;

/// Open (creating it when needed) the store the config names.
pub async fn open(config: &Config) -> Result<Arc<dyn Store>, StoreError> {
    let url = config.database_url.as_deref().unwrap_or(redraft_store::DEFAULT_SQLITE_PATH);
    redraft_store::open(url).await
}
