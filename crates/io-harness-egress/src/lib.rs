//! Sandbox egress (SPEC C15): an allowlisting HTTP proxy the harness runs on the host.
//!
//! By default sandboxed code has no route out. When a contract allows hosts
//! (`allow_hosts = ["crates.io", "*.pypi.org:443"]`), the only way out is this proxy,
//! which admits:
//! - `CONNECT host:port`, then tunnels bytes both ways. If the client's first bytes are
//!   a TLS ClientHello (always required on port 443) its SNI must equal the CONNECT host,
//!   or the tunnel is closed;
//! - plain HTTP with an absolute-form URI (whose Host header, if sent, must match) or an
//!   origin-form URI with a Host header; forwarded with `Connection: close`.
//!
//! Each only when `host:port` matches a [`HostRule`]. IP literals (and names a resolver
//! would read as addresses, like `127.1`) are refused unless a rule names that IP. Names
//! are resolved on the host. Refusals answer `403` (or close, once a tunnel is open) and
//! are counted. The counts are *reported*: the host saw them, but what the tunnelled
//! client did inside an admitted TLS session is not observed.
//!
//! # How a sandbox reaches it
//! The contract's `allow_hosts` are parsed with [`HostRule::parse`] when the task file
//! loads (a typed [`RuleError`] names the bad entry, as `sandbox.allow_hosts[i]`);
//! `[sandbox] resolve` pins names to addresses ([`EgressConfig::with_pins`]). For each
//! command, the executor (`io_harness::exec`) starts a proxy on a unix socket in a private
//! 0700 temp directory (hidden from the sandbox, like all of the host's `/tmp`) and asks
//! the sandbox for posture `allowlist` with a `io_harness_sandbox::ProxyBridge`:
//! the sandbox's init, already inside the private network namespace, creates a TCP
//! listener on `127.0.0.1:`[`bridge::DEFAULT_BRIDGE_PORT`] and passes it to the harness
//! over a socket pair (`SCM_RIGHTS`) before the command starts; the harness accepts on
//! it and pipes each connection to the proxy's socket. Nothing extra runs inside the
//! sandbox, the command's seccomp filter and Landlock rules are unchanged, and it works
//! for unprivileged harnesses too (no `setns` into the sandbox's namespaces).
//! The command gets [`bridge::proxy_env`]. After it, [`EgressProxy::settle`] then
//! [`EgressProxy::report`] give the *reported* counts that go to `sandbox_sessions`
//! (`egress_refusals_reported`…) and the audit log (`egress_denied_reported`…); a
//! session without a proxy records them as not observed (NULL / absent).
//! [`bridge::forward`] is the same bridge as an async task, for embedders that run
//! their own namespace helper.
//!
//! # Known limits
//! An allowed name that resolves to a private or loopback address is still dialled (the
//! tests rely on it); a client may pipeline further plain-HTTP requests on an admitted
//! connection, which reach the same admitted server only.

pub mod bridge;
mod conn;
#[cfg(test)]
mod fuzz;
mod http;
mod resolve;
mod rule;
mod sni;
mod stats;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::task::{JoinHandle, JoinSet};

pub use rule::{HostRule, RuleError};
#[doc(hidden)]
pub use sni::fake_client_hello;
pub use stats::MAX_REFUSED_HOSTS;

use conn::Shared;
use resolve::Resolver;

/// What a session's egress proxy reports. `refusals: None` means no proxy ran ("not
/// observed"), which differs from `Some(0)` ("observed, nothing refused").
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EgressReport {
    /// Connections refused, as reported by the proxy; `None` when no proxy ran.
    pub refusals: Option<u64>,
    /// Connections admitted (tunnels past the SNI check, forwarded requests); `None` when no proxy ran.
    pub admitted: Option<u64>,
    /// The first [`MAX_REFUSED_HOSTS`] distinct refused hosts, in order of refusal.
    pub refused_hosts: Vec<String>,
}

impl EgressReport {
    /// The report of a session that ran no proxy.
    pub fn not_observed() -> EgressReport {
        EgressReport::default()
    }
}

/// Options for [`EgressProxy`]; [`EgressProxy::start`] is the common case.
#[derive(Debug, Clone)]
pub struct EgressConfig {
    allow: Vec<HostRule>,
    unix_path: Option<PathBuf>,
    tcp_loopback: bool,
    resolver: Resolver,
}

impl EgressConfig {
    /// A proxy admitting `allow`, on a unix socket in a fresh private temp directory.
    pub fn new(allow: Vec<HostRule>) -> EgressConfig {
        EgressConfig {
            allow,
            unix_path: None,
            tcp_loopback: false,
            resolver: Resolver::System,
        }
    }

    /// Listen on this unix socket path instead (it must not exist; removed on drop).
    pub fn unix_path(mut self, path: impl Into<PathBuf>) -> EgressConfig {
        self.unix_path = Some(path.into());
        self
    }

    /// Also listen on `127.0.0.1:0` (for tests and for hosts without namespaces).
    pub fn tcp_loopback(mut self) -> EgressConfig {
        self.tcp_loopback = true;
        self
    }

    /// Resolve names from this map (`"name:port"` or `"name"` → address) instead of DNS;
    /// names not in the map fail with 502. Lets tests run without the network.
    pub fn with_resolver(mut self, map: HashMap<String, SocketAddr>) -> EgressConfig {
        let map = map
            .into_iter()
            .map(|(k, v)| (rule::normalize(&k), v))
            .collect();
        self.resolver = Resolver::Fixed(map);
        self
    }

