//! OpenAI Chat Completions over SSE, and the engine every OpenAI-compatible endpoint
//! shares ([`ChatClient`]): OpenRouter and local servers speak the same protocol and
//! differ only in a few request fields and headers, which a [`Flavor`] names.
//!
//! The request is `POST {base_url}/chat/completions` (the base URL includes `/v1`)
//! with `Authorization: Bearer <key>`, `stream: true` and
//! `stream_options.include_usage` so the last chunk carries the token counts.

mod request;
mod stream;

use futures_util::future::BoxFuture;
use reqwest::header::{self, HeaderMap};

use super::Provider;
use super::error::ProviderError;
use super::http::{HttpClient, HttpConfig, header_value};
use super::types::{Completion, CompletionRequest, Cost, CostSource, ProviderIdentity};
pub(crate) use request::MaxTokensField;

/// What sets one OpenAI-compatible service apart.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flavor {
    /// Provider kind, as in [`ProviderIdentity::kind`] and errors.
    pub kind: &'static str,
    /// The field that carries the output cap.
    pub max_tokens: MaxTokensField,
    /// Ask for usage accounting (`usage: {include: true}`, OpenRouter), which makes
    /// the server report the call's cost.
    pub usage_accounting: bool,
}

/// A Chat Completions client of one flavor.
#[derive(Debug)]
pub(crate) struct ChatClient {
    http: HttpClient,
    flavor: Flavor,
}

impl ChatClient {
    /// A client for `cfg`, sending `headers` besides the Bearer authorization.
    pub(crate) fn new(
        cfg: HttpConfig,
        flavor: Flavor,
        mut headers: HeaderMap,
    ) -> Result<Self, ProviderError> {
        if let Some(key) = cfg.key() {
            let value = header_value(flavor.kind, "authorization", &format!("Bearer {key}"), true)?;
            headers.insert(header::AUTHORIZATION, value);
        }
        Ok(Self {
            http: HttpClient::new(cfg, flavor.kind, headers)?,
            flavor,
        })
    }

    /// Kind, model and endpoint.
    pub(crate) fn identity(&self) -> ProviderIdentity {
        let cfg = self.http.cfg();
        ProviderIdentity {
            kind: self.flavor.kind.into(),
            model: cfg.model.clone(),
            base_url: Some(cfg.base_url.clone()),
        }
    }

    /// The API key, if any.
    pub(crate) fn endpoint_source(&self) -> Option<String> {
        self.http.cfg().endpoint_source.clone()
    }

    pub(crate) fn secrets(&self) -> Vec<String> {
        self.http
            .cfg()
            .key()
            .map(str::to_string)
            .into_iter()
            .collect()
    }

    /// One streamed call, its errors redacted of the key.
    pub(crate) async fn complete(
        &self,
        request: &CompletionRequest,
    ) -> Result<Completion, ProviderError> {
        self.complete_unredacted(request)
            .await
            .map_err(|e| self.http.redact(e))
    }

    async fn complete_unredacted(
        &self,
        request: &CompletionRequest,
    ) -> Result<Completion, ProviderError> {
        let cfg = self.http.cfg();
        let model = if request.model.is_empty() {
            cfg.model.as_str()
        } else {
            request.model.as_str()
        };
        let body = request::body(request, model, &self.flavor).map_err(|e| {
            self.http.error(
                super::ProviderErrorKind::Request,
                format!("cannot encode the request: {e}"),
            )
        })?;
        let mut events = self
            .http
            .post_sse(&cfg.url("/chat/completions"), body.clone())
            .await?;
        let mut assembler = stream::Assembler::new(self.http.provider());
        // Past this point the server accepted the request: a failure loses its reply.
        let turn = async {
            loop {
                let Some(event) = events.next().await? else {
                    return Err(events.cut_short("`data: [DONE]`"));
                };
                if assembler.on_data(&event.data)? {
                    break;
                }
            }
            assembler.finish()
        }
        .await
        .map_err(super::error::lost)?;
        let cost = match turn.reported_cost {
            Some(usd) => Cost {
                usd: Some(usd),
                source: CostSource::Reported,
            },
            None => cfg.price(turn.model.as_deref(), model, &turn.usage),
        };
        Ok(Completion {
            content: turn.content,
            stop_reason: turn.stop_reason,
            usage: turn.usage,
            cost,
            price: cfg.model_price(turn.model.as_deref(), model),
            model: turn.model.unwrap_or_else(|| model.to_string()),
            request_body: Some(body),
            model_call: None,
        })
    }
}

/// OpenAI's Chat Completions API (and any server compatible with it: point
/// `base_url` at it, `/v1` included).
///
/// ```
/// use io_harness::provider::{HttpConfig, OpenAi, Provider};
/// let p = OpenAi::new(HttpConfig::new("https://api.openai.com/v1", "gpt-5-mini", Some("sk-…".into()))).unwrap();
/// assert_eq!(p.identity().kind, "openai");
/// assert_eq!(p.secrets(), vec!["sk-…".to_string()]);
/// ```
#[derive(Debug)]
pub struct OpenAi {
    chat: ChatClient,
}

impl OpenAi {
    /// The flavor of OpenAI itself.
    const FLAVOR: Flavor = Flavor {
        kind: "openai",
        max_tokens: MaxTokensField::MaxCompletionTokens,
        usage_accounting: false,
    };

    /// Builds the client. Fails only when the key cannot be sent as a header or the
    /// TLS setup fails.
    pub fn new(cfg: HttpConfig) -> Result<Self, ProviderError> {
        Ok(Self {
            chat: ChatClient::new(cfg, Self::FLAVOR, HeaderMap::new())?,
        })
    }
}

impl Provider for OpenAi {
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
