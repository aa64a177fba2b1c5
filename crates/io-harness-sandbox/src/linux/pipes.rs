//! Pipe plumbing for the supervisor: `poll`, non-blocking writes, and the bounded
//! reader that keeps the first bytes of an output stream and drains the rest.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::sys;
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

/// A bounded reader of one output pipe: keeps the first `cap` bytes, drains and
/// drops the rest.
pub(crate) struct Sink {
    pub fd: Option<OwnedFd>,
    cap: usize,
    kept: Vec<u8>,
    truncated: bool,
}

impl Sink {
    pub(crate) fn new(fd: OwnedFd, cap: usize) -> Sink {
        set_nonblocking(fd.as_raw_fd());
        Sink {
            fd: Some(fd),
            cap,
            kept: Vec::new(),
            truncated: false,
        }
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
                    let room = self.cap.saturating_sub(self.kept.len());
                    let take = n.min(room);
                    self.kept.extend_from_slice(&buf[..take]);
                    if take < n {
                        self.truncated = true;
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
        Captured {
            bytes: self.kept,
            truncated: self.truncated,
        }
    }
}
