//! A pool of private network namespaces, for a harness running as root.
//!
//! Creating a network namespace is the most expensive part of a sandbox's start
//! (about half a millisecond of kernel time here), and destroying one is deferred
//! kernel work that slows the next creation. Yet a network namespace whose processes
//! are all dead keeps nothing a later sandbox could see: its sockets died with their
//! owners, and its configuration (addresses, routes, netfilter, sysctls) cannot be
//! changed from inside, because the namespace belongs to the initial user namespace
//! and the sandbox holds no capability there. So when the harness is root, each
//! sandbox gets a namespace from this pool — loopback already up — and gives it back
//! at teardown, once every process of the sandbox is verified gone. It is never
//! shared by two live sandboxes.
//!
//! The spawner thread enters the namespace just before `clone3` and returns to its
//! own right after, so the child starts inside it without `CLONE_NEWNET`.
//! Unprivileged harnesses create a namespace per sandbox as before.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use super::sys;

/// Idle namespaces kept at most.
const POOL_MAX: usize = 32;

struct Pool {
    idle: Mutex<Vec<OwnedFd>>,
}

/// The pool, when this process may create and enter network namespaces.
fn pool() -> Option<&'static Pool> {
    static POOL: OnceLock<Option<Pool>> = OnceLock::new();
    POOL.get_or_init(|| {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        // Prove it works once, off the spawner thread.
        let first = std::thread::spawn(create).join().ok().flatten()?;
        Some(Pool {
            idle: Mutex::new(vec![first]),
        })
    })
    .as_ref()
}

/// Create a network namespace with `lo` up, on the calling thread, and return to
/// the thread's namespace. Runs on a short-lived thread so that a failure half way
/// can never leave a long-lived thread in the wrong namespace.
fn create() -> Option<OwnedFd> {
    let own = open_ns()?;
    // SAFETY: unshare with a namespace flag affects only this thread's nsproxy.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return None;
    }
    let new = open_ns();
    let up = sys::loopback_up().is_ok();
    // SAFETY: returning this thread to its original network namespace.
    let back = unsafe { libc::setns(own.as_raw_fd(), libc::CLONE_NEWNET) } == 0;
    (up && back).then_some(new).flatten()
}

fn open_ns() -> Option<OwnedFd> {
    // SAFETY: open of a NUL-terminated path; the result is checked.
    let fd = unsafe {
        libc::open(
            c"/proc/thread-self/ns/net".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    // SAFETY: a successful open returns a new fd we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A namespace for one sandbox: from the pool, or freshly created. `None` when the
/// pool is not available (not root): the child then gets `CLONE_NEWNET`.
pub(crate) fn take() -> Option<OwnedFd> {
    let pool = pool()?;
    let idle = pool.idle.lock().ok().and_then(|mut v| v.pop());
    idle.or_else(|| std::thread::spawn(create).join().ok().flatten())
}

/// Return a namespace whose sandbox is verified gone.
pub(crate) fn give(ns: OwnedFd) {
    if let Some(pool) = pool()
        && let Ok(mut idle) = pool.idle.lock()
        && idle.len() < POOL_MAX
    {
        idle.push(ns);
    }
}

/// Run `f` on the calling (spawner) thread while it is inside `ns`, then return the
/// thread to its own namespace. If returning fails — which would leave the thread
/// in a sandbox's namespace — every later spawn fails instead of running there.
pub(crate) fn inside<R>(ns: &OwnedFd, f: impl FnOnce() -> R) -> std::io::Result<R> {
    static POISONED: AtomicBool = AtomicBool::new(false);
    thread_local! {
        static OWN: Option<OwnedFd> = open_ns();
    }
    if POISONED.load(Ordering::SeqCst) {
        return Err(std::io::Error::other(
            "the spawner thread lost its network namespace",
        ));
    }
    let own = OWN.with(|o| o.as_ref().map(|fd| fd.as_raw_fd()));
    let own = own.ok_or_else(|| std::io::Error::other("cannot open the own network namespace"))?;
    // SAFETY: setns of this thread into a network namespace fd we hold.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let r = f();
    // SAFETY: setns of this thread back into its original network namespace.
    if unsafe { libc::setns(own, libc::CLONE_NEWNET) } != 0 {
        POISONED.store(true, Ordering::SeqCst);
        return Err(std::io::Error::last_os_error());
    }
    Ok(r)
}
