//! STUB: being implemented.

use futures_util::future::BoxFuture;

use super::Provider;
use super::error::ProviderError;
use super::http::HttpConfig;
use super::types::{Completion, CompletionRequest, ProviderIdentity};

/// STUB.
pub struct OpenAi {
    cfg: HttpConfig,
}

impl OpenAi {
    /// Builds the client.
    pub fn new(cfg: HttpConfig) -> Result<Self, ProviderError> {
        Ok(Self { cfg })
    }
}

impl Provider for OpenAi {
    fn identity(&self) -> ProviderIdentity {
        ProviderIdentity {
            kind: "openai".into(),
            model: self.cfg.model.clone(),
            base_url: Some(self.cfg.base_url.clone()),
        }
    }
    fn complete<'a>(
        &'a self,
        _request: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        todo!()
    }
}
