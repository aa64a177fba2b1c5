//! The watchdog of a spawned child: a thread that enforces the wall clock and the
//! watched caps ([`CapWatch`]) while the handle's owner is not waiting. It is stopped
//! before the child is reaped, so it can never signal a recycled pid, and it hands
//! the watch back so the outcome can say what it saw.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Instant;

use super::caps::{CapWatch, SAMPLE_TICK};
use super::sys;
use crate::{Cap, SandboxError};

/// A running watchdog; dropping it stops and joins the thread.
#[derive(Debug)]
pub(crate) struct Watchdog {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<CapWatch>>,
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Watchdog {
    /// Watch the child behind `pidfd` (host pid `pid`): kill it at `deadline`, or
    /// when `watch` finds a cap passed; record why in `fired`.
    pub(crate) fn start(
        pidfd: OwnedFd,
        fired: Arc<Mutex<Option<Cap>>>,
        deadline: Option<Instant>,
        mut watch: CapWatch,
        pid: i32,
        pid_ns: bool,
    ) -> Result<Watchdog, SandboxError> {
        let (stop, rx) = mpsc::channel::<()>();
        let kill = move |cap: Cap| {
            if let Ok(mut f) = fired.lock() {
                f.get_or_insert(cap);
            }
            let _ = sys::pidfd_kill(pidfd.as_raw_fd(), libc::SIGKILL);
            if !pid_ns {
                // SAFETY: kill(2) on our unreaped child's process group.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
        };
        let thread = std::thread::Builder::new()
            .name("io-harness-sandbox-watchdog".into())
            .spawn(move || {
                loop {
                    let now = Instant::now();
                    let due = [deadline, watch.next_due()].into_iter().flatten().min();
                    let wait = due.map_or(SAMPLE_TICK, |d| d.saturating_duration_since(now));
                    match rx.recv_timeout(wait) {
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        _ => return watch,
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        kill(Cap::Wall);
                        return watch;
                    }
                    if let Some(cap) = watch.tick(pid) {
                        kill(cap);
                        return watch;
                    }
                }
            })
            .map_err(SandboxError::spawn("watchdog thread"))?;
        Ok(Watchdog {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stop the thread and take the watch back.
    pub(crate) fn finish(mut self) -> Option<CapWatch> {
        self.stop.take();
        self.thread.take().and_then(|t| t.join().ok())
    }
}
