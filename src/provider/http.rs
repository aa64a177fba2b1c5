//! Shared HTTP plumbing of the wire clients: one POST that answers with an SSE
//! stream, and everything that can go wrong on the way turned into a
//! [`ProviderError`] of the right kind.
//!
//! Choices that hold for every provider:
//! * **No redirects.** A model API never redirects a POST; following one would send
//!   the API key to wherever the `Location` points. A 3xx is an error of kind
//!   `Request` that names the target; when the target is another host or port, the
//!   error carries it ([`ProviderError::redirect`]) and the run records it as a refused
//!   `net` action — no connection is made to a destination nobody decided on (C15).
//! * **Two timeouts.** `connect_timeout` bounds connecting (a failure there is
//!   `Transport`, like a refused connection) *and* waiting for the response headers
//!   (`Timeout`); `idle_timeout` bounds the silence between two body chunks
//!   (`Timeout`: a stream may legitimately run for minutes, but not stall). No
//!   overall deadline: the run's time budget owns that.
//! * **A bounded reply.** At most `max_reply_bytes` of a reply's body are read; the
//!   rest is never received, so a runaway reply costs that much memory and no more.
//! * **No secret in an error.** Every message built from a server's words or a
//!   transport error passes through [`HttpClient::redact`], which replaces the exact
//!   API key wherever it appears.

mod reader;
mod status;

use std::time::{Duration, SystemTime};

use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};

pub(crate) use reader::{EventReader, anthropic_keep_alive, openai_keep_alive};
pub(crate) use status::{classify_error_object, error_code};
use status::{classify_status, retry_after};

use super::error::{ProviderError, ProviderErrorKind};
use super::price::{ModelPrice, PriceTable};
use super::types::{Cost, Usage};

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
    /// Where `base_url` came from (`task file or --base-url`, `env OPENAI_BASE_URL`,
    /// `default`), recorded with the policy decision that lets the harness dial it.
    pub endpoint_source: Option<String>,
    /// The most bytes of a reply's body read: past it the reply is cut and the turn
    /// says so ([`crate::provider::Completion::cut_at`]), so a runaway reply can
    /// neither fill memory nor the store.
    pub max_reply_bytes: u64,
    /// The limit on a whole unstreamed call (an OpenAI-compatible server with
    /// `stream = false`), where no chunk arrives to measure silence by.
    pub request_timeout: Duration,
}

impl HttpConfig {
    /// A config with default timeouts (connect 30 s, idle 120 s, whole unstreamed
    /// request 10 min) and the default reply limit (8 MiB).
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
            endpoint_source: None,
            max_reply_bytes: crate::contract::DEFAULT_MAX_REPLY_BYTES,
            request_timeout: crate::contract::DEFAULT_REQUEST_TIMEOUT,
        }
    }

    /// `base_url` joined with `path` (which starts with `/`), with no doubled slash.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url.trim_end_matches('/'))
    }

    /// The price-table cost of a call: by the model that answered (a dated name
    /// falls back to its undated one), else by the model asked for, else unknown.
    /// The price [`HttpConfig::price`] applies: the answering model's, else the asked
    /// one's.
    pub(crate) fn model_price(&self, answered: Option<&str>, asked: &str) -> Option<ModelPrice> {
        answered
            .and_then(|m| self.prices.get(m))
            .or_else(|| self.prices.get(asked))
            .copied()
    }

    pub(crate) fn price(&self, answered: Option<&str>, asked: &str, usage: &Usage) -> Cost {
        match answered.map(|m| self.prices.cost(m, usage)) {
            Some(c) if c.usd.is_some() => c,
            _ => self.prices.cost(asked, usage),
        }
    }

    /// The API key, unless it is absent or blank.
    pub(crate) fn key(&self) -> Option<&str> {
        self.api_key.as_deref().filter(|k| !k.is_empty())
    }
}

