//! The one long-lived thread that clones every sandboxed child.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not the
//! process; tokio's blocking pool retires idle threads, which would kill children
//! mid-run. So every `clone3` happens on this thread, which lives as long as the
//! process (its channel's sender is a static). It blocks all signals, so the
//! embedder's handlers never run on it and the child starts with nothing pending
//! (the child resets dispositions and unblocks everything itself).
//!
//! The thread only creates the pipes and clones; waiting, cgroup placement and
//! output handling happen on the caller's thread.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;
use std::sync::mpsc;

use super::child::{self, ChildFds};
use super::plan::{ChildPlan, IdMaps};
use crate::SandboxError;

type Job = Box<dyn FnOnce() + Send>;

fn spawner() -> Option<&'static mpsc::Sender<Job>> {
    static TX: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("io-harness-spawner".into())
            .spawn(move || {
                block_all_signals();
                for job in rx {
                    // A panicking job must not end this thread: its exit would
                    // SIGKILL every sandbox it ever started.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            })
            .ok()
            .map(|_| tx)
    })
    .as_ref()
}

fn block_all_signals() {
    // SAFETY: sigfillset initialises the set; pthread_sigmask only changes this
    // thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Run `f` on the spawner thread and return its result.
fn on_spawner<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<R, SandboxError> {
    let tx = spawner().ok_or_else(|| SandboxError::Spawn {
        stage: "spawner thread",
        source: std::io::Error::other("could not start the spawner thread"),
    })?;
    let (rtx, rrx) = mpsc::sync_channel(1);
    tx.send(Box::new(move || {
        let _ = rtx.send(f());
    }))
    .map_err(|_| SandboxError::Spawn {
        stage: "spawner thread",
        source: std::io::Error::other("spawner thread is gone"),
    })?;
    rrx.recv().map_err(|_| SandboxError::Spawn {
        stage: "spawner thread",
        source: std::io::Error::other("spawner job panicked"),
    })
}

/// Parent-side ends of a freshly cloned child.
#[derive(Debug)]
pub(crate) struct Launched {
    /// Host pid of the child (init of its pid namespace, or the command).
    pub pid: i32,
    /// pidfd of the child.
    pub pidfd: OwnedFd,
    /// Write end of the child's stdin, when it is a pipe.
    pub stdin: Option<OwnedFd>,
    /// Read end of stdout.
    pub stdout: OwnedFd,
    /// Read end of stderr.
    pub stderr: OwnedFd,
    /// Read end of the exec pipe (layer report, or the failure).
    pub exec_r: OwnedFd,
    /// Read end of the status pipe (init's report of the command's status).
    pub status_r: OwnedFd,
    /// The parent's end of the socket pair the egress bridge listener arrives on.
    pub bridge: Option<OwnedFd>,
}

/// stdin of the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stdin {
    /// `/dev/null`.
    Null,
    /// A pipe the parent writes.
    Pipe,
}

/// A pipe whose both ends are numbered 3 or above and close-on-exec.
fn pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(SandboxError::Spawn {
            stage: "pipe",
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: pipe2 just returned these two fds, owned by nobody else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stdio(r)?, above_stdio(w)?))
}

