//! Host-side name resolution for admitted destinations.
//!
//! The sandbox has no resolver of its own; the proxy resolves allowed names on the host.
//! Tests replace the system resolver with a fixed map so they never touch the network.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;

use super::rule::Target;

/// How long one upstream connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub(crate) enum Resolver {
    /// `tokio::net::lookup_host`.
    System,
    /// `name:port` or `name` → address; names missing from the map do not resolve.
    Fixed(HashMap<String, SocketAddr>),
    /// These names → that address on the requested port; others through the system.
    Pinned(HashMap<String, IpAddr>),
}

impl Resolver {
    async fn resolve(&self, target: &Target, port: u16) -> io::Result<Vec<SocketAddr>> {
        let name = match target {
            Target::Ip(ip) => return Ok(vec![SocketAddr::new(*ip, port)]),
            Target::Name(n) => n,
            Target::NumericLike(n) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("not resolving {n}"),
                ));
            }
        };
        match self {
            Resolver::Pinned(pins) if pins.contains_key(name) => Ok(pins
                .get(name)
                .map(|ip| SocketAddr::new(*ip, port))
                .into_iter()
                .collect()),
            Resolver::System | Resolver::Pinned(_) => {
                Ok(tokio::net::lookup_host((name.as_str(), port))
                    .await?
                    .collect())
            }
            Resolver::Fixed(map) => map
                .get(&format!("{name}:{port}"))
                .or_else(|| map.get(name))
                .map(|a| vec![*a])
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("{name} not in resolver map"),
                    )
                }),
        }
    }

    /// Resolves and connects to the first address that answers.
    pub(crate) async fn connect(&self, target: &Target, port: u16) -> io::Result<TcpStream> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no addresses");
        for addr in self.resolve(target, port).await? {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(s)) => return Ok(s),
                Ok(Err(e)) => last = e,
                Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, format!("connect {addr}")),
            }
        }
        Err(last)
    }
}
