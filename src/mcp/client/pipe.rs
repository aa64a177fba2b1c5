//! The transport rmcp speaks over a stdio server's pipes: messages out as lines on
//! its stdin, lines from its stdout through our [`framing`](super::framing). A line
//! that is not a usable reply is not dropped: the call it answers (found by its
//! `id`, or the only one waiting) gets an error reply at once, marked as ours so
//! that the call's record says `too_large` or `protocol_error` — a server cannot
//! forge the mark, which carries a per-connection token it never sees.

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};

use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ErrorCode, ErrorData, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::Transport;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::framing::{Fault, FaultKind, Frame, Line, Lines, MAX_MESSAGE, classify, too_large};
use super::lock;

/// The code of the error replies this transport makes up (JSON-RPC's range for
/// implementation-defined server errors).
const FAULT_CODE: i32 = -32099;
/// The key of the mark in such a reply's `data`.
const MARK: &str = "io_harness_fault";

/// What is shared between the transport (owned by rmcp's service task) and the
/// server that reads its marks and its last fault.
#[derive(Debug)]
pub(super) struct Faults {
    token: String,
    last: Mutex<Option<String>>,
    /// Why the server's stdout ended, once it has: nothing more can come from it.
    closed: Mutex<Option<String>>,
}

impl Faults {
    fn new() -> Arc<Self> {
        // A random token per connection: RandomState is seeded from the OS.
        let token = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Arc::new(Self {
            token: format!("{token:016x}"),
            last: Mutex::new(None),
            closed: Mutex::new(None),
        })
    }

    /// The fault an error reply stands for, if this transport made it up.
    pub(super) fn kind_of(&self, e: &ErrorData) -> Option<FaultKind> {
        let mark = e.data.as_ref()?.get(MARK)?;
        if mark.get("token")?.as_str()? != self.token {
            return None;
        }
        match mark.get("kind")?.as_str()? {
            "too_large" => Some(FaultKind::TooLarge),
            "protocol_error" => Some(FaultKind::Malformed),
            _ => None,
        }
    }

    /// Why the server's stdout ended, if it has (the server is gone for us even while
    /// its process lives: it can answer nothing more).
    pub(super) fn closed(&self) -> Option<String> {
        lock(&self.closed).clone()
    }

    /// Why the last faulty line was one (for a handshake that failed on it).
    pub(super) fn last(&self) -> Option<String> {
        lock(&self.last).clone()
    }

    fn reply(&self, fault: &Fault, id: RequestId) -> ServerJsonRpcMessage {
        let prefix = match fault.kind {
            FaultKind::TooLarge => "",
            FaultKind::Malformed => "protocol error: ",
        };
        ServerJsonRpcMessage::error(
            ErrorData::new(
                ErrorCode(FAULT_CODE),
                format!("{prefix}{}", fault.why),
                Some(serde_json::json!({
                    MARK: { "kind": fault.kind.outcome(), "token": self.token }
                })),
            ),
            Some(id),
        )
    }
}

type Writer<W> = Arc<tokio::sync::Mutex<Option<W>>>;

/// JSON-RPC over a child's stdout and stdin, one message a line.
pub(super) struct Pipe<R, W> {
    read: R,
    write: Writer<W>,
    lines: Lines,
    ready: VecDeque<ServerJsonRpcMessage>,
    /// Requests sent and not yet answered.
    waiting: Arc<Mutex<Vec<RequestId>>>,
    faults: Arc<Faults>,
    /// The server's stdout ended (or failed): the calls still waiting have been
    /// answered, and the next read ends the transport.
    ended: bool,
}

impl<R, W> Pipe<R, W> {
    pub(super) fn new(read: R, write: W) -> (Self, Arc<Faults>) {
        let faults = Faults::new();
        let pipe = Self {
            read,
            write: Arc::new(tokio::sync::Mutex::new(Some(write))),
            lines: Lines::new(MAX_MESSAGE),
            ready: VecDeque::new(),
            waiting: Arc::new(Mutex::new(Vec::new())),
            faults: faults.clone(),
            ended: false,
        };
        (pipe, faults)
    }

