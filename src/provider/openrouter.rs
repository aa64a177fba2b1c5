//! OpenRouter: the OpenAI Chat Completions protocol ([`ChatClient`]) with its own
//! touches, and nothing duplicated:
//!
//! * attribution headers `HTTP-Referer` and `X-Title`, which name the app in
//!   OpenRouter's rankings and logs;
//! * `usage: {include: true}` in the body, so the final chunk reports what the call
//!   cost (`usage.cost`, USD): that figure is used as is (`CostSource::Reported`);
//!   when it is absent the price table is used, else the cost is unknown;
//! * the output cap as `max_tokens`, the field OpenRouter documents.

use futures_util::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName};

use super::Provider;
use super::error::ProviderError;
use super::http::{HttpConfig, header_value};
use super::openai::{ChatClient, Flavor, MaxTokensField};
use super::types::{Completion, CompletionRequest, ProviderIdentity};

/// The `HTTP-Referer` OpenRouter attributes requests to: the package's homepage or
/// repository as Cargo.toml declares it, else the package name.
pub(crate) const ATTRIBUTION_URL: &str = first_nonempty(
    env!("CARGO_PKG_HOMEPAGE"),
    first_nonempty(env!("CARGO_PKG_REPOSITORY"), env!("CARGO_PKG_NAME")),
);
/// The `X-Title` OpenRouter shows for the app.
pub(crate) const ATTRIBUTION_TITLE: &str = env!("CARGO_PKG_NAME");

const fn first_nonempty(a: &'static str, b: &'static str) -> &'static str {
    if a.is_empty() { b } else { a }
}

/// OpenRouter's OpenAI-compatible API (`base_url` like `https://openrouter.ai/api/v1`).
///
/// ```
/// use io_harness::provider::{HttpConfig, OpenRouter, Provider};
/// let p = OpenRouter::new(HttpConfig::new("https://openrouter.ai/api/v1", "openai/gpt-5-mini", None)).unwrap();
/// assert_eq!(p.identity().kind, "openrouter");
/// ```
#[derive(Debug)]
pub struct OpenRouter {
    chat: ChatClient,
}

impl OpenRouter {
    const FLAVOR: Flavor = Flavor {
        kind: "openrouter",
        max_tokens: MaxTokensField::MaxTokens,
        usage_accounting: true,
        assistant_content: false,
    };

    /// Builds the client with the attribution headers.
    pub fn new(cfg: HttpConfig) -> Result<Self, ProviderError> {
        let kind = Self::FLAVOR.kind;
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("http-referer"),
            header_value(kind, "HTTP-Referer", ATTRIBUTION_URL, false)?,
        );
        headers.insert(
            HeaderName::from_static("x-title"),
            header_value(kind, "X-Title", ATTRIBUTION_TITLE, false)?,
        );
        Ok(Self {
            chat: ChatClient::new(cfg, Self::FLAVOR, headers)?,
        })
    }
}

impl Provider for OpenRouter {
    fn identity(&self) -> ProviderIdentity {
        self.chat.identity()
    }

    fn secrets(&self) -> Vec<String> {
        self.chat.secrets()
    }

    fn endpoint_source(&self) -> Option<String> {
        self.chat.endpoint_source()
    }

    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(self.chat.complete(request))
    }
}
