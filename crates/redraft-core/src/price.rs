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

/// What the next attempt may cost, and how that was estimated (so a budget refusal or halt can
/// say it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostEstimate {
    pub usd: f64,
    /// Characters of the request the proposer would be sent.
    pub prompt_chars: usize,
    /// `ceil(prompt_chars / 4)`.
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Where `tokens_out` comes from.
    pub output_basis: OutputBasis,
    pub price: Price,
}

/// How the output tokens of an attempt not yet made are estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputBasis {
    /// Before any answer: `max_tokens`, at most 1024.
    MaxTokens,
    /// The longest answer so far.
    LongestAnswer,
}

impl CostEstimate {
    /// Estimate an attempt sending `prompt_chars` characters and receiving `tokens_out` tokens.
    pub fn new(price: Price, prompt_chars: usize, tokens_out: u64, output_basis: OutputBasis) -> Self {
        let tokens_in = estimate_tokens(prompt_chars);
        Self { usd: price.cost(tokens_in, tokens_out), prompt_chars, tokens_in, tokens_out, output_basis, price }
    }

    /// `$0.00123 (512 input tokens — the 2048-character prompt at 4 characters per token — at
    /// $0.15 per million, and 1024 output tokens — max_tokens, at most 1024 — at $0.6 per million)`.
    pub fn describe(&self) -> String {
        let basis = match self.output_basis {
            OutputBasis::MaxTokens => "`max_tokens`, at most 1024, before any answer",
            OutputBasis::LongestAnswer => "the longest answer so far",
        };
        format!(
            "${} ({} input tokens: the {}-character prompt at 4 characters per token, at ${} per million; and {} output tokens: {basis}, at ${} per million)",
            usd(self.usd),
            self.tokens_in,
            self.prompt_chars,
            self.price.input_usd_per_mtok,
            self.tokens_out,
            self.price.output_usd_per_mtok
        )
    }
}

/// A dollar amount with enough digits to be told apart from zero.
pub fn usd(amount: f64) -> String {
    if amount == 0.0 || amount.abs() >= 0.01 {
        format!("{amount:.2}")
    } else {
        let digits = (-amount.abs().log10()).ceil() as usize + 1;
        let text = format!("{amount:.digits$}");
        let keep = text.find('.').map_or(text.len(), |dot| dot + 3);
        let trimmed = text.trim_end_matches('0');
        if trimmed.len() < keep { text[..keep].to_owned() } else { trimmed.to_owned() }
    }
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

    #[test]
    fn estimates_say_how_they_were_made() {
        let p = Price { input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60 };
        let e = CostEstimate::new(p, 2048, 1024, OutputBasis::MaxTokens);
        assert_eq!((e.tokens_in, e.tokens_out), (512, 1024));
        assert!((e.usd - 0.0006912).abs() < 1e-12);
        assert_eq!(
            e.describe(),
            "$0.00069 (512 input tokens: the 2048-character prompt at 4 characters per token, at $0.15 per million; and 1024 output tokens: `max_tokens`, at most 1024, before any answer, at $0.6 per million)"
        );
        assert_eq!(usd(0.5), "0.50");
        assert_eq!(usd(0.000012), "0.000012");
        assert_eq!(usd(0.0), "0.00");
        assert_eq!(usd(0.00001), "0.00001");
    }
}
