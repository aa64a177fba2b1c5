//! Shared HTTP plumbing of the wire clients.
//!
//! STUB: being implemented (client construction, status classification, SSE reading).

use std::time::Duration;

use super::price::PriceTable;

/// What every HTTP provider needs.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// API key; `None` for servers that need none (a local compatible server).
    pub api_key: Option<String>,
    /// Base URL (OpenAI style includes `/v1`; Anthropic's does not).
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Prices for computing cost where the provider does not report it.
    pub prices: PriceTable,
    /// Longest silence allowed between two stream chunks.
    pub idle_timeout: Duration,
    /// Time allowed to connect and receive response headers.
    pub connect_timeout: Duration,
}

impl HttpConfig {
    /// A config with default timeouts (connect 30 s, idle 120 s).
    pub fn new(
        base_url: impl Into<String>,
        model: impl Into<String>,
        api_key: Option<String>,
    ) -> Self {
        Self {
            api_key,
            base_url: base_url.into(),
            model: model.into(),
            prices: PriceTable::builtin(),
            idle_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(30),
        }
    }
}
