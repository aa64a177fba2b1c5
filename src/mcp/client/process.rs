//! The process behind a stdio server and the bounded tail of its stderr.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::sandbox::SandboxChild;

use super::lock;

/// Bytes of a stdio server's stderr kept (the tail).
pub(super) const STDERR_TAIL: usize = 4096;
/// Bytes of that tail quoted in a failure record.
const STDERR_QUOTED: usize = 1024;
/// How long a failure record waits for an ended process's stderr.
const STDERR_SETTLE: Duration = Duration::from_secs(2);
/// How long a failure record waits for a process whose pipe closed to be reaped, so
/// that it can say how the process ended.
pub(super) const EXIT_SETTLE: Duration = Duration::from_secs(1);

/// The process behind a stdio server.
pub(super) enum Proc {
    Sandboxed(SandboxChild),
    Plain(std::process::Child),
}

impl Proc {
    pub(super) fn pid(&self) -> Option<u32> {
        match self {
            Self::Sandboxed(c) => Some(c.id()),
            Self::Plain(c) => Some(c.id()),
        }
    }

    /// How it ended, if it has.
    pub(super) fn exit(&mut self) -> Option<String> {
        match self {
            Self::Sandboxed(c) => match c.try_wait() {
                Ok(Some(o)) => Some(match (o.exit_code, o.signal) {
                    (_, Some(sig)) => format!("killed by signal {sig}"),
                    (Some(code), None) => format!("exit code {code}"),
                    (None, None) => "ended".into(),
                }),
                _ => None,
            },
            Self::Plain(c) => match c.try_wait() {
                Ok(Some(st)) => {
                    use std::os::unix::process::ExitStatusExt;
                    Some(match (st.code(), st.signal()) {
                        (_, Some(sig)) => format!("killed by signal {sig}"),
                        (Some(code), None) => format!("exit code {code}"),
                        (None, None) => "ended".into(),
                    })
                }
                _ => None,
            },
        }
    }

