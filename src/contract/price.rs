//! What a model costs per token, as the contract states it: the built-in table and the
//! operator's `[prices]`. Computing a call's cost from its usage is the provider's
//! job; an unknown price gives an unknown cost there, never zero.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// USD per million tokens of one model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// Normal input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Input tokens read from the prompt cache; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
    /// Input tokens written to the prompt cache; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

/// Prices by model name: a small built-in table the user extends (or overrides) with
/// the contract's `[prices]` section.
///
/// ```
/// use io_harness::provider::{ModelPrice, PriceTable, Usage};
/// let mut table = PriceTable::builtin();
/// table.insert("my-model", ModelPrice { input: 1.0, output: 2.0, cached_input: None, cache_write: None });
/// let usage = Usage::reported(1_000_000, 500_000);
/// assert_eq!(table.cost("my-model", &usage).usd, Some(2.0));
/// assert_eq!(table.cost("nobody-knows", &usage).usd, None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PriceTable {
    prices: BTreeMap<String, ModelPrice>,
}

/// Model, input, output, cached input, cache write.
type PriceRow = (&'static str, f64, f64, Option<f64>, Option<f64>);

/// Published list prices (USD per million tokens) of common models, 2026-11.
const BUILTIN: &[PriceRow] = &[
    ("claude-opus-4-5", 5.0, 25.0, Some(0.5), Some(6.25)),
    ("claude-sonnet-4-5", 3.0, 15.0, Some(0.3), Some(3.75)),
    ("claude-haiku-4-5", 1.0, 5.0, Some(0.1), Some(1.25)),
    ("gpt-5", 1.25, 10.0, Some(0.125), None),
    ("gpt-5-mini", 0.25, 2.0, Some(0.025), None),
    ("gpt-5-nano", 0.05, 0.4, Some(0.005), None),
    ("gpt-4.1", 2.0, 8.0, Some(0.5), None),
    ("gpt-4.1-mini", 0.4, 1.6, Some(0.1), None),
    ("gpt-4o", 2.5, 10.0, Some(1.25), None),
    ("gpt-4o-mini", 0.15, 0.6, Some(0.075), None),
];

impl PriceTable {
    /// The built-in table.
    pub fn builtin() -> Self {
        let mut t = Self::default();
        for &(model, input, output, cached_input, cache_write) in BUILTIN {
            t.insert(
                model,
                ModelPrice {
                    input,
                    output,
                    cached_input,
                    cache_write,
                },
            );
        }
        t
    }

    /// Adds or replaces a model's price.
    pub fn insert(&mut self, model: impl Into<String>, price: ModelPrice) {
        self.prices.insert(model.into(), price);
    }

    /// The price of `model`; a dated variant (`claude-sonnet-4-5-20250929`) falls back
    /// to its undated name.
    pub fn get(&self, model: &str) -> Option<&ModelPrice> {
        if let Some(p) = self.prices.get(model) {
            return Some(p);
        }
        let undated = model.rsplit_once('-').and_then(|(head, tail)| {
            (tail.len() == 8 && tail.bytes().all(|b| b.is_ascii_digit())).then_some(head)
        })?;
        self.prices.get(undated)
    }
}
