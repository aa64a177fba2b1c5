//! STUB: being implemented.

use futures_util::future::BoxFuture;

use super::Provider;
use super::error::ProviderError;
use super::types::{Completion, CompletionRequest, ProviderIdentity};

/// Wraps a provider and appends every turn it returns to a script file.
pub struct Record<P> {
    inner: P,
}

impl<P: Provider> Record<P> {
    /// Records `inner` into `path`.
    pub fn new(inner: P, _path: impl AsRef<std::path::Path>) -> std::io::Result<Self> {
        Ok(Self { inner })
    }
}

impl<P: Provider> Provider for Record<P> {
    fn identity(&self) -> ProviderIdentity {
        self.inner.identity()
    }
    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        self.inner.complete(request)
    }
}
