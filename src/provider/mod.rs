//! Model providers behind one object-safe trait.
//!
//! The run loop speaks only the neutral conversation types in `types`; each wire
//! module (`openai`, `anthropic`, `openrouter`) maps them to and from its own HTTP+SSE
//! protocol and keeps the exact request bytes so the store can keep them
//! content-addressed. `Scripted` replays recorded turns (tests and the offline demo) and
//! `Record` wraps a real provider to write such a script.
//!
//! The trait returns boxed futures rather than using `async fn` so that a
//! `Box<dyn Provider>` can be chosen at run time by the CLI and so that wrappers
//! (record, later retry and fallback) are providers themselves.

mod anthropic;
mod breaker;
mod error;
mod factory;
mod fallback;
mod http;
pub mod invalid_call;
mod openai;
mod openrouter;
mod price;
mod record;
pub mod reply_cut;
mod retry;
mod scripted;
mod sse;
mod types;

pub use anthropic::Anthropic;
pub use breaker::{BreakerState, PROBE_FAILED, StepAt, complete_with_breaker};
pub use error::{ProviderError, ProviderErrorKind};
pub use factory::{KEY_VARIABLES, MIN_KEY_LEN, ProviderFactoryError, build_provider};
pub use fallback::{ChainAttempt, ChainError, Fallback, complete_chain};
pub use http::HttpConfig;
pub use openai::{CompatibleWire, OpenAi, OpenAiCompatible};
pub use openrouter::OpenRouter;
pub use price::{ModelPrice, PriceTable};
pub use record::Record;
pub use retry::{
    MESSAGE_KEPT, RetryAttempt, RetryError, RetryPolicy, complete_with_retry, kept_message,
    refused_wait, retry_after_from_text,
};
pub use scripted::{ScriptError, ScriptTurn, Scripted};
pub use types::{
    Completion, CompletionRequest, ContentBlock, Cost, CostSource, Message, ProviderIdentity,
    ReasoningEffort, Role, StopReason, ThinkingSettings, TokenEstimate, TokenSource, ToolSpec,
    Usage,
};

use futures_util::future::BoxFuture;

/// A model endpoint that turns a conversation into the next assistant turn.
///
/// Implementations stream internally (SSE) and return the assembled turn; the raw
/// request bytes they sent are in [`Completion::request_body`] so the store can keep
/// them. Implementations must be deterministic in the bytes they send for the same
/// request (stable key order), which is what makes prompt caching possible.
///
/// # Cancel safety
/// Dropping the returned future aborts the HTTP request; nothing is recorded.
///
/// ```
/// use io_harness::provider::{CompletionRequest, Message, Provider, Scripted, ScriptTurn};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let provider = Scripted::new(vec![ScriptTurn::text("done")]);
/// let request = CompletionRequest::new("scripted", vec![Message::user("hello")]);
/// let turn = provider.complete(&request).await.unwrap();
/// assert_eq!(turn.text(), "done");
/// # });
/// ```
pub trait Provider: Send + Sync {
    /// Who answers: provider kind, model and endpoint, stored with the run.
    fn identity(&self) -> ProviderIdentity;

    /// Secret values this provider holds (API keys), so the harness can redact them
    /// from everything it stores or prints.
    fn secrets(&self) -> Vec<String> {
        Vec::new()
    }

    /// Where the endpoint in [`ProviderIdentity::base_url`] came from, for the record of
    /// the policy decision that lets the harness connect to it.
    fn endpoint_source(&self) -> Option<String> {
        None
    }

    /// Sends one request and returns the assembled assistant turn.
    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>>;

    /// The provider a sub-agent named `name` talks to. `None`, the default, means this
    /// same provider: a child uses its parent's model. A [`Scripted`] provider answers
    /// with the turns scripted for that agent, since its turns are counted per
    /// conversation and a child's conversation starts afresh.
    fn for_agent(&self, name: &str) -> Option<std::sync::Arc<dyn Provider>> {
        let _ = name;
        None
    }
}

impl<P: Provider + ?Sized> Provider for Box<P> {
    fn identity(&self) -> ProviderIdentity {
        (**self).identity()
    }
    fn for_agent(&self, name: &str) -> Option<std::sync::Arc<dyn Provider>> {
        (**self).for_agent(name)
    }
    fn secrets(&self) -> Vec<String> {
        (**self).secrets()
    }
    fn endpoint_source(&self) -> Option<String> {
        (**self).endpoint_source()
    }
    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        (**self).complete(request)
    }
}

impl<P: Provider + ?Sized> Provider for std::sync::Arc<P> {
    fn identity(&self) -> ProviderIdentity {
        (**self).identity()
    }
    fn for_agent(&self, name: &str) -> Option<std::sync::Arc<dyn Provider>> {
        (**self).for_agent(name)
    }
    fn secrets(&self) -> Vec<String> {
        (**self).secrets()
    }
    fn endpoint_source(&self) -> Option<String> {
        (**self).endpoint_source()
    }
    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        (**self).complete(request)
    }
}