/// How much of an error body is read and echoed: enough for any provider's error
/// object, not enough for a misbehaving server to fill memory or the trace.
const ERROR_BODY_LIMIT: usize = 64 * 1024;
/// How much of an error body a message echoes, in bytes: the record keeps 4 KiB of a
/// message, and the status prefix and the size note fit beside this much.
const ERROR_ECHO_BYTES: usize = 4000;

/// A reqwest client set up for one provider.
#[derive(Debug)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    cfg: HttpConfig,
    provider: &'static str,
}

impl HttpClient {
    /// A client sending `headers` (authentication, versions) with every request.
    pub(crate) fn new(
        cfg: HttpConfig,
        provider: &'static str,
        headers: HeaderMap,
    ) -> Result<Self, ProviderError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            // Never HTTP_PROXY/HTTPS_PROXY/ALL_PROXY: the `net` decision judged this host,
            // and a proxy from the environment would be dialed instead (adversary B2 of
            // issue 20: a trace and its bearer header went to the proxy).
            .no_proxy()
            .connect_timeout(cfg.connect_timeout)
            .user_agent(concat!("io-harness/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers)
            .build()
            .map_err(|e| {
                ProviderError::new(ProviderErrorKind::Transport, provider, error_chain(&e))
            })?;
        Ok(Self {
            client,
            cfg,
            provider,
        })
    }

    /// The configuration.
    pub(crate) fn cfg(&self) -> &HttpConfig {
        &self.cfg
    }

    /// The provider's name, for errors.
    pub(crate) fn provider(&self) -> &'static str {
        self.provider
    }

    /// An error of this provider.
    pub(crate) fn error(
        &self,
        kind: ProviderErrorKind,
        message: impl Into<String>,
    ) -> ProviderError {
        ProviderError::new(kind, self.provider, message)
    }

    /// What a message echoes of an error body: the key replaced in the whole body
    /// first, then cut (cut first, a key across the cut would keep its first part).
    fn echo(&self, body: &str) -> String {
        match self.cfg.key() {
            Some(key) if key.chars().count() >= super::factory::MIN_KEY_LEN => {
                excerpt(&body.replace(key, "[REDACTED]"))
            }
            _ => excerpt(body),
        }
    }

    /// `e` with the API key replaced wherever it appears in the message.
    pub(crate) fn redact(&self, mut e: ProviderError) -> ProviderError {
        // A value this short is no key (the factory refuses one); replacing it would
        // rewrite the message wherever its letters occur.
        if let Some(key) = self.cfg.key()
            && key.chars().count() >= super::factory::MIN_KEY_LEN
        {
            if e.message.contains(key) {
                e.message = e.message.replace(key, "[REDACTED]");
            }
            e.message = redact_cut_prefixes(&e.message, key);
        }
        e
    }

    /// POSTs `body` (JSON) to `url` and returns the reply's event stream, or the
    /// classified failure when the server did not answer with one.
    pub(crate) async fn post_sse(
        &self,
        url: &str,
        body: Vec<u8>,
        keep_alive: fn(&crate::provider::sse::SseEvent) -> bool,
    ) -> Result<EventReader, ProviderError> {
        // A server may hold its headers until the first token (llama.cpp working
        // through a long prompt): the wait for them is as long as any silence in the
        // stream may be, never shorter than the connect bound.
        let header_wait = self.cfg.idle_timeout.max(self.cfg.connect_timeout);
        let response = self
            .send(url, body, "text/event-stream", header_wait)
            .await?;
        let content_type = header_str(response.headers(), header::CONTENT_TYPE)
            .unwrap_or("")
            .to_ascii_lowercase();
        if !content_type.is_empty() && !content_type.starts_with("text/event-stream") {
            return Err(self.not_a_stream(response, content_type).await);
        }
        Ok(EventReader::new(
            response,
            self.cfg.idle_timeout,
            self.cfg.max_reply_bytes,
            self.provider,
            keep_alive,
        ))
    }

