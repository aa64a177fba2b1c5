//! Anthropic's Messages API over SSE.
//!
//! The request is `POST {base_url}/v1/messages` (the base URL has no `/v1`) with
//! `x-api-key` and `anthropic-version: 2023-06-01`. Extended thinking is enabled
//! with `ThinkingSettings::budget_tokens`; its blocks come back with signatures and
//! go back unchanged in later turns. Usage counts uncached input, output, and
//! cache reads and writes separately; the cost comes from the price table.

mod request;
mod stream;

use futures_util::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName};

use super::Provider;
use super::error::{ProviderError, ProviderErrorKind};
use super::http::{HttpClient, HttpConfig, header_value};
use super::types::{Completion, CompletionRequest, ProviderIdentity};

/// The API version this client speaks.
pub(crate) const ANTHROPIC_VERSION: &str = "2023-06-01";

const KIND: &str = "anthropic";

/// Anthropic's Messages API.
///
/// ```
/// use io_harness::provider::{Anthropic, HttpConfig, Provider};
/// let p = Anthropic::new(HttpConfig::new("https://api.anthropic.com", "claude-sonnet-4-5", Some("k".into()))).unwrap();
/// assert_eq!(p.identity().kind, "anthropic");
/// ```
#[derive(Debug)]
pub struct Anthropic {
    http: HttpClient,
}

impl Anthropic {
    /// Builds the client. Fails only when the key cannot be sent as a header or the
    /// TLS setup fails.
    pub fn new(cfg: HttpConfig) -> Result<Self, ProviderError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            header_value(KIND, "anthropic-version", ANTHROPIC_VERSION, false)?,
        );
        if let Some(key) = cfg.key() {
            headers.insert(
                HeaderName::from_static("x-api-key"),
                header_value(KIND, "x-api-key", key, true)?,
            );
        }
        Ok(Self {
            http: HttpClient::new(cfg, KIND, headers)?,
        })
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
        let body = request::body(request, model).map_err(|e| {
            self.http.error(
                ProviderErrorKind::Request,
                format!("cannot encode the request: {e}"),
            )
        })?;
        let mut events = self
            .http
            .post_sse(
                &cfg.url("/v1/messages"),
                body.clone(),
                super::http::anthropic_keep_alive,
            )
            .await?;
        let mut assembler = stream::Assembler::new(KIND);
        // Past this point the server accepted the request: a failure loses its reply.
        let (turn, cut_at) = async {
            loop {
                let Some(event) = events.next().await? else {
                    if events.was_cut() {
                        return Ok((
                            assembler.finish()?,
                            Some((cfg.max_reply_bytes, events.status())),
                        ));
                    }
                    return Err(events.cut_short("`message_stop`"));
                };
                if assembler.on_event(&event.event, &event.data)? {
                    break;
                }
            }
            Ok((assembler.finish()?, None))
        }
        .await
        .map_err(|e| super::error::lost(events.answered(e)))?;
        let (content, stop_reason) = match cut_at {
            Some((limit, _)) => super::reply_cut::cut_turn(turn.content, limit),
            None => (turn.content, turn.stop_reason),
        };
        Ok(Completion {
            cost: cfg.price(turn.model.as_deref(), model, &turn.usage),
            content,
            stop_reason,
            usage: turn.usage,
            price: cfg.model_price(turn.model.as_deref(), model),
            model: turn.model.unwrap_or_else(|| model.to_string()),
            request_body: Some(body),
            model_call: None,
            cut_at: cut_at.map(|c| c.0),
            cut_status: cut_at.map(|c| c.1),
        })
    }
}

impl Provider for Anthropic {
    fn identity(&self) -> ProviderIdentity {
        let cfg = self.http.cfg();
        ProviderIdentity {
            kind: KIND.into(),
            model: cfg.model.clone(),
            base_url: Some(cfg.base_url.clone()),
        }
    }

    fn endpoint_source(&self) -> Option<String> {
        self.http.cfg().endpoint_source.clone()
    }

    fn secrets(&self) -> Vec<String> {
        self.http
            .cfg()
            .key()
            .map(str::to_string)
            .into_iter()
            .collect()
    }

    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async move {
            self.complete_unredacted(request)
                .await
                .map_err(|e| self.http.redact(e))
        })
    }
}
