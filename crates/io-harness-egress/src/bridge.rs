//! The sandbox side of egress: a TCP listener inside the sandbox's network namespace
//! that pipes every connection to the proxy's unix socket, and the environment that
//! points the sandboxed command's HTTP clients at it.
//!
//! Inside a private network namespace the host's `127.0.0.1` is not reachable, but a unix
//! socket bound into the sandbox's filesystem view is. [`forward`] runs in the namespace
//! (loopback brought up) on `127.0.0.1:PORT`; the command sees [`proxy_env`]`(PORT)`.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::task::JoinSet;

/// The port the bridge listens on inside the sandbox when the caller has no preference.
pub const DEFAULT_BRIDGE_PORT: u16 = 3128;

/// Accepts TCP connections on `listen` and pipes each, both ways, to the unix socket at
/// `to_unix`. Runs until accepting fails persistently; dropping the future ends every
/// open connection too (they live in a `JoinSet` owned by it).
///
/// # Cancel safety
/// Cancel-safe: dropping it closes the listener's connections; nothing is half-recorded.
pub async fn forward(listen: TcpListener, to_unix: PathBuf) -> io::Result<()> {
    let mut conns = JoinSet::new();
    let mut failures = 0u32;
    loop {
        tokio::select! {
            accepted = listen.accept() => match accepted {
                Ok((tcp, _)) => {
                    failures = 0;
                    conns.spawn(pipe(tcp, to_unix.clone()));
                }
                Err(e) => {
                    // EMFILE and friends are transient; back off instead of spinning.
                    failures += 1;
                    if failures > 100 {
                        return Err(e);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn pipe(mut tcp: TcpStream, to_unix: PathBuf) {
    match UnixStream::connect(&to_unix).await {
        Ok(mut unix) => {
            let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
        }
        Err(e) => {
            tracing::warn!(path = %to_unix.display(), error = %e, "egress bridge: proxy socket unreachable")
        }
    }
}

/// The environment a sandboxed command needs to send its HTTP(S) through the bridge on
/// `127.0.0.1:port`. `NO_PROXY`/`no_proxy` are set empty so nothing bypasses the proxy
/// (there is no other route anyway; this only makes failures clearer).
pub fn proxy_env(port: u16) -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{port}");
    let mut env: Vec<(String, String)> = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
        .iter()
        .map(|k| (k.to_string(), url.clone()))
        .collect();
    env.push(("NO_PROXY".to_string(), String::new()));
    env.push(("no_proxy".to_string(), String::new()));
    env
}