    /// How it ended, waiting up to `limit` for it to: a server whose pipe closed is
    /// usually still being reaped a moment later.
    pub(super) fn exit_within(&mut self, limit: Duration) -> Option<String> {
        let until = std::time::Instant::now() + limit;
        loop {
            if let Some(e) = self.exit() {
                return Some(e);
            }
            if std::time::Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub(super) fn kill(&mut self) {
        match self {
            Self::Sandboxed(c) => c.kill(),
            Self::Plain(c) => {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// The tail of a server's stderr, filled by a drain thread until end-of-file.
#[derive(Default)]
pub(super) struct Stderr {
    tail: Mutex<Tail>,
    closed: Condvar,
}

#[derive(Default)]
struct Tail {
    bytes: VecDeque<u8>,
    closed: bool,
}

impl Stderr {
    /// The tail of a server with no stderr of ours to read (an HTTP server): closed
    /// from the start, so a failure record never waits for it.
    pub(super) fn closed() -> Self {
        let s = Self::default();
        s.close();
        s
    }

    fn push(&self, bytes: &[u8]) {
        let mut t = lock(&self.tail);
        t.bytes.extend(bytes);
        let extra = t.bytes.len().saturating_sub(STDERR_TAIL);
        t.bytes.drain(..extra);
    }

    fn close(&self) {
        lock(&self.tail).closed = true;
        self.closed.notify_all();
    }

    pub(super) fn text(&self, max: usize) -> String {
        let t = lock(&self.tail);
        let skip = t.bytes.len().saturating_sub(max);
        let bytes: Vec<u8> = t.bytes.iter().skip(skip).copied().collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Waits, at most `limit`, for the pipe to close, so a failure record quotes all
    /// a process that ended said (its last write may still be in the pipe).
    fn settle(&self, limit: Duration) {
        let guard = lock(&self.tail);
        let _ = self
            .closed
            .wait_timeout_while(guard, limit, |t| !t.closed)
            .map_err(|e| e.into_inner());
    }

    /// `why`, then how the process ended (if known), then the tail of what it said
    /// (once the pipe has settled): the text of a failure record.
    pub(super) fn failure(&self, why: &str, exit: Option<String>) -> String {
        self.settle(STDERR_SETTLE);
        let mut s = why.to_string();
        if let Some(e) = exit {
            s.push_str(&format!(" ({e})"));
        }
        let tail = self.text(STDERR_QUOTED);
        if !tail.trim().is_empty() {
            s.push_str(&format!("; stderr tail: {}", tail.trim()));
        }
        s
    }
}

/// Drains a blocking stderr pipe into the tail on its own thread (ends at EOF).
pub(super) fn drain_stderr<R: Read + Send + 'static>(mut r: R, tail: Arc<Stderr>) {
    let _ = std::thread::Builder::new()
        .name("mcp-stderr".into())
        .spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                tail.push(&buf[..n]);
            }
            tail.close();
        });
}

/// Whether a plain child of the harness (a server run with `sandbox = false`) could
/// read the harness's memory, and why: what its `connected` record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MemoryExposure {
    /// The harness runs as root (euid 0): so does its child, and a root process
    /// passes every ptrace access check.
    Root,
    /// The harness process is dumpable (`PR_GET_DUMPABLE` is 1, as for a program
    /// embedding the library): a process of the same user passes the ptrace access
    /// checks for it.
    Dumpable,
    /// Neither root nor dumpable.
    Guarded,
    /// It could not be found out; nothing is claimed.
    Unknown,
}

impl MemoryExposure {
    /// `Some(true)` when readable, `Some(false)` when not, `None` when unknown.
    pub(super) fn readable(self) -> Option<bool> {
        match self {
            Self::Root | Self::Dumpable => Some(true),
            Self::Guarded => Some(false),
            Self::Unknown => None,
        }
    }

    /// Why, in words for the record.
    pub(super) fn why(self) -> &'static str {
        match self {
            Self::Root => {
                "the harness runs as root (euid 0), which passes every ptrace access check"
            }
            Self::Dumpable => {
                "the harness process is dumpable: a process of its user passes the ptrace access checks (/proc/<pid>/environ; /proc/<pid>/mem and ptrace where Yama allows attaching)"
            }
            Self::Guarded => "the harness is neither root nor dumpable",
            Self::Unknown => "whether the harness is dumpable could not be found out",
        }
    }
}

/// Finds out whether a process this harness starts outside the sandbox could read
/// the harness's memory: when the harness's effective uid is 0 (a root process
/// bypasses the ptrace checks) or the harness is dumpable (a same-user process
/// passes them). Asked afresh each time: the dumpable flag can change during the
/// process's life (the CLI clears it; an embedder may not).
pub(super) fn memory_exposure() -> MemoryExposure {
    // SAFETY: geteuid(2) takes no arguments, cannot fail and touches no memory.
    if unsafe { libc::geteuid() } == 0 {
        return MemoryExposure::Root;
    }
    dumpable()
}

#[cfg(target_os = "linux")]
fn dumpable() -> MemoryExposure {
    // SAFETY: PR_GET_DUMPABLE takes no pointer arguments (the unused ones are 0) and
    // only returns the calling process's flag.
    let flag = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) };
    match flag {
        0 => MemoryExposure::Guarded,
        f if f > 0 => MemoryExposure::Dumpable,
        _ => MemoryExposure::Unknown,
    }
}

/// Elsewhere there is no dumpable flag to read: nothing is claimed.
#[cfg(not(target_os = "linux"))]
fn dumpable() -> MemoryExposure {
    MemoryExposure::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_exposure_follows_euid_and_the_dumpable_flag() {
        let e = memory_exposure();
        // SAFETY: geteuid(2) cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(e, MemoryExposure::Root);
        } else if cfg!(target_os = "linux") {
            // A test binary is dumpable unless something cleared the flag.
            assert_eq!(e, MemoryExposure::Dumpable);
        }
        assert_eq!(MemoryExposure::Guarded.readable(), Some(false));
        assert_eq!(MemoryExposure::Unknown.readable(), None);
    }
}
