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
    /// Send `content` on every assistant message, tool calls or not: llama.cpp's
    /// server answers an assistant message without it with a 500.
    pub assistant_content: bool,
}

/// How a request goes out on the wire: what a compatible server is told about tools,
/// and whether it is asked for a stream. OpenAI and OpenRouter: `None` and a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompatibleWire {
    /// Sent as `tool_choice` when tools are offered.
    pub tool_choice: crate::contract::ToolChoice,
    /// Ask for a stream (`false`: one JSON reply under the whole-request timeout).
    pub stream: bool,
}

/// A Chat Completions client of one flavor.
#[derive(Debug)]
pub(crate) struct ChatClient {
    http: HttpClient,
    flavor: Flavor,
    wire: Option<CompatibleWire>,
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
            wire: None,
        })
    }

    /// The same client sending `wire`'s `tool_choice` and stream setting.
    pub(crate) fn with_wire(mut self, wire: CompatibleWire) -> Self {
        self.wire = Some(wire);
        self
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
        let options = request::Options {
            tool_choice: self.wire.map(|w| w.tool_choice),
            stream: self.wire.is_none_or(|w| w.stream),
        };
        let body = request::body(request, model, &self.flavor, options).map_err(|e| {
            self.http.error(
                super::ProviderErrorKind::Request,
                format!("cannot encode the request: {e}"),
            )
        })?;
        let url = cfg.url("/chat/completions");
        let (turn, cut_at) = if options.stream {
            self.streamed(&url, body.clone()).await?
        } else {
            self.whole(&url, body.clone()).await?
        };
        let (content, stop_reason) = match cut_at {
            Some((limit, _)) => super::reply_cut::cut_turn(turn.content, limit),
            None => (turn.content, turn.stop_reason),
        };
        let cost = match turn.reported_cost {
            Some(usd) => Cost {
                usd: Some(usd),
                source: CostSource::Reported,
            },
            None => cfg.price(turn.model.as_deref(), model, &turn.usage),
        };
        Ok(Completion {
            content,
            stop_reason,
            usage: turn.usage,
            cost,
            price: cfg.model_price(turn.model.as_deref(), model),
            model: turn.model.unwrap_or_else(|| model.to_string()),
            request_body: Some(body),
            model_call: None,
            cut_at: cut_at.map(|c| c.0),
            cut_status: cut_at.map(|c| c.1),
        })
    }

    /// A streamed call: the chunks assembled until `[DONE]`, or until the reply was
    /// cut at `max_reply_bytes` (then the limit is returned beside the turn).
    async fn streamed(
        &self,
        url: &str,
        body: Vec<u8>,
    ) -> Result<(stream::Assembled, Option<(u64, u16)>), ProviderError> {
        let mut events = self
            .http
            .post_sse(url, body, super::http::openai_keep_alive)
            .await?;
        let mut assembler = stream::Assembler::new(self.http.provider());
        // Past this point the server accepted the request: a failure loses its reply.
        async {
            let mut any = false;
            loop {
                let Some(event) = events.next().await? else {
                    if events.was_cut() {
                        return Ok((assembler.finish()?, Some((self.limit(), events.status()))));
                    }
                    // Found by scripts/real-model: llama-cpp-python, asked to stream with
                    // tools offered, fails inside its stream ("Automatic streaming tool
                    // choice is not supported", in its own log only) and closes it empty.
                    if !any && events.ended_between_events() {
                        return Err(events.cut_short(
                            "its first event (the server accepted the request, then closed \
                             the stream empty; a server that cannot stream this request says \
                             why only in its own log — `[provider] stream = false` asks for \
                             one JSON reply instead)",
                        ));
                    }
                    // A server that closes the body cleanly after the choice's
                    // `finish_reason`, without `data: [DONE]` (llama-cpp-python does,
                    // with tools offered), has sent its whole reply.
                    if events.ended_between_events() && assembler.has_finished() {
                        break;
                    }
                    return Err(events.cut_short("`data: [DONE]`"));
                };
                any = true;
                if assembler.on_data(&event.data)? {
                    break;
                }
            }
            Ok((assembler.finish()?, None))
        }
        .await
        .map_err(|e| super::error::lost(events.answered(e)))
    }

    /// An unstreamed call (`stream = false`): one `chat.completion` object, read as
    /// the one chunk of a stream. A body cut at the limit is not JSON: the turn is
    /// then empty, and cut.
    async fn whole(
        &self,
        url: &str,
        body: Vec<u8>,
    ) -> Result<(stream::Assembled, Option<(u64, u16)>), ProviderError> {
        let reply = self.http.post_whole(url, body).await?;
        let mut assembler = stream::Assembler::new(self.http.provider());
        if reply.cut {
            return Ok((assembler.finish()?, Some((self.limit(), reply.status))));
        }
        let text = String::from_utf8_lossy(&reply.body);
        // A body that is not the reply still came with its status (adversary A21).
        let answered = |mut e: ProviderError| {
            e.status = e.status.or(Some(reply.status));
            super::error::lost(e)
        };
        let chunk = stream::completion_as_chunk(&text).map_err(answered)?;
        assembler.on_data(&chunk).map_err(answered)?;
        Ok((assembler.finish()?, None))
    }

    fn limit(&self) -> u64 {
        self.http.cfg().max_reply_bytes
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
        assistant_content: false,
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

/// A server that speaks Chat Completions but is not OpenAI — llama.cpp's server, vLLM,
/// Ollama, LM Studio (`kind = "openai-compatible"`). What sets it apart from
/// [`OpenAi`], all named by the operator and nothing detected: the output cap as
/// `max_tokens` (such servers ignore `max_completion_tokens`), `content` on every
/// assistant message, `tool_choice` sent with the tools (llama.cpp produces no tool
/// calls without it), and streaming optional.
///
/// ```
/// use io_harness::contract::ToolChoice;
/// use io_harness::provider::{CompatibleWire, HttpConfig, OpenAiCompatible, Provider};
/// let wire = CompatibleWire { tool_choice: ToolChoice::Auto, stream: false };
/// let p = OpenAiCompatible::new(HttpConfig::new("http://127.0.0.1:8080/v1", "local", None), wire).unwrap();
/// assert_eq!(p.identity().kind, "openai-compatible");
/// ```
#[derive(Debug)]
pub struct OpenAiCompatible {
    chat: ChatClient,
}

impl OpenAiCompatible {
    const FLAVOR: Flavor = Flavor {
        kind: "openai-compatible",
        max_tokens: MaxTokensField::MaxTokens,
        usage_accounting: false,
        assistant_content: true,
    };

    /// Builds the client.
    pub fn new(cfg: HttpConfig, wire: CompatibleWire) -> Result<Self, ProviderError> {
        Ok(Self {
            chat: ChatClient::new(cfg, Self::FLAVOR, HeaderMap::new())?.with_wire(wire),
        })
    }
}

impl Provider for OpenAiCompatible {
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
