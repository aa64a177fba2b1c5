//! A stop request for a command that is running: the caller's way to end a sandbox
//! early (its run was cancelled, its time budget ran out, the future waiting on it was
//! dropped) without waiting for the command's own caps.
//!
//! The signal is a pipe whose write end is closed to fire it: the read end then stays
//! readable for good, so a supervisor that polls its child's descriptors polls this one
//! too and wakes at once, with no thread and no timer of its own. Firing is idempotent
//! and sticky; a signal fired before the command starts stops it at its first poll.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Fires once to stop the command of the [`crate::RunSpec`] that carries it.
///
/// Clones share one signal. A command stopped by it is killed with everything it
/// started, and its outcome says [`crate::SandboxOutcome::stopped`] (never a cap).
///
/// ```
/// use io_harness_sandbox::StopSignal;
/// let stop = StopSignal::new().expect("a pipe");
/// let seen = stop.clone();
/// assert!(!seen.is_stopped());
/// stop.stop();
/// assert!(seen.is_stopped());
/// ```
#[derive(Clone)]
pub struct StopSignal {
    inner: Arc<Inner>,
}

struct Inner {
    /// Readable (at end of file) once the signal fired.
    #[cfg_attr(not(unix), allow(dead_code))]
    reader: std::io::PipeReader,
    /// Dropped to fire.
    writer: Mutex<Option<std::io::PipeWriter>>,
    fired: AtomicBool,
}

impl StopSignal {
    /// A signal not fired yet.
    pub fn new() -> std::io::Result<Self> {
        let (reader, writer) = std::io::pipe()?;
        Ok(Self {
            inner: Arc::new(Inner {
                reader,
                writer: Mutex::new(Some(writer)),
                fired: AtomicBool::new(false),
            }),
        })
    }

    /// Fires the signal: the command is killed at the supervisor's next wake-up.
    pub fn stop(&self) {
        self.inner.fired.store(true, Ordering::SeqCst);
        // A poisoned lock only means a panic elsewhere while it was held; closing the
        // write end is still what firing means.
        let mut w = self
            .inner
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        w.take();
    }

    /// Whether the signal fired.
    pub fn is_stopped(&self) -> bool {
        self.inner.fired.load(Ordering::SeqCst)
    }

    /// A guard that fires the signal when dropped, unless disarmed: a waiter that is
    /// itself dropped (a cancelled future) stops the command it waited on.
    pub fn on_drop(&self) -> StopOnDrop {
        StopOnDrop {
            signal: Some(self.clone()),
        }
    }

    /// The descriptor a supervisor polls: readable once fired.
    #[cfg(unix)]
    pub(crate) fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.inner.reader.as_raw_fd()
    }
}

impl std::fmt::Debug for StopSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopSignal")
            .field("stopped", &self.is_stopped())
            .finish()
    }
}

/// Two specs are equal in their signal when they share one.
impl PartialEq for StopSignal {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for StopSignal {}

/// Fires its [`StopSignal`] when dropped (see [`StopSignal::on_drop`]).
#[derive(Debug)]
pub struct StopOnDrop {
    signal: Option<StopSignal>,
}

impl StopOnDrop {
    /// Keeps the command running when the guard drops: the wait ended normally.
    pub fn disarm(mut self) {
        self.signal.take();
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(s) = self.signal.take() {
            s.stop();
        }
    }
}
