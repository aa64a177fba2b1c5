//! What a model costs per token, so a call's cost can be computed where the provider
//! does not report it. An unknown price gives an unknown cost, never zero.

use super::types::{Cost, CostSource, TokenSource, Usage};
pub use crate::contract::price::{ModelPrice, PriceTable};

impl ModelPrice {
    /// The cost of `usage` at this price: of its effective counts (reported, else
    /// estimated; an unreported input is all priced as uncached).
    pub fn cost(&self, usage: &Usage) -> f64 {
        let m = 1_000_000.0;
        let cached = usage.cached_input_tokens.unwrap_or(0) as f64;
        let written = usage.cache_write_tokens.unwrap_or(0) as f64;
        (usage.effective_uncached_input() as f64 * self.input
            + usage.effective_output() as f64 * self.output
            + cached * self.cached_input.unwrap_or(self.input)
            + written * self.cache_write.unwrap_or(self.input))
            / m
    }
}

impl PriceTable {
    /// The cost of `usage` on `model`: computed when the price is known (marked
    /// estimated when some of the counts are), unknown otherwise.
    pub fn cost(&self, model: &str, usage: &Usage) -> Cost {
        match self.get(model) {
            Some(p) => Cost {
                usd: Some(p.cost(usage)),
                source: match usage.source() {
                    TokenSource::Reported => CostSource::PriceTable,
                    TokenSource::Estimated => CostSource::Estimated,
                },
            },
            None => Cost::UNKNOWN,
        }
    }
}
