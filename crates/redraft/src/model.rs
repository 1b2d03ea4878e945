//! A proposer with its price: what `--model provider/model` resolves to.

use std::sync::Arc;

use redraft_core::{ChatProvider, Price};

use crate::config::Config;
use crate::error::ConfigError;

/// A proposer and, when known, its price (needed for `cost_usd` and budgets).
#[derive(Debug, Clone)]
pub struct Model {
    pub provider: Arc<dyn ChatProvider>,
    pub price: Option<Price>,
}

impl Model {
    /// A model from any proposer, price unknown.
    pub fn new(provider: impl ChatProvider + 'static) -> Self {
        Self { provider: Arc::new(provider), price: None }
    }

    /// Set the price.
    pub fn with_price(mut self, price: Price) -> Self {
        self.price = Some(price);
        self
    }

    /// Resolve `provider/model` with the config found the usual way (`./redraft.toml`,
    /// XDG, `REDRAFT_*` and the providers' own environment variables).
    pub fn from_name(name: &str) -> Result<Self, ConfigError> {
        Config::load(None)?.model(name)
    }

    /// The `provider/model` name.
    pub fn name(&self) -> &str {
        self.provider.name()
    }
}