/// Make sure `fd` is not 0, 1 or 2 (possible when the embedder closed its stdio),
/// so the child's `dup2` onto 0..2 cannot clobber it.
fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, SandboxError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC on an fd we own returns a new fd we then own.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(SandboxError::Spawn {
            stage: "dup fd",
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: fcntl just returned this fd.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// A unix socket pair (datagram-like, for one fd), both ends above stdio and
/// close-on-exec: `(parent, child)`.
fn socket_pair() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid two-element array.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(SandboxError::Spawn {
            stage: "socketpair",
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: socketpair just returned these two fds, owned by nobody else.
    let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stdio(a)?, above_stdio(b)?))
}

fn dev_null() -> Result<OwnedFd, SandboxError> {
    let f = std::fs::File::open("/dev/null").map_err(SandboxError::spawn("open /dev/null"))?;
    above_stdio(OwnedFd::from(f))
}

/// `struct clone_args` of `clone3(2)`.
#[repr(C)]
#[derive(Default)]
pub(crate) struct CloneArgs {
    pub(crate) flags: u64,
    pub(crate) pidfd: u64,
    pub(crate) child_tid: u64,
    pub(crate) parent_tid: u64,
    pub(crate) exit_signal: u64,
    pub(crate) stack: u64,
    pub(crate) stack_size: u64,
    pub(crate) tls: u64,
    pub(crate) set_tid: u64,
    pub(crate) set_tid_size: u64,
    pub(crate) cgroup: u64,
}

/// Clone a child that runs `plan`. Returns the parent's ends and the plan (for error descriptions).
pub(crate) fn launch(plan: ChildPlan, stdin: Stdin) -> Result<(Launched, ChildPlan), SandboxError> {
    on_spawner(move || launch_here(plan, stdin))?
}

/// The parent's ends of a child's pipes and bridge socket.
struct ParentEnds {
    stdin: Option<OwnedFd>,
    stdout: OwnedFd,
    stderr: OwnedFd,
    exec_r: OwnedFd,
    status_r: OwnedFd,
    bridge: Option<OwnedFd>,
}

impl ParentEnds {
    fn launched(self, pid: i32, pidfd: OwnedFd) -> Launched {
        Launched {
            pid,
            pidfd,
            stdin: self.stdin,
            stdout: self.stdout,
            stderr: self.stderr,
            exec_r: self.exec_r,
            status_r: self.status_r,
            bridge: self.bridge,
        }
    }
}

/// The child's ends, held open until it is cloned and then closed in the parent.
struct ChildEnds {
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    exec_w: OwnedFd,
    status_w: OwnedFd,
    bridge: Option<OwnedFd>,
    release: Option<OwnedFd>,
}

impl ChildEnds {
    fn fds(&self) -> ChildFds {
        ChildFds {
            stdin: self.stdin.as_raw_fd(),
            stdout: self.stdout.as_raw_fd(),
            stderr: self.stderr.as_raw_fd(),
            exec_w: self.exec_w.as_raw_fd(),
            status_w: self.status_w.as_raw_fd(),
            bridge: self.bridge.as_ref().map_or(-1, |b| b.as_raw_fd()),
            release: self.release.as_ref().map_or(-1, |r| r.as_raw_fd()),
        }
    }
}

/// The pipes (stdout, stderr, exec, status, stdin) and, for a bridge, the socket
/// pair of one child.
fn ends(
    stdin: Stdin,
    bridge: bool,
    release: bool,
) -> Result<(ParentEnds, ChildEnds, Option<OwnedFd>), SandboxError> {
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (exec_r, exec_w) = pipe()?;
    let (status_r, status_w) = pipe()?;
    let (stdin_child, stdin_parent) = match stdin {
        Stdin::Null => (dev_null()?, None),
        Stdin::Pipe => {
            let (r, w) = pipe()?;
            (r, Some(w))
        }
    };
    let (bridge_parent, bridge_child) = if bridge {
        let (p, c) = socket_pair()?;
        (Some(p), Some(c))
    } else {
        (None, None)
    };
    let (release_r, release_w) = if release {
        let (r, w) = pipe()?;
        (Some(r), Some(w))
    } else {
        (None, None)
    };
    Ok((
        ParentEnds {
            stdin: stdin_parent,
            stdout: out_r,
            stderr: err_r,
            exec_r,
            status_r,
            bridge: bridge_parent,
        },
        ChildEnds {
            stdin: stdin_child,
            stdout: out_w,
            stderr: err_w,
            exec_w,
            status_w,
            bridge: bridge_child,
            release: release_r,
        },
        release_w,
    ))
}

fn launch_here(mut plan: ChildPlan, stdin: Stdin) -> Result<(Launched, ChildPlan), SandboxError> {
    let by_parent = matches!(plan.id_maps, Some(IdMaps::ByParent { .. }));
    let (parent, child, release) = ends(stdin, plan.bridge_port.is_some(), by_parent)?;
    let fds = child.fds();
    let (pid, pidfd, mut plan) = if !plan.pid_ns && plan.clone_flags == 0 {
        // No namespaces: the child execs right away, so it can share our memory
        // until then (vfork) instead of copying the page tables.
        launch_vfork(plan, fds)?
    } else {
        let (pid, pidfd) = launch_clone3(&mut plan, fds)?;
        if let (
            Some(IdMaps::ByParent {
                uid_map, gid_map, ..
            }),
            Some(w),
        ) = (&plan.id_maps, release)
        {
            release_child(pid, uid_map, gid_map, w);
        }
        (pid, pidfd, plan)
    };
    // The child holds its own copies of the idmapped clones now.
    plan.premounted.clear();
    drop(child);
    Ok((parent.launched(pid, pidfd), plan))
}

/// Write the child's id maps (a root parent may map any uid) and release it. On a
/// failure the release pipe closes unwritten, and the child reports the id-map stage
/// as failed.
fn release_child(pid: i32, uid_map: &[u8], gid_map: &[u8], release: OwnedFd) {
    let written = std::fs::write(format!("/proc/{pid}/uid_map"), uid_map)
        .and_then(|()| std::fs::write(format!("/proc/{pid}/gid_map"), gid_map));
    match written {
        Ok(()) => {
            let _ = super::sys::write_all(release.as_raw_fd(), b"1");
        }
        Err(e) => tracing::warn!(error = %e, "could not write the sandbox's id maps"),
    }
}

/// Clones the child with `clone3` into its new namespaces (inside the pooled network
/// namespace when the plan has one); the child runs only `child_main`.
fn launch_clone3(plan: &mut ChildPlan, fds: ChildFds) -> Result<(i32, OwnedFd), SandboxError> {
    let mut pidfd: libc::c_int = -1;
    let args = CloneArgs {
        flags: plan.clone_flags | libc::CLONE_PIDFD as u64,
        pidfd: &mut pidfd as *mut libc::c_int as u64,
        exit_signal: libc::SIGCHLD as u64,
        ..CloneArgs::default()
    };
    let clone = |plan: &mut ChildPlan| {
        // SAFETY: clone3 without CLONE_VM and with no stack duplicates the process
        // like fork; args is a valid clone_args of the size passed. In the child only
        // child_main runs, which makes raw system calls and never returns.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone3,
                &args as *const CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            )
        };
        if pid == 0 {
            child::child_main(plan, fds);
        }
        if pid < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(pid)
        }
    };
    let netns = plan.netns.take();
    let pid = match &netns {
        Some(ns) => super::netns::inside(ns, || clone(plan)).and_then(|r| r),
        None => clone(plan),
    };
    plan.netns = netns;
    let pid = pid.map_err(|source| SandboxError::Spawn {
        stage: "clone3",
        source,
    })?;
    // SAFETY: CLONE_PIDFD stored a new pidfd owned by us.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok((pid as i32, pidfd))
}

