//! Provider failures, each with a kind the retry layer can act on.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What kind of failure a provider call ended in. Only some kinds are worth retrying
/// ([`ProviderErrorKind::is_retryable`]); the rest escalate at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ProviderErrorKind {
    /// Connection refused, reset, TLS or DNS failure, or the stream broke mid-way.
    Transport,
    /// No byte arrived within the idle or request timeout.
    Timeout,
    /// HTTP 429.
    RateLimited,
    /// HTTP 5xx other than overload.
    Server,
    /// The provider said it is overloaded (Anthropic 529, `overloaded_error`).
    Overloaded,
    /// HTTP 401/403: the key is missing, wrong or not allowed.
    Auth,
    /// HTTP 4xx: the request itself is wrong.
    Request,
    /// The conversation no longer fits the model's context window.
    ContextOverflow,
    /// The reply could not be understood (bad JSON, broken SSE, missing fields).
    Malformed,
}

impl ProviderErrorKind {
    /// Whether a later identical request may succeed. A malformed reply is a fault
    /// on the wire (a tool call the model got wrong is not an error at all: see
    /// [`invalid_call`](crate::provider::invalid_call)), retried within its own bound
    /// ([`RetryPolicy::malformed_attempts`](crate::provider::RetryPolicy)).
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            Self::Transport
                | Self::Timeout
                | Self::RateLimited
                | Self::Server
                | Self::Overloaded
                | Self::Malformed
        )
    }

    /// Stable lowercase name (`rate-limited`, `context-overflow`…).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transport => "transport",
            Self::Timeout => "timeout",
            Self::RateLimited => "rate-limited",
            Self::Server => "server",
            Self::Overloaded => "overloaded",
            Self::Auth => "auth",
            Self::Request => "request",
            Self::ContextOverflow => "context-overflow",
            Self::Malformed => "malformed",
        }
    }
}

impl std::fmt::Display for ProviderErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed provider call.
#[derive(Debug, thiserror::Error)]
#[error("{provider} {kind}: {message}")]
pub struct ProviderError {
    /// Classification.
    pub kind: ProviderErrorKind,
    /// Which provider (`openai`, `anthropic`…).
    pub provider: String,
    /// HTTP status, when there was a response.
    pub status: Option<u16>,
    /// The server's `Retry-After`, when it sent one.
    pub retry_after: Option<Duration>,
    /// The provider's own error type or code (`overloaded_error`,
    /// `context_length_exceeded`…), when its reply named one.
    pub code: Option<String>,
    /// What went wrong, with secrets already redacted.
    pub message: String,
    /// A redirect the client refused to follow to another destination, as the
    /// `host:port` it pointed at: a connection nobody decided on, which the run records
    /// as a refused `net` action (C15).
    pub redirect: Option<String>,
    /// Whether the request reached the server and its reply was lost (the stream broke,
    /// went idle or could not be read; no answer came at all): its input was likely
    /// processed and billed, so the run counts the request's estimated input against
    /// the token budget. `false` for a request refused with an error status or never
    /// sent.
    pub reply_lost: bool,
}

/// `e`, marked as a failure that lost the reply of a request the server accepted.
pub(crate) fn lost(mut e: ProviderError) -> ProviderError {
    e.reply_lost = true;
    e
}

impl ProviderError {
    /// A new error of `kind`.
    pub fn new(kind: ProviderErrorKind, provider: &str, message: impl Into<String>) -> Self {
        Self {
            kind,
            provider: provider.to_string(),
            status: None,
            retry_after: None,
            code: None,
            message: message.into(),
            redirect: None,
            reply_lost: false,
        }
    }
}