    /// Queues what a line is: a message, or error replies to the calls a faulty
    /// line answers.
    fn take(&mut self, line: Line) {
        let frame = match line {
            Line::Whole(bytes) => classify(&bytes),
            Line::TooLong(head) => Frame::Fault(too_large(&head)),
        };
        match frame {
            Frame::Skip => {}
            Frame::Message(m) => {
                if let JsonRpcMessage::Response(r) = &*m {
                    lock(&self.waiting).retain(|w| w != &r.id);
                } else if let JsonRpcMessage::Error(e) = &*m
                    && let Some(id) = &e.id
                {
                    lock(&self.waiting).retain(|w| w != id);
                }
                self.ready.push_back(*m);
            }
            Frame::Fault(f) => {
                tracing::warn!(fault = %f.why, "MCP server sent a reply the client cannot use");
                *lock(&self.faults.last) = Some(f.why.clone());
                for id in self.answered_by(&f) {
                    self.ready.push_back(self.faults.reply(&f, id));
                }
            }
        }
    }

    /// The server's stdout is done: every call still waiting is answered at once as a
    /// protocol error (adversary M5: a server that closed its stdout mid-reply, or
    /// without one, and stayed alive left the call to wait out its timeout).
    fn end(&mut self, why: String) {
        self.ended = true;
        let held = self.lines.held();
        let why = if held > 0 {
            format!("{why} after {held} bytes of an unfinished reply")
        } else {
            format!("{why} before replying")
        };
        let f = Fault {
            kind: FaultKind::Malformed,
            id: None,
            why,
        };
        *lock(&self.faults.last) = Some(f.why.clone());
        *lock(&self.faults.closed) = Some(f.why.clone());
        for id in self.answered_by(&f) {
            self.ready.push_back(self.faults.reply(&f, id));
        }
    }

    /// The calls a faulty line answers: the one its `id` names if that one waits;
    /// else the only one waiting; else every one waiting — any of them may be the
    /// one whose reply it was, and none can be told apart (each is told so).
    fn answered_by(&self, f: &Fault) -> Vec<RequestId> {
        let mut waiting = lock(&self.waiting);
        if let Some(id) = f.id.as_ref().filter(|id| waiting.contains(*id)) {
            let id = id.clone();
            waiting.retain(|w| w != &id);
            return vec![id];
        }
        std::mem::take(&mut *waiting)
    }
}

impl<R, W> Transport<RoleClient> for Pipe<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(r) = &item {
            lock(&self.waiting).push(r.id.clone());
        }
        let bytes = serde_json::to_vec(&item).map(|mut b| {
            b.push(b'\n');
            b
        });
        let write = self.write.clone();
        async move {
            let bytes = bytes.map_err(std::io::Error::other)?;
            let mut w = write.lock().await;
            let w = w.as_mut().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotConnected, "the pipe is closed")
            })?;
            w.write_all(&bytes).await?;
            w.flush().await
        }
    }

    /// Cancel-safe, as rmcp needs (it polls this in a `select!`): bytes are taken
    /// from the pipe only by a read that completed, and cut into lines at once.
    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if let Some(m) = self.ready.pop_front() {
                return Some(m);
            }
            if self.ended {
                return None;
            }
            let n = match self.read.read(&mut buf).await {
                Ok(0) => {
                    self.end("the server closed its stdout".into());
                    continue;
                }
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!("reading from the MCP server failed: {e}");
                    self.end(format!("reading the server's stdout failed: {e}"));
                    continue;
                }
            };
            let mut lines = Vec::new();
            self.lines.push(&buf[..n], &mut lines);
            for line in lines {
                self.take(line);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        if let Some(mut w) = self.write.lock().await.take() {
            w.shutdown().await?;
        }
        Ok(())
    }
}
