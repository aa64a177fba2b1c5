//! Pipe plumbing for the supervisor: `poll`, non-blocking writes, and the bounded
//! reader that keeps the first bytes of an output stream and drains the rest.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::sys;
use crate::capture::Keeper;
use crate::spec::OutputOverflow;
use crate::{Captured, SandboxError};

pub(crate) fn poll(
    fds: &mut [libc::pollfd],
    timeout: Option<Duration>,
) -> Result<(), SandboxError> {
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    // SAFETY: fds is a valid array of pollfd of the length passed.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(SandboxError::Io {
                stage: "poll",
                source: e,
            });
        }
    }
    Ok(())
}

pub(crate) fn pfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

pub(crate) fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on an fd we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// Write what the pipe takes now. A reader that went away must not kill the
/// embedder with SIGPIPE (a library cannot assume it is ignored): the signal is
/// blocked around the write and a pending one consumed; the caller sees EPIPE.
pub(crate) fn write_some(fd: RawFd, buf: &[u8]) -> Result<usize, i32> {
    let chunk = &buf[..buf.len().min(64 * 1024)];
    // SAFETY: sigset operations on local sets; pthread_sigmask only changes this
    // thread's mask and is restored below.
    let (set, old) = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        (set, old)
    };
    // SAFETY: chunk is a valid buffer.
    let n = unsafe { libc::write(fd, chunk.as_ptr().cast(), chunk.len()) };
    let err = std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO);
    if n < 0 && err == libc::EPIPE {
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: consume the SIGPIPE this write raised (blocked, so pending).
        unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &zero) };
    }
    // SAFETY: restore the thread's previous mask.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    if n < 0 { Err(err) } else { Ok(n as usize) }
}

/// Writes `bytes` whole to `fd` (this process's stdout or stderr), giving up on an
/// error: a closed terminal must not stop the supervision.
fn echo(fd: RawFd, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a valid buffer; `fd` is this process's own descriptor.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            let interrupted =
                std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted;
            if n < 0 && interrupted {
                continue;
            }
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// A bounded reader of one output pipe: keeps the head and the true tail (see
/// [`crate::capture`]), drains the rest.
pub(crate) struct Sink {
    pub fd: Option<OwnedFd>,
    kept: Keeper,
    /// This process's descriptor the kept head is passed on to as it arrives.
    echo: Option<RawFd>,
}

impl Sink {
    pub(crate) fn new(
        fd: OwnedFd,
        cap: usize,
        overflow: OutputOverflow,
        echo: Option<RawFd>,
    ) -> Sink {
        set_nonblocking(fd.as_raw_fd());
        Sink {
            fd: Some(fd),
            kept: Keeper::new(cap, overflow),
            echo,
        }
    }

    /// Whether the stream has passed the point where the command is killed.
    pub(crate) fn over_kill_limit(&self) -> bool {
        self.kept.over_kill_limit()
    }

    pub(crate) fn pull(&mut self) {
        let Some(fd) = &self.fd else { return };
        let mut buf = [0u8; 64 * 1024];
        for _ in 0..16 {
            match sys::read(fd.as_raw_fd(), &mut buf) {
                Ok(0) => {
                    self.fd = None;
                    return;
                }
                Ok(n) => {
                    let head = self.kept.push(&buf[..n]);
                    if let Some(out) = self.echo {
                        echo(out, &buf[..head]);
                    }
                }
                Err(libc::EAGAIN) => return,
                Err(_) => {
                    self.fd = None;
                    return;
                }
            }
        }
    }

    pub(crate) fn finish(self) -> Captured {
        self.kept.finish()
    }
}
