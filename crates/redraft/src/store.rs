//! The store named by the config: SQLite at `.redraft/redraft.db` unless `database_url` says
//! otherwise.

use std::sync::Arc;

use redraft_core::Store;

use crate::config::Config;
use crate::error::ConfigError;

/// Open (creating it when needed) the store the config names.
pub async fn open(config: &Config) -> Result<Arc<dyn Store>, ConfigError> {
    let url = config.database_url.as_deref().unwrap_or(redraft_store::DEFAULT_SQLITE_PATH);
    Ok(redraft_store::open(url).await?)
}
