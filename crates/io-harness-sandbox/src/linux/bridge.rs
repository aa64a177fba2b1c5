//! The host side of the egress bridge ([`crate::ProxyBridge`]).
//!
//! The sandbox's init creates a TCP listener on `127.0.0.1:PORT` inside the private
//! network namespace and sends it to the parent over a socket pair before the command
//! starts. A socket keeps the namespace it was created in, so the harness can accept
//! connections on it from its own namespace; this forwarder does, and pipes each one to
//! the egress proxy's unix socket. Nothing runs inside the sandbox for it, the seccomp
//! filter and Landlock of the command are unchanged, and the proxy's socket stays
//! hidden from the command (it lives under the host's hidden `/tmp`).
//!
//! Plain threads, not tasks: the sandbox API is blocking and may be used without a
//! tokio runtime. Connections are few (a build's downloads); more than
//! [`MAX_CONNECTIONS`] at once are closed on arrival.
//!
//! The listener and every accepted socket belong to the sandbox's network namespace,
//! which a root harness reuses: [`Forwarder::stop`] closes the listener and shuts
//! every piped connection down before the namespace goes back to the pool.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::pipes::{pfd, poll};
use crate::SandboxError;

/// Connections piped at once; later ones are closed until one ends.
pub(crate) const MAX_CONNECTIONS: usize = 64;

/// Both ends of each live connection, to shut them down at stop.
type Live = Arc<Mutex<HashMap<u64, (TcpStream, UnixStream)>>>;

/// A running forwarder; stopping or dropping it closes everything it holds.
#[derive(Debug)]
pub(crate) struct Forwarder {
    stop_w: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
    live: Live,
}

impl Forwarder {
    /// Accept on `listener` (from the sandbox's namespace) and pipe to `to_unix`.
    pub(crate) fn start(listener: OwnedFd, to_unix: PathBuf) -> Result<Forwarder, SandboxError> {
        let listener = TcpListener::from(listener);
        listener
            .set_nonblocking(true)
            .map_err(SandboxError::spawn("egress bridge listener"))?;
        let (stop_r, stop_w) =
            std::io::pipe().map_err(SandboxError::spawn("egress bridge pipe"))?;
        let stop_r = OwnedFd::from(stop_r);
        let live: Live = Arc::default();
        let live2 = live.clone();
        let thread = std::thread::Builder::new()
            .name("io-harness-egress-bridge".into())
            .spawn(move || accept_loop(listener, stop_r, to_unix, live2))
            .map_err(SandboxError::spawn("egress bridge thread"))?;
        Ok(Forwarder {
            stop_w: Some(OwnedFd::from(stop_w)),
            thread: Some(thread),
            live,
        })
    }

    /// Close the listener and shut every piped connection down. Idempotent.
    pub(crate) fn stop(&mut self) {
        // Closing the write end wakes the accept loop (POLLHUP), which exits and
        // drops the listener.
        self.stop_w.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let live = self.live.lock().map(|mut m| std::mem::take(&mut *m));
        if let Ok(live) = live {
            for (tcp, unix) in live.values() {
                let _ = tcp.shutdown(Shutdown::Both);
                let _ = unix.shutdown(Shutdown::Both);
            }
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: TcpListener, stop_r: OwnedFd, to_unix: PathBuf, live: Live) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    loop {
        let mut fds = [
            pfd(listener.as_raw_fd(), libc::POLLIN),
            pfd(stop_r.as_raw_fd(), libc::POLLIN),
        ];
        if poll(&mut fds, None).is_err() || fds[1].revents != 0 {
            return;
        }
        if fds[0].revents == 0 {
            continue;
        }
        let tcp = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!(error = %e, "egress bridge: accept failed");
                // EMFILE and friends: wait for the stop pipe a moment instead of spinning.
                let mut fds = [pfd(stop_r.as_raw_fd(), libc::POLLIN)];
                let _ = poll(&mut fds, Some(std::time::Duration::from_millis(20)));
                continue;
            }
        };
        let full = live.lock().map_or(true, |m| m.len() >= MAX_CONNECTIONS);
        if full {
            tracing::warn!("egress bridge: too many connections; closing one");
            continue;
        }
        let unix = match UnixStream::connect(&to_unix) {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!(path = %to_unix.display(), error = %e, "egress bridge: proxy socket unreachable");
                continue;
            }
        };
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = spawn_pipe(id, tcp, unix, &live) {
            tracing::warn!(error = %e, "egress bridge: could not start a connection");
        }
    }
}

/// Pipe one connection both ways on two threads; forget it when both are done.
fn spawn_pipe(id: u64, tcp: TcpStream, unix: UnixStream, live: &Live) -> std::io::Result<()> {
    tcp.set_nonblocking(false)?;
    if let Ok(mut m) = live.lock() {
        m.insert(id, (tcp.try_clone()?, unix.try_clone()?));
    }
    let (tcp_r, unix_w) = (tcp.try_clone()?, unix.try_clone()?);
    let up = std::thread::Builder::new()
        .name("io-harness-egress-pipe".into())
        .spawn(move || {
            copy_then_close(tcp_r, unix_w);
        })?;
    let live = live.clone();
    std::thread::Builder::new()
        .name("io-harness-egress-pipe".into())
        .spawn(move || {
            copy_then_close(unix, tcp);
            let _ = up.join();
            if let Ok(mut m) = live.lock() {
                m.remove(&id);
            }
        })?;
    Ok(())
}

/// Copy until end of stream or error, then half-close the destination.
fn copy_then_close<R: Read + HalfClose, W: Write + HalfClose>(mut from: R, mut to: W) {
    let _ = std::io::copy(&mut from, &mut to);
    to.half_close();
    from.close_read();
}

/// `shutdown(2)` on either stream type.
trait HalfClose {
    fn half_close(&self);
    fn close_read(&self);
}

impl HalfClose for TcpStream {
    fn half_close(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
    fn close_read(&self) {
        let _ = self.shutdown(Shutdown::Read);
    }
}

impl HalfClose for UnixStream {
    fn half_close(&self) {
        let _ = self.shutdown(Shutdown::Write);
    }
    fn close_read(&self) {
        let _ = self.shutdown(Shutdown::Read);
    }
}