    /// POSTs `body` and reads the whole JSON reply, at most `max_reply_bytes` of it
    /// (`cut` says whether there was more), all under `request_timeout`: an unstreamed
    /// call has no chunks to measure silence by, so the whole call is what is bounded.
    pub(crate) async fn post_whole(
        &self,
        url: &str,
        body: Vec<u8>,
    ) -> Result<WholeReply, ProviderError> {
        let call = async {
            // Unstreamed, the server sends its headers only once the whole reply is
            // generated: the wait for them is the whole call's (`request_timeout`, which
            // bounds this block), not the 30 s a stream's first bytes get (a real
            // llama.cpp server on a busy CPU took longer than that).
            let mut response = self
                .send(url, body, "application/json", self.cfg.request_timeout)
                .await?;
            let status = response.status().as_u16();
            let limit = usize::try_from(self.cfg.max_reply_bytes).unwrap_or(usize::MAX);
            let mut buf = Vec::new();
            let mut cut = false;
            loop {
                match response.chunk().await {
                    Ok(Some(chunk)) => {
                        let room = limit - buf.len();
                        if chunk.len() > room {
                            buf.extend_from_slice(&chunk[..room]);
                            cut = true;
                            break;
                        }
                        buf.extend_from_slice(&chunk);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        let msg = format!("the reply broke: {}", error_chain(&e));
                        let e = self.with_status(ProviderErrorKind::Transport, status, msg);
                        return Err(super::error::lost(e));
                    }
                }
            }
            Ok(WholeReply {
                body: buf,
                cut,
                status,
            })
        };
        match tokio::time::timeout(self.cfg.request_timeout, call).await {
            Ok(r) => r,
            Err(_) => {
                let msg = format!(
                    "no complete reply within {:?} (request_timeout)",
                    self.cfg.request_timeout
                );
                Err(super::error::lost(
                    self.error(ProviderErrorKind::Timeout, msg),
                ))
            }
        }
    }

