//! The watchdog of a spawned child: a thread that enforces the wall clock (and the
//! memory monitor, where no memory cgroup exists) while the handle's owner is not
//! waiting. It is stopped before the child is reaped, so it can never signal a
//! recycled pid.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use super::{monitor, sys};
use crate::{Cap, SandboxError};

/// How often the memory monitor samples.
pub(crate) const MONITOR_TICK: Duration = Duration::from_millis(50);

/// A running watchdog; dropping it stops and joins the thread.
#[derive(Debug)]
pub(crate) struct Watchdog {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
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
    /// when its tree's resident memory passes `memory`; record why in `fired`.
    pub(crate) fn start(
        pidfd: OwnedFd,
        fired: Arc<Mutex<Option<Cap>>>,
        deadline: Option<Instant>,
        memory: Option<u64>,
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
                    let mut wait =
                        deadline.map_or(MONITOR_TICK, |d| d.saturating_duration_since(now));
                    if memory.is_some() {
                        wait = wait.min(MONITOR_TICK);
                    }
                    match rx.recv_timeout(wait) {
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        kill(Cap::Wall);
                        return;
                    }
                    if let Some(m) = memory
                        && monitor::tree_rss_bytes(pid) > m
                    {
                        kill(Cap::Memory);
                        return;
                    }
                }
            })
            .map_err(SandboxError::spawn("watchdog thread"))?;
        Ok(Watchdog {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}
