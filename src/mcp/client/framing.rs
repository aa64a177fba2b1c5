//! The framing of JSON-RPC over a stdio server's stdout — one message a line — done
//! here rather than by rmcp, because rmcp's drops what it cannot use without a word:
//! a line over its bound is discarded and one that is not a JSON-RPC message is
//! ignored, so the call it answered waits out its whole timeout and is recorded as a
//! timeout. Here each such line is a [`Fault`] the transport answers the waiting call
//! with at once, and the record says what it was.
//!
//! Pure functions of bytes, so they are fuzzed (`tests` below): [`Lines`] splits a
//! stream into lines and never holds more than its bound of one; [`classify`] says
//! what one line is.

use rmcp::model::{RequestId, ServerJsonRpcMessage};

/// The longest message accepted from a server: 16 MiB, the bound rmcp's HTTP client
/// keeps too, so a result is too large over either transport alike.
pub(crate) const MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// Bytes of a line kept to find its `id` in, once it is known to be too long.
const HEAD: usize = 512;

/// Why a line is not a message the client can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// Longer than [`MAX_MESSAGE`].
    TooLarge,
    /// Not JSON, or JSON that is not a JSON-RPC message.
    Malformed,
}

impl FaultKind {
    /// The call outcome recorded for it.
    pub(crate) fn outcome(self) -> &'static str {
        match self {
            Self::TooLarge => "too_large",
            Self::Malformed => "protocol_error",
        }
    }
}

/// A line that is not a usable message: what it is, the request it seems to
/// answer (if an `id` could be read), and why, in words.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fault {
    pub(crate) kind: FaultKind,
    pub(crate) id: Option<RequestId>,
    pub(crate) why: String,
}

/// What one line from the server is.
#[derive(Debug)]
pub(crate) enum Frame {
    Message(Box<ServerJsonRpcMessage>),
    Fault(Fault),
    /// A blank line, stray text that does not start as JSON does, or a notification
    /// or request of a kind this client does not know: nothing waits on it.
    Skip,
}

/// One line cut from the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line {
    /// A whole line, without its `\n`.
    Whole(Vec<u8>),
    /// A line that grew past the bound: its first bytes (to find its `id` in); the
    /// rest, up to its `\n`, is dropped as it arrives.
    TooLong(Vec<u8>),
}

/// Splits a byte stream into lines, holding at most `max` bytes of one.
#[derive(Debug)]
pub(crate) struct Lines {
    buf: Vec<u8>,
    max: usize,
    /// Inside a line already reported too long: dropping bytes up to its `\n`.
    discarding: bool,
}

impl Lines {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            buf: Vec::new(),
            max,
            discarding: false,
        }
    }

    /// Bytes of the line still arriving that are held (never more than the bound).
    pub(crate) fn held(&self) -> usize {
        self.buf.len()
    }

    /// Cuts `chunk` into lines, appending those it completes to `out`. A line is
    /// reported too long as soon as it passes the bound, not when it ends: a server
    /// that never ends its line is caught as early as one that does.
    pub(crate) fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Line>) {
        while !chunk.is_empty() {
            let newline = chunk.iter().position(|&b| b == b'\n');
            let (piece, rest) = match newline {
                Some(i) => (&chunk[..i], &chunk[i + 1..]),
                None => (chunk, &[][..]),
            };
            chunk = rest;
            if self.discarding {
                self.discarding = newline.is_none();
                continue;
            }
            if self.buf.len() + piece.len() > self.max {
                let keep = HEAD.saturating_sub(self.buf.len()).min(piece.len());
                self.buf.extend_from_slice(&piece[..keep]);
                self.buf.truncate(HEAD);
                out.push(Line::TooLong(std::mem::take(&mut self.buf)));
                self.discarding = newline.is_none();
                continue;
            }
            self.buf.extend_from_slice(piece);
            if newline.is_some() {
                out.push(Line::Whole(std::mem::take(&mut self.buf)));
            }
        }
    }
}

/// What a whole line is: a message, a fault, or nothing to act on.
pub(crate) fn classify(line: &[u8]) -> Frame {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line);
    let start = trim_start(line);
    // A blank line, or stray output that was never meant as a message (a server's
    // banner or log line on stdout; rmcp ignores them too): nothing to act on. A
    // reply cut short or mangled still starts as JSON does.
    if !start.starts_with(b"{") && !start.starts_with(b"[") {
        return Frame::Skip;
    }
    let err = match serde_json::from_slice::<ServerJsonRpcMessage>(line) {
        Ok(m) => return Frame::Message(Box::new(m)),
        Err(e) => e,
    };
    match serde_json::from_slice::<serde_json::Value>(line) {
        // A request or notification from the server that we cannot read answers
        // none of our calls.
        Ok(v) if v.get("method").is_some() => Frame::Skip,
        Ok(v) => Frame::Fault(Fault {
            kind: FaultKind::Malformed,
            id: v.get("id").and_then(id_of),
            why: format!("the reply is not a JSON-RPC message: {err}"),
        }),
        Err(_) => Frame::Fault(Fault {
            kind: FaultKind::Malformed,
            id: scan_id(line),
            why: format!("the reply is not JSON: {err}"),
        }),
    }
}

/// The fault of a line cut off at the bound, from its first bytes.
pub(crate) fn too_large(head: &[u8]) -> Fault {
    Fault {
        kind: FaultKind::TooLarge,
        id: scan_id(head),
        why: format!(
            "result too large: the reply is longer than {} MiB",
            MAX_MESSAGE / (1024 * 1024)
        ),
    }
}

fn id_of(v: &serde_json::Value) -> Option<RequestId> {
    match v {
        serde_json::Value::Number(n) => n.as_i64().map(RequestId::Number),
        serde_json::Value::String(s) => Some(RequestId::String(s.as_str().into())),
        _ => None,
    }
}

/// The value of the first `"id":` member in bytes that are not (or not all) JSON: a
/// guess, which the transport trusts only when it names a request still waiting.
pub(crate) fn scan_id(bytes: &[u8]) -> Option<RequestId> {
    let mut from = 0;
    while let Some(at) = find(&bytes[from..], b"\"id\"") {
        let mut rest = &bytes[from + at + 4..];
        from += at + 4;
        rest = trim_start(rest);
        let Some(after_colon) = rest.strip_prefix(b":") else {
            continue;
        };
        let value = trim_start(after_colon);
        if let Some(s) = value.strip_prefix(b"\"") {
            let end = s.iter().position(|&b| b == b'"' || b == b'\\')?;
            if s[end] != b'"' {
                return None;
            }
            let text = std::str::from_utf8(&s[..end]).ok()?;
            return Some(RequestId::String(text.into()));
        }
        let end = value
            .iter()
            .position(|b| !(b.is_ascii_digit() || *b == b'-'))
            .unwrap_or(value.len());
        let text = std::str::from_utf8(&value[..end]).ok()?;
        return text.parse().ok().map(RequestId::Number);
    }
    None
}

fn trim_start(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &b[n..]
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests;
