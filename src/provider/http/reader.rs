//! Reads the events of a streaming reply, one body chunk at a time, each under the
//! idle timeout, and tells a body that ended early from a complete one.

use std::collections::VecDeque;
use std::time::Duration;

use super::error_chain;
use crate::provider::error::{ProviderError, ProviderErrorKind};
use crate::provider::sse::{SseEvent, SseParser};

/// The events of a streaming reply, read chunk by chunk under the idle timeout.
#[derive(Debug)]
pub(crate) struct EventReader {
    response: reqwest::Response,
    parser: SseParser,
    queue: VecDeque<SseEvent>,
    idle: Duration,
    /// When real content last arrived (or the stream started).
    quiet_since: tokio::time::Instant,
    provider: &'static str,
    tail: Option<&'static str>,
    ended: bool,
    /// Body bytes still allowed (`max_reply_bytes` less what was read).
    room: u64,
    /// Whether the body was cut at the limit.
    cut: bool,
    /// Which events say nothing (keep-alives of the protocol), so they do not reset
    /// the idle clock.
    empty: fn(&SseEvent) -> bool,
}

/// Anthropic's `ping` events are keep-alives as much as comments are (adversary
/// A13g: a stream of pings alone never went idle).
pub(crate) fn anthropic_keep_alive(e: &SseEvent) -> bool {
    e.event == "ping"
}

/// An OpenAI chunk that carries nothing — no role (the reply's first chunk), no text,
/// no tool-call part, no reasoning, no finish reason, no usage — is a keep-alive in all but name (adversary A13e: a
/// stream of empty-delta chunks never went idle). Only short chunks are looked into:
/// a long one carries something.
pub(crate) fn openai_keep_alive(e: &SseEvent) -> bool {
    const SHORT: usize = 1024;
    if e.data.len() > SHORT || e.data.trim() == "[DONE]" {
        return false;
    }
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&e.data) else {
        // Not JSON: the decoder decides what it is; it is not silence.
        return false;
    };
    let says = |x: Option<&serde_json::Value>| match x {
        None | Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::String(s)) => !s.is_empty(),
        Some(serde_json::Value::Array(a)) => !a.is_empty(),
        Some(serde_json::Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    };
    if says(v.get("usage")) || says(v.get("error")) {
        return false;
    }
    let choices = v.get("choices").and_then(|c| c.as_array());
    choices.is_some_and(|cs| {
        cs.iter().all(|c| {
            let d = c.get("delta");
            !says(c.get("finish_reason"))
                && ![
                    "role",
                    "content",
                    "tool_calls",
                    "reasoning_content",
                    "reasoning",
                    "refusal",
                ]
                .iter()
                .any(|k| says(d.and_then(|d| d.get(*k))))
        })
    })
}

impl EventReader {
    pub(super) fn new(
        response: reqwest::Response,
        idle: Duration,
        max_bytes: u64,
        provider: &'static str,
        empty: fn(&SseEvent) -> bool,
    ) -> Self {
        Self {
            response,
            parser: SseParser::new(),
            queue: VecDeque::new(),
            idle,
            quiet_since: tokio::time::Instant::now(),
            provider,
            tail: None,
            ended: false,
            room: max_bytes,
            cut: false,
            empty,
        }
    }

    /// The next event; `None` when the body has ended.
    ///
    /// # Cancel safety
    /// Cancel safe: a chunk is parsed in full before any await, so dropping the future
    /// loses nothing already received.
    pub(crate) async fn next(&mut self) -> Result<Option<SseEvent>, ProviderError> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Ok(Some(e));
            }
            if self.ended {
                return Ok(None);
            }
            // Idle is measured from the last real content: keep-alive comments alone
            // (a server that only says `: ping`) do not keep a stream alive.
            let left = self.idle.saturating_sub(self.quiet_since.elapsed());
            match tokio::time::timeout(left, self.response.chunk()).await {
                Err(_) => {
                    let msg = format!(
                        "no content for {:?} (idle timeout; keep-alive comments do not count)",
                        self.idle
                    );
                    return Err(self.failed(ProviderErrorKind::Timeout, msg));
                }
                Ok(Err(e)) => {
                    let msg = format!("the stream broke: {}", error_chain(&e));
                    return Err(self.failed(ProviderErrorKind::Transport, msg));
                }
                Ok(Ok(None)) => {
                    self.ended = true;
                    self.tail = self.parser.finish();
                }
                Ok(Ok(Some(mut chunk))) => {
                    let len = chunk.len() as u64;
                    if len > self.room {
                        // Past the limit nothing more is read: what arrived up to it is
                        // parsed, and the body ends here, marked cut.
                        chunk.truncate(usize::try_from(self.room).unwrap_or(usize::MAX));
                        self.cut = true;
                        self.ended = true;
                    }
                    self.room = self.room.saturating_sub(len);
                    let before = self.parser.content_seen();
                    let mut events = Vec::new();
                    if let Err(e) = self.parser.push(&chunk, &mut events) {
                        return Err(self.failed(ProviderErrorKind::Malformed, e.to_string()));
                    }
                    let real = events.iter().any(|e| !(self.empty)(e));
                    let partial = events.is_empty() && self.parser.content_seen() > before;
                    if real || partial {
                        self.quiet_since = tokio::time::Instant::now();
                    }
                    self.queue.extend(events);
                    if self.cut {
                        self.tail = self.parser.finish();
                    }
                }
            }
        }
    }

    /// The status the stream's headers came with.
    pub(crate) fn status(&self) -> u16 {
        self.response.status().as_u16()
    }

    /// Whether the body was cut at `max_reply_bytes` (then [`EventReader::next`] has
    /// returned `None` without the protocol's terminator).
    pub(crate) fn was_cut(&self) -> bool {
        self.cut
    }

    /// Whether the body ended cleanly between two events (nothing half-sent left over).
    pub(crate) fn ended_between_events(&self) -> bool {
        self.ended && self.tail.is_none()
    }

    /// The error for a body that ended before the protocol's `terminator`.
    ///
    /// Kind `Transport`, not `Malformed`: everything received parsed, the reply is
    /// only incomplete, which is what a connection cut by a proxy or a restarting
    /// server looks like, and a second attempt usually succeeds. `Malformed` is kept
    /// for replies that are wrong in themselves, which retrying would not fix.
    pub(crate) fn cut_short(&self, terminator: &str) -> ProviderError {
        let tail = self
            .tail
            .map(|t| format!(", leaving {t}"))
            .unwrap_or_default();
        let msg = format!("the stream ended before {terminator}{tail}");
        self.failed(ProviderErrorKind::Transport, msg)
    }

    /// `e`, raised while this stream was read (by a decoder of its events), with the
    /// status its headers came with when it names none.
    pub(crate) fn answered(&self, mut e: ProviderError) -> ProviderError {
        e.status = e.status.or(Some(self.response.status().as_u16()));
        e
    }

    /// An error of this stream, carrying the status its headers came with (a `200`
    /// whose body then broke is recorded as the 200 it was, not as no answer at all).
    pub(crate) fn failed(&self, kind: ProviderErrorKind, msg: String) -> ProviderError {
        let mut e = ProviderError::new(kind, self.provider, msg);
        e.status = Some(self.response.status().as_u16());
        e
    }
}
