//! A local HTTP/1.1 server that answers as the model APIs do, so the real client code
//! (reqwest, the SSE parser, the protocol assemblers) runs end to end.
//!
//! Each request is recorded (method, path, headers, body) before it is answered with
//! the next scripted [`Reply`]: a whole body with `Content-Length`, or an event stream
//! in chunked transfer encoding, one HTTP chunk per piece, pieces cut wherever the
//! test says (mid-line, mid-character, between `\r` and `\n`), with an optional pause
//! before each, and an ending that is clean, cut, or never comes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How a chunked body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The terminating zero-length chunk: a complete body.
    Complete,
    /// The connection closes mid-body, without the terminating chunk.
    Cut,
    /// Nothing more is sent and the connection stays open until the client leaves.
    Hang,
}

/// One scripted response.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    pieces: Vec<Vec<u8>>,
    chunked: bool,
    delay: Duration,
    /// Wait before the status line (a server generating the whole reply first).
    head_delay: Duration,
    end: End,
}

impl Reply {
    /// `200 text/event-stream`, chunked, one chunk per piece.
    pub fn sse(pieces: Vec<Vec<u8>>) -> Self {
        Self {
            status: 200,
            headers: vec![
                ("Content-Type".into(), "text/event-stream".into()),
                ("Cache-Control".into(), "no-cache".into()),
            ],
            pieces,
            chunked: true,
            delay: Duration::ZERO,
            head_delay: Duration::ZERO,
            end: End::Complete,
        }
    }

    /// A whole JSON body with `status`.
    pub fn json(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            pieces: vec![body.as_bytes().to_vec()],
            chunked: false,
            delay: Duration::ZERO,
            head_delay: Duration::ZERO,
            end: End::Complete,
        }
    }

    /// Sets a response header (replacing one of the same name).
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Waits `delay` before sending the status line.
    pub fn headers_after(mut self, delay: Duration) -> Self {
        self.head_delay = delay;
        self
    }

    /// Waits `delay` before each piece, so the client most likely reads each one on
    /// its own (nothing depends on it: the result must be the same either way).
    pub fn paced(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// How the body ends.
    pub fn end(mut self, end: End) -> Self {
        self.end = end;
        self
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `POST`…
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Headers, names lowercased, in order.
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
}

impl Recorded {
    /// The value of header `name` (case-insensitive), if sent once or more.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

/// The running server; stops when dropped.
pub struct FakeServer {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    /// Starts a server that answers the n-th request with `replies[n]` (and any
    /// request past the script with a 500 naming the problem).
    pub async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(replies);
        let next = Arc::new(AtomicUsize::new(0));
        let seen = requests.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (seen, replies, next) = (seen.clone(), replies.clone(), next.clone());
                tokio::spawn(async move {
                    let _ = serve(socket, &seen, &replies, &next).await;
                });
            }
        });
        Self {
            addr,
            requests,
            task,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// The only request received; panics if there were more or none.
    pub fn only_request(&self) -> Recorded {
        let r = self.requests();
        assert_eq!(r.len(), 1, "expected one request, got {r:?}");
        r.into_iter().next().unwrap()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    mut socket: TcpStream,
    seen: &Mutex<Vec<Recorded>>,
    replies: &[Reply],
    next: &AtomicUsize,
) -> std::io::Result<()> {
    socket.set_nodelay(true)?;
    let Some(request) = read_request(&mut socket).await? else {
        return Ok(());
    };
    seen.lock().unwrap().push(request);
    let n = next.fetch_add(1, Ordering::SeqCst);
    let fallback;
    let reply = match replies.get(n) {
        Some(r) => r,
        None => {
            fallback = Reply::json(
                500,
                &format!("{{\"error\":\"no scripted reply for request {n}\"}}"),
            );
            &fallback
        }
    };
    if !reply.head_delay.is_zero() {
        tokio::time::sleep(reply.head_delay).await;
    }
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nConnection: close\r\n",
        reply.status,
        reason(reply.status)
    );
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if reply.chunked {
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        socket.write_all(head.as_bytes()).await?;
        for piece in &reply.pieces {
            if !reply.delay.is_zero() {
                tokio::time::sleep(reply.delay).await;
            }
            if piece.is_empty() {
                continue; // an empty chunk would end the body
            }
            socket
                .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                .await?;
            socket.write_all(piece).await?;
            socket.write_all(b"\r\n").await?;
            socket.flush().await?;
        }
    } else {
        let body: Vec<u8> = reply.pieces.concat();
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        socket.write_all(head.as_bytes()).await?;
        socket.write_all(&body).await?;
    }
    match reply.end {
        End::Complete if reply.chunked => socket.write_all(b"0\r\n\r\n").await?,
        End::Complete | End::Cut => {}
        End::Hang => {
            // Wait for the client to give up and close; it sends nothing more.
            let mut sink = [0u8; 256];
            while socket.read(&mut sink).await.unwrap_or(0) > 0 {}
        }
    }
    socket.flush().await?;
    socket.shutdown().await
}

async fn read_request(socket: &mut TcpStream) -> std::io::Result<Option<Recorded>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_string();
    let path = first.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(Recorded {
        method,
        path,
        headers,
        body,
    }))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        307 => "Temporary Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// `text` cut into pieces of `n` bytes (the last may be shorter), wherever that
/// falls: inside a `data:` line, a multi-byte character or a `\r\n`.
pub fn every(text: &str, n: usize) -> Vec<Vec<u8>> {
    text.as_bytes().chunks(n).map(<[u8]>::to_vec).collect()
}

/// `text` as one piece.
pub fn whole(text: &str) -> Vec<Vec<u8>> {
    vec![text.as_bytes().to_vec()]
}

/// `text` cut at the awkward places: inside every `data` field name, between every
/// `\r` and `\n`, and after the first byte of every multi-byte character.
pub fn awkward(text: &str) -> Vec<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut pieces = Vec::new();
    let mut start = 0;
    for i in 0..bytes.len() {
        let cut = bytes[i] == b'\r'
            || bytes[i] >= 0xC0
            || (bytes[i..].starts_with(b"ta:") && i >= 2 && &bytes[i - 2..i] == b"da");
        if cut {
            pieces.push(bytes[start..=i].to_vec());
            start = i + 1;
        }
    }
    pieces.push(bytes[start..].to_vec());
    pieces
}