    /// Sends the POST and returns a success response, or the classified failure.
    async fn send(
        &self,
        url: &str,
        body: Vec<u8>,
        accept: &'static str,
        header_wait: std::time::Duration,
    ) -> Result<reqwest::Response, ProviderError> {
        let request = self
            .client
            .post(url)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, accept)
            .body(body);
        let response = match tokio::time::timeout(header_wait, request.send()).await {
            Err(_) => {
                // The request went out and nothing came back: the server may well have
                // processed it.
                let msg = format!("no response headers within {header_wait:?}");
                let mut e = self.error(ProviderErrorKind::Timeout, msg);
                e.reply_lost = true;
                return Err(e);
            }
            Ok(Err(e)) => {
                // A connection that could not be made (refused, DNS, TLS, or reqwest's
                // own connect timeout) is Transport; only a slow answer is Timeout.
                let kind = if e.is_timeout() && !e.is_connect() {
                    ProviderErrorKind::Timeout
                } else {
                    ProviderErrorKind::Transport
                };
                return Err(self.error(kind, error_chain(&e)));
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if status.is_redirection() {
            let to = header_str(response.headers(), header::LOCATION).unwrap_or("(no Location)");
            let msg = format!("HTTP {status}: redirect to {to} not followed");
            let mut e = self.with_status(ProviderErrorKind::Request, status.as_u16(), msg);
            e.redirect = redirect_target(response.url(), to);
            return Err(self.redact(e));
        }
        if !status.is_success() {
            return Err(self.status_error(response).await);
        }
        Ok(response)
    }

    fn with_status(&self, kind: ProviderErrorKind, status: u16, message: String) -> ProviderError {
        let mut e = self.error(kind, message);
        e.status = Some(status);
        e
    }

    async fn status_error(&self, response: reqwest::Response) -> ProviderError {
        let status = response.status().as_u16();
        let headers = response.headers();
        let wait = retry_after(
            header_str(headers, HeaderName::from_static("retry-after-ms")),
            header_str(headers, header::RETRY_AFTER),
            SystemTime::now(),
        );
        let body = self.read_capped(response).await;
        let mut e = self.with_status(
            classify_status(status, &body),
            status,
            format!("HTTP {status}: {}", self.echo(&body)),
        );
        e.retry_after = wait;
        e.code = status::body_error_code(&body);
        e
    }

    /// A success status without an event stream: a server that ignored `stream`, or
    /// one that reports errors in a JSON body with status 200.
    async fn not_a_stream(
        &self,
        response: reqwest::Response,
        content_type: String,
    ) -> ProviderError {
        let status = response.status().as_u16();
        let body = self.read_capped(response).await;
        let parsed: Option<serde_json::Value> = serde_json::from_str(&body).ok();
        if let Some(err) = parsed
            .as_ref()
            .and_then(|v| v.get("error"))
            .filter(|e| e.is_object())
        {
            let msg = format!("error reported with HTTP {status}: {}", self.echo(&body));
            let mut e = self.with_status(classify_error_object(err), status, msg);
            e.code = error_code(err);
            return e;
        }
        let msg = format!(
            "expected an event stream, got {content_type}: {}",
            self.echo(&body)
        );
        self.with_status(ProviderErrorKind::Malformed, status, msg)
    }

    /// Reads up to [`ERROR_BODY_LIMIT`] bytes of a body, each chunk under the idle
    /// timeout; what cannot be read is left out (the status still classifies).
    async fn read_capped(&self, mut response: reqwest::Response) -> String {
        let mut buf = Vec::new();
        while buf.len() < ERROR_BODY_LIMIT {
            match tokio::time::timeout(self.cfg.idle_timeout, response.chunk()).await {
                Ok(Ok(Some(chunk))) => buf.extend_from_slice(&chunk),
                _ => break,
            }
        }
        buf.truncate(ERROR_BODY_LIMIT);
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// An unstreamed reply's body, at most `max_reply_bytes` of it.
#[derive(Debug)]
pub(crate) struct WholeReply {
    /// The bytes read.
    pub body: Vec<u8>,
    /// Whether the body went on past the limit (and was not read further).
    pub cut: bool,
    /// The status its headers came with.
    pub status: u16,
}

/// A header made from a configured value; `secret` keeps it out of debug output.
pub(crate) fn header_value(
    provider: &str,
    name: &str,
    value: &str,
    secret: bool,
) -> Result<HeaderValue, ProviderError> {
    let mut v = HeaderValue::from_str(value).map_err(|_| {
        // Never echo the value: it may be the API key.
        ProviderError::new(
            ProviderErrorKind::Request,
            provider,
            format!("the {name} header value is not valid in HTTP"),
        )
    })?;
    v.set_sensitive(secret);
    Ok(v)
}

fn header_str(headers: &HeaderMap, name: HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `message` with every beginning of `key` that ends just before a cut (`…`, where an
/// excerpt of a server's text stops) replaced: a key the cut split keeps none of its
/// first part. Four characters or fewer are left (too short to say anything).
fn redact_cut_prefixes(message: &str, key: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find('…') {
        let before = &rest[..at];
        let longest = (5..key.len())
            .rev()
            .filter(|&n| key.is_char_boundary(n))
            .find(|&n| before.ends_with(&key[..n]));
        match longest {
            Some(n) => {
                out.push_str(&before[..before.len() - n]);
                out.push_str("[REDACTED]");
            }
            None => out.push_str(before),
        }
        out.push('…');
        rest = &rest[at + '…'.len_utf8()..];
    }
    out.push_str(rest);
    out
}

/// The first [`ERROR_ECHO_BYTES`] bytes of `body` (trimmed, cut on a character
/// boundary), saying how long the whole body was.
fn excerpt(body: &str) -> String {
    let body = body.trim();
    if body.len() <= ERROR_ECHO_BYTES {
        return body.to_string();
    }
    let mut end = ERROR_ECHO_BYTES;
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &body[..end], body.len())
}

/// At most 500 characters of `s`, for the stream parsers' error messages, ending in
/// `…` where it was cut (so a key the cut split is still found: `redact_cut_prefixes`).
pub(crate) fn cut(s: &str) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(500) {
        Some((i, _)) => format!("{}…", &s[..i]).into(),
        None => s.into(),
    }
}

/// An error with its causes, which is where reqwest says what really failed
/// (connection refused, reset, TLS).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// The `host:port` a redirect's `Location` (absolute or relative to `from`) points at,
/// when it is another destination than `from`'s; `None` for the same host and port or an
/// unreadable location.
pub(crate) fn redirect_target(from: &reqwest::Url, location: &str) -> Option<String> {
    let to = from.join(location).ok()?;
    let authority = |u: &reqwest::Url| -> Option<String> {
        // `host_str` keeps an IPv6 literal's brackets.
        Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?))
    };
    let target = authority(&to)?;
    (authority(from).as_deref() != Some(target.as_str())).then_some(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_joins_and_key_filters_blank() {
        let mut cfg = HttpConfig::new("http://h/v1/", "m", Some(String::new()));
        assert_eq!(cfg.url("/chat/completions"), "http://h/v1/chat/completions");
        assert_eq!(cfg.key(), None);
        cfg.api_key = Some("sk-1".into());
        assert_eq!(cfg.key(), Some("sk-1"));
    }

    #[test]
    fn redirect_targets_name_only_another_destination() {
        let from = reqwest::Url::parse("http://127.0.0.1:8080/v1/chat").unwrap();
        assert_eq!(
            redirect_target(&from, "http://evil.test/x").as_deref(),
            Some("evil.test:80")
        );
        assert_eq!(
            redirect_target(&from, "https://[::1]/x").as_deref(),
            Some("[::1]:443")
        );
        assert_eq!(redirect_target(&from, "/v2/chat"), None);
        assert_eq!(redirect_target(&from, "http://127.0.0.1:8080/other"), None);
        assert_eq!(
            redirect_target(&from, "http://127.0.0.1:9/other").as_deref(),
            Some("127.0.0.1:9")
        );
    }

    #[test]
    fn redaction_and_excerpt() {
        let client = HttpClient::new(
            HttpConfig::new("http://h", "m", Some("sk-secret".into())),
            "openai",
            HeaderMap::new(),
        )
        .unwrap();
        let e =
            client.redact(client.error(ProviderErrorKind::Auth, "bad key sk-secret (sk-secret)"));
        assert_eq!(e.message, "bad key [REDACTED] ([REDACTED])");
        // A value too short to be a key never rewrites text.
        let short = HttpClient::new(
            HttpConfig::new("http://h", "m", Some("e".into())),
            "openai",
            HeaderMap::new(),
        )
        .unwrap();
        let e = short.redact(short.error(ProviderErrorKind::Request, "model does not exist"));
        assert_eq!(e.message, "model does not exist");
        let long = "é".repeat(ERROR_ECHO_BYTES);
        let cut = excerpt(&long);
        assert!(
            cut.ends_with(&format!("… ({} bytes in all)", long.len())),
            "{cut}"
        );
        assert!(cut.len() < ERROR_ECHO_BYTES + 40);
        // Adversary A10h/A10i: a key straddling the cut kept its first part; the body
        // is redacted whole before it is cut.
        let key_client = HttpClient::new(
            HttpConfig::new("http://h", "m", Some("sk-SECRETKEY-a0123456789".into())),
            "openai",
            HeaderMap::new(),
        )
        .unwrap();
        let body = format!(
            "{}sk-SECRETKEY-a0123456789 tail",
            "E".repeat(ERROR_ECHO_BYTES - 10)
        );
        let echoed = key_client.echo(&body);
        assert!(!echoed.contains("sk-SECRET"), "{echoed}");
        // Any other excerpt cut inside the key (a stream parser's 500 characters).
        let e = key_client.redact(key_client.error(
            ProviderErrorKind::Malformed,
            "bad chunk: {\"k\": \"sk-SECRETKEY-a01…",
        ));
        assert_eq!(e.message, "bad chunk: {\"k\": \"[REDACTED]…");
        assert!(
            header_value("openai", "authorization", "Bearer a\nb", true)
                .unwrap_err()
                .message
                .contains("authorization")
        );
    }
}
