//! One client connection: read the request head, decide, then tunnel or forward.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::http::{self, HeadError, PlainError};
use super::resolve::Resolver;
use super::rule::{HostRule, Target, split_host_port};
use super::sni::{self, Hello};
use super::stats::Stats;

/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client may take to send its ClientHello once a tunnel is open.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// What every connection of one proxy shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) rules: Vec<HostRule>,
    pub(crate) resolver: Resolver,
    pub(crate) stats: Stats,
}

impl Shared {
    fn allowed(&self, target: &Target, port: u16) -> bool {
        self.rules.iter().any(|r| r.admits(target, port))
    }
}

const FORBIDDEN: &[u8] = b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 38\r\nConnection: close\r\n\r\nio-harness egress: host not allowed.\r\n";
const BAD_REQUEST: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
const BAD_GATEWAY: &[u8] =
    b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection Established\r\n\r\n";

/// Serves one connection to its end. Errors end the connection only.
pub(crate) async fn serve<S>(mut client: S, shared: Arc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (head, rest) = match tokio::time::timeout(HEAD_TIMEOUT, http::read_head(&mut client)).await
    {
        Ok(Ok(v)) => v,
        Ok(Err(HeadError::Closed)) | Err(_) => return,
        Ok(Err(HeadError::Io(e))) => {
            tracing::debug!(error = %e, "egress: reading request head failed");
            return;
        }
        Ok(Err(HeadError::TooLarge | HeadError::Malformed)) => {
            let _ = client.write_all(BAD_REQUEST).await;
            return;
        }
    };
    let result = if head.method.eq_ignore_ascii_case("CONNECT") {
        connect(&mut client, &head.target, rest, &shared).await
    } else {
        plain(&mut client, &head, rest, &shared).await
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "egress connection ended");
    }
}

async fn refuse<S: AsyncWrite + Unpin>(
    client: &mut S,
    shared: &Shared,
    host: &str,
    why: &str,
) -> io::Result<()> {
    shared.stats.refuse(host, why);
    client.write_all(FORBIDDEN).await?;
    client.shutdown().await
}

async fn connect<S>(
    client: &mut S,
    authority: &str,
    rest: Vec<u8>,
    shared: &Shared,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Some((host, Some(port))) = split_host_port(authority) else {
        return client.write_all(BAD_REQUEST).await;
    };
    let target = Target::classify(&host);
    if !shared.allowed(&target, port) {
        let why = if matches!(target, Target::Name(_)) {
            "not allowed"
        } else {
            "ip literal"
        };
        return refuse(client, shared, &target.label(), why).await;
    }
    let upstream = match shared.resolver.connect(&target, port).await {
        Ok(s) => s,
        Err(e) => {
            client.write_all(BAD_GATEWAY).await?;
            return Err(e);
        }
    };
    client.write_all(ESTABLISHED).await?;
    tunnel(client, upstream, rest, &target, port, shared).await
}

/// Pipes both ways; the client's first bytes are held until, if they are (or must be)
/// a TLS ClientHello, its SNI matches the CONNECT host.
async fn tunnel<S>(
    client: &mut S,
    upstream: TcpStream,
    mut first: Vec<u8>,
    target: &Target,
    port: u16,
    shared: &Shared,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut ur, mut uw) = upstream.into_split();
    let up = async {
        if port != 443 && first.is_empty() {
            // Server-speaks-first protocols: wait for the client's first bytes untimed.
            let mut chunk = [0u8; 4096];
            let n = cr.read(&mut chunk).await?;
            first.extend_from_slice(&chunk[..n]);
        }
        let verdict = tokio::time::timeout(HELLO_TIMEOUT, gather_hello(&mut cr, &mut first)).await;
        let hello = match verdict {
            Ok(r) => r?,
            Err(_) => Hello::Incomplete,
        };
        let refusal = match (&hello, target) {
            (Hello::NotTls, _) if port != 443 => None,
            (Hello::NoSni, Target::Ip(_)) => None,
            (Hello::Sni(name), t) if *name == t.label() => None,
            (Hello::Sni(name), _) => Some((name.clone(), "sni mismatch")),
            (Hello::NoSni, _) => Some((target.label(), "sni absent")),
            (Hello::NotTls, _) => Some((target.label(), "not tls on 443")),
            (Hello::Incomplete | Hello::Malformed, _) => Some((target.label(), "bad client hello")),
        };
        if let Some((host, why)) = refusal {
            shared.stats.refuse(&host, why);
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
        }
        shared.stats.admit();
        uw.write_all(&first).await?;
        tokio::io::copy(&mut cr, &mut uw).await?;
        uw.shutdown().await
    };
    let down = async {
        tokio::io::copy(&mut ur, &mut cw).await?;
        cw.shutdown().await
    };
    futures_util::future::try_join(up, down).await.map(|_| ())
}

/// Reads until the first bytes are classified as TLS or not (bounded by [`sni::MAX_HELLO`]).
async fn gather_hello<R: AsyncRead + Unpin>(r: &mut R, buf: &mut Vec<u8>) -> io::Result<Hello> {
    let mut chunk = [0u8; 4096];
    loop {
        match sni::parse_client_hello(buf) {
            Hello::Incomplete => {}
            other => return Ok(other),
        }
        let n = r.read(&mut chunk).await?;
        if n == 0 {
            return Ok(if buf.is_empty() {
                Hello::NotTls
            } else {
                Hello::Incomplete
            });
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn plain<S>(
    client: &mut S,
    head: &http::Head,
    rest: Vec<u8>,
    shared: &Shared,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let t = match head.plain_target() {
        Ok(t) => t,
        Err(PlainError::Bad) => return client.write_all(BAD_REQUEST).await,
        Err(PlainError::HostMismatch(h)) => {
            return refuse(client, shared, &h, "host header mismatch").await;
        }
    };
    let target = Target::classify(&t.host);
    if !shared.allowed(&target, t.port) {
        let why = if matches!(target, Target::Name(_)) {
            "not allowed"
        } else {
            "ip literal"
        };
        return refuse(client, shared, &target.label(), why).await;
    }
    let upstream = match shared.resolver.connect(&target, t.port).await {
        Ok(s) => s,
        Err(e) => {
            client.write_all(BAD_GATEWAY).await?;
            return Err(e);
        }
    };
    shared.stats.admit();
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut ur, mut uw) = upstream.into_split();
    let up = async {
        uw.write_all(&t.upstream_head).await?;
        uw.write_all(&rest).await?;
        tokio::io::copy(&mut cr, &mut uw).await?;
        uw.shutdown().await
    };
    let down = async {
        tokio::io::copy(&mut ur, &mut cw).await?;
        cw.shutdown().await
    };
    futures_util::future::try_join(up, down).await.map(|_| ())
}