/// What the vfork'ed child gets.
struct VforkArgs {
    plan: *mut ChildPlan,
    fds: ChildFds,
}

extern "C" fn vfork_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points to the VforkArgs on the parent's stack; the parent is
    // suspended (CLONE_VFORK) until this child execs or exits, so the plan it points
    // to is valid and not accessed by anyone else meanwhile.
    let args = unsafe { &mut *(arg as *mut VforkArgs) };
    // SAFETY: as above; the plan outlives the child's use of it.
    let plan = unsafe { &mut *args.plan };
    child::child_main(plan, args.fds)
}

fn launch_vfork(
    mut plan: ChildPlan,
    fds: ChildFds,
) -> Result<(i32, OwnedFd, ChildPlan), SandboxError> {
    let mut stack = std::mem::take(&mut plan.vfork_stack);
    let mut args = VforkArgs {
        plan: &mut plan,
        fds,
    };
    let r = super::sys::vfork_on(
        &mut stack,
        vfork_entry,
        (&mut args as *mut VforkArgs).cast(),
    );
    plan.vfork_stack = stack;
    let pid = r.map_err(|e| SandboxError::Spawn {
        stage: "clone",
        source: std::io::Error::from_raw_os_error(e),
    })?;
    // The child has exec'd or exited but is not reaped, so its pid is still ours.
    // SAFETY: pidfd_open with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(SandboxError::Spawn {
            stage: "pidfd_open",
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: pidfd_open returned a new fd we own.
    Ok((pid, unsafe { OwnedFd::from_raw_fd(fd as RawFd) }, plan))
}