    /// Resolve these names to a fixed address, on whatever port was asked for, and
    /// every other name through the system resolver (the contract's `[sandbox] resolve`).
    pub fn with_pins(
        mut self,
        pins: impl IntoIterator<Item = (String, std::net::IpAddr)>,
    ) -> EgressConfig {
        let pins: HashMap<String, std::net::IpAddr> = pins
            .into_iter()
            .map(|(k, v)| (rule::normalize(&k), v))
            .collect();
        if !pins.is_empty() {
            self.resolver = Resolver::Pinned(pins);
        }
        self
    }

    /// Binds the listeners and starts serving on the current tokio runtime.
    pub async fn start(self) -> io::Result<EgressProxy> {
        let (dir, unix_path, owned_path) = match self.unix_path {
            Some(p) => (None, p, true),
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("io-harness-egress")
                    .tempdir()?;
                let p = dir.path().join("proxy.sock");
                (Some(dir), p, false)
            }
        };
        let shared = Arc::new(Shared {
            rules: self.allow,
            resolver: self.resolver,
            stats: stats::Stats::default(),
        });
        let unix = UnixListener::bind(&unix_path)?;
        let mut tasks = vec![tokio::spawn(accept_loop(UnixAccept(unix), shared.clone()))];
        let mut tcp_addr = None;
        if self.tcp_loopback {
            let tcp = TcpListener::bind(("127.0.0.1", 0)).await?;
            tcp_addr = Some(tcp.local_addr()?);
            tasks.push(tokio::spawn(accept_loop(TcpAccept(tcp), shared.clone())));
        }
        Ok(EgressProxy {
            shared,
            unix_path,
            remove_path: owned_path,
            tcp_addr,
            tasks,
            _dir: dir,
        })
    }
}

/// A running allowlisting proxy. Dropping it stops the listeners and every open
/// connection, and removes its socket.
///
/// ```
/// use io_harness_egress::{EgressProxy, HostRule};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let proxy = EgressProxy::start(vec![HostRule::parse("crates.io:443").unwrap()])
///     .await
///     .unwrap();
/// assert!(proxy.unix_path().exists(), "the socket a sandbox's bridge forwards to");
/// // Nothing asked yet: observed, and zero (not "not observed").
/// assert_eq!(proxy.report().refusals, Some(0));
/// # });
/// ```
#[derive(Debug)]
pub struct EgressProxy {
    shared: Arc<Shared>,
    unix_path: PathBuf,
    remove_path: bool,
    tcp_addr: Option<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
    _dir: Option<tempfile::TempDir>,
}

impl EgressProxy {
    /// Starts a proxy admitting `allow` on a unix socket in a private temp directory.
    pub async fn start(allow: Vec<HostRule>) -> io::Result<EgressProxy> {
        EgressConfig::new(allow).start().await
    }

    /// Options beyond [`EgressProxy::start`].
    pub fn builder(allow: Vec<HostRule>) -> EgressConfig {
        EgressConfig::new(allow)
    }

    /// The unix socket to bind into the sandbox and point [`bridge::forward`] at.
    pub fn unix_path(&self) -> &Path {
        &self.unix_path
    }

    /// The loopback TCP address, if [`EgressConfig::tcp_loopback`] was asked for.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_addr
    }

    /// The rules this proxy admits (the resolved allowlist to record).
    pub fn rules(&self) -> &[HostRule] {
        &self.shared.rules
    }

    /// Refusals so far (reported).
    pub fn refusals(&self) -> u64 {
        self.shared.stats.refusals()
    }

    /// The first [`MAX_REFUSED_HOSTS`] distinct refused hosts (reported).
    pub fn refused_hosts(&self) -> Vec<String> {
        self.shared.stats.refused_hosts()
    }

    /// Waits, at most `limit`, until no connection is being served, so a report taken
    /// after the sandbox is gone includes what its last connections were refused.
    /// Polls every few milliseconds: the proxy exposes no completion signal and the
    /// wait is short and bounded.
    pub async fn settle(&self, limit: Duration) {
        let end = tokio::time::Instant::now() + limit;
        while self.shared.stats.active() > 0 && tokio::time::Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Everything to record for the session, as observed so far.
    pub fn report(&self) -> EgressReport {
        EgressReport {
            refusals: Some(self.shared.stats.refusals()),
            admitted: Some(self.shared.stats.admitted()),
            refused_hosts: self.shared.stats.refused_hosts(),
        }
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if self.remove_path {
            let _ = std::fs::remove_file(&self.unix_path);
        }
    }
}

/// The one thing the accept loop needs from a listener.
trait Accept {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn accept(&self) -> impl Future<Output = io::Result<Self::Stream>> + Send;
}

struct UnixAccept(UnixListener);
struct TcpAccept(TcpListener);

impl Accept for UnixAccept {
    type Stream = tokio::net::UnixStream;
    async fn accept(&self) -> io::Result<Self::Stream> {
        self.0.accept().await.map(|(s, _)| s)
    }
}

impl Accept for TcpAccept {
    type Stream = tokio::net::TcpStream;
    async fn accept(&self) -> io::Result<Self::Stream> {
        self.0.accept().await.map(|(s, _)| s)
    }
}

/// Counts a connection as in flight until dropped (also when its task is aborted).
struct Active(Arc<Shared>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.stats.leave();
    }
}

/// Accepts until aborted; connections live in a `JoinSet`, so aborting this task
/// (dropping the set) ends them too.
async fn accept_loop<L: Accept>(listener: L, shared: Arc<Shared>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(s) => {
                    let shared = shared.clone();
                    shared.stats.enter();
                    let guard = Active(shared.clone());
                    conns.spawn(async move {
                        let _guard = guard;
                        conn::serve(s, shared).await
                    });
                }
                Err(e) => {
                    // EMFILE and friends are transient; back off instead of spinning.
                    tracing::warn!(error = %e, "egress proxy accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}
