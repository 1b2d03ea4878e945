//! Prices and token estimates: what an attempt costs.

use serde::{Deserialize, Serialize};

/// USD per million input and output tokens for one model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_usd_per_mtok: f64,
    pub output_usd_per_mtok: f64,
}

impl Price {
    /// The cost in USD of `tokens_in` input and `tokens_out` output tokens.
    pub fn cost(&self, tokens_in: u64, tokens_out: u64) -> f64 {
        (tokens_in as f64 * self.input_usd_per_mtok + tokens_out as f64 * self.output_usd_per_mtok) / 1e6
    }
}

/// The token estimate used when a provider reports no usage: ceil(chars / 4).
pub fn estimate_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_and_estimate() {
        let p = Price { input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60 };
        assert!((p.cost(1_000_000, 1_000_000) - 0.75).abs() < 1e-12);
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(1), 1);
        assert_eq!(estimate_tokens(8), 2);
        assert_eq!(estimate_tokens(9), 3);
    }
}
