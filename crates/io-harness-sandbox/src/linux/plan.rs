//! Everything the child needs, built in the parent before `clone`.
//!
//! Between `clone` and `execve` the child may not allocate (another thread of the
//! parent may have held the allocator's lock at the moment of the clone), so every
//! string, pointer array, BPF program, mount step and the Landlock ruleset are
//! prepared here and the child only walks them.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use libc::c_char;

use super::mounts::MountPlan;
use crate::SandboxError;

/// Bits of [`crate::linux::child::Report::applied`]: which layers the child
/// really applied.
pub(crate) mod bit {
    pub const ID_MAP: u32 = 1 << 0;
    pub const MOUNTS: u32 = 1 << 1;
    pub const HOSTNAME: u32 = 1 << 2;
    pub const LOOPBACK: u32 = 1 << 3;
    pub const SETSID: u32 = 1 << 4;
    pub const RLIMITS: u32 = 1 << 5;
    pub const CAPS: u32 = 1 << 6;
    pub const NNP: u32 = 1 << 7;
    pub const LANDLOCK: u32 = 1 << 8;
    pub const SECCOMP: u32 = 1 << 9;
    pub const FDS: u32 = 1 << 10;
    pub const CHDIR: u32 = 1 << 11;
    pub const CGROUP: u32 = 1 << 12;
    pub const BRIDGE: u32 = 1 << 13;
}

/// The program to execute, with NULL-terminated pointer arrays into owned strings.
pub(crate) struct ExecPlan {
    /// Paths to try in order (the `PATH` search done ahead of time).
    pub candidates: Vec<CString>,
    _argv: Vec<CString>,
    _envp: Vec<CString>,
    argv_ptrs: Vec<*const c_char>,
    envp_ptrs: Vec<*const c_char>,
}

// SAFETY: the raw pointers point into the heap buffers of the CStrings owned by the
// same struct; those buffers do not move when the struct moves, and nothing mutates
// them, so sending the plan to the spawner thread keeps every pointer valid.
unsafe impl Send for ExecPlan {}

impl ExecPlan {
    /// Prepare `argv` and `envp`; `candidates` are the paths `execve` will try.
    pub fn new(
        argv: &[String],
        env: &[(String, String)],
        candidates: Vec<CString>,
    ) -> Result<Self, SandboxError> {
        let cstr = |s: String| {
            CString::new(s).map_err(|_| SandboxError::invalid("a NUL byte in argv or env"))
        };
        let argv: Vec<CString> = argv.iter().cloned().map(cstr).collect::<Result<_, _>>()?;
        let envp: Vec<CString> = env
            .iter()
            .map(|(k, v)| cstr(format!("{k}={v}")))
            .collect::<Result<_, _>>()?;
        let mut argv_ptrs: Vec<*const c_char> = argv.iter().map(|c| c.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        let mut envp_ptrs: Vec<*const c_char> = envp.iter().map(|c| c.as_ptr()).collect();
        envp_ptrs.push(std::ptr::null());
        Ok(Self {
            candidates,
            _argv: argv,
            _envp: envp,
            argv_ptrs,
            envp_ptrs,
        })
    }

    /// `argv[0]`, for error messages.
    pub fn program(&self) -> String {
        self._argv
            .first()
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// NULL-terminated `argv`.
    pub fn argv(&self) -> *const *const c_char {
        self.argv_ptrs.as_ptr()
    }

    /// NULL-terminated `envp`.
    pub fn envp(&self) -> *const *const c_char {
        self.envp_ptrs.as_ptr()
    }
}

/// Landlock work left for the child: rules on inodes that only exist inside the
/// sandbox (its private tmpfs mounts), then `landlock_restrict_self`.
pub(crate) struct LandlockChild {
    /// The ruleset, created and filled by the parent with the landlock crate.
    pub ruleset: OwnedFd,
    /// `(path, access)` rules the child adds after its mounts exist.
    pub rules: Vec<(CString, u64)>,
}

impl LandlockChild {
    /// The ruleset fd number.
    pub fn fd(&self) -> RawFd {
        self.ruleset.as_raw_fd()
    }
}

/// The user namespace's uid/gid maps, and who writes them.
pub(crate) enum IdMaps {
    /// The child maps the caller's own ids (one line each), which needs no privilege.
    Own {
        uid: u32,
        uid_map: Vec<u8>,
        gid_map: Vec<u8>,
    },
    /// A root caller: the parent writes maps to `uid` (only a process privileged in
    /// the parent namespace may map another uid), then releases the child, which
    /// becomes `uid` with no supplementary groups.
    ByParent {
        uid: u32,
        uid_map: Vec<u8>,
        gid_map: Vec<u8>,
    },
}

impl IdMaps {
    /// The host uid the command runs as.
    pub fn host_uid(&self) -> u32 {
        match self {
            IdMaps::Own { uid, .. } | IdMaps::ByParent { uid, .. } => *uid,
        }
    }
}

/// Entries of [`ChildPlan::keep`] the child fills itself (its pipes, the ruleset).
pub(crate) const KEEP_FIXED: usize = 5;

/// The complete recipe for one sandboxed child.
pub(crate) struct ChildPlan {
    /// Namespace flags for `clone3`.
    pub clone_flags: u64,
    /// A pooled network namespace the child is cloned into (instead of
    /// `CLONE_NEWNET`), returned to the pool after teardown.
    pub netns: Option<OwnedFd>,
    /// A pid namespace: the child is its init and forks the command.
    pub pid_ns: bool,
    /// uid/gid maps (with a user namespace).
    pub id_maps: Option<IdMaps>,
    /// Mount steps (with a mount namespace).
    pub mounts: Option<MountPlan>,
    /// Hostname inside (with a uts namespace).
    pub hostname: Option<&'static [u8]>,
    /// Bring `lo` up (with a network namespace).
    pub loopback: bool,
    /// Listen on `127.0.0.1:port` inside the private network namespace and hand the
    /// listener to the parent (the egress bridge).
    pub bridge_port: Option<u16>,
    /// Start a new session.
    pub setsid: bool,
    /// `(resource, soft, hard)` rlimits.
    pub rlimits: Vec<(libc::c_int, u64, u64)>,
    /// Working directory.
    pub workdir: CString,
    /// Drop all capabilities up to this number (`/proc/sys/kernel/cap_last_cap`).
    pub drop_caps: Option<u32>,
    /// Landlock.
    pub landlock: Option<LandlockChild>,
    /// seccomp programs, installed in order.
    pub seccomp: Vec<Vec<libc::sock_filter>>,
    /// What to execute.
    pub exec: ExecPlan,
    /// Layer bits whose failure aborts the launch (all of them, except in a probe).
    pub required: u32,
    /// Slots for detached mount trees, sized by the mount plan; those of
    /// `premounted` are filled by the parent.
    pub slots: Vec<RawFd>,
    /// Idmapped clones the parent made (it alone may), moved into place by the child.
    pub premounted: Vec<OwnedFd>,
    /// The fds the child keeps when it closes the rest: [`KEEP_FIXED`] it fills, then
    /// `premounted`'s. Allocated here, since the child may not.
    pub keep: Vec<RawFd>,
    /// Signals the harness ignores (exec keeps them ignored): the command resets
    /// these to the default. Caught signals are reset by exec itself.
    pub ignored_signals: u64,
    /// `cgroup.procs` files the child writes itself into, before anything else.
    pub cgroup_procs: Vec<CString>,
    /// Stack of the command process while it shares init's memory (vfork).
    pub vfork_stack: Vec<u8>,
}

/// Size of [`ChildPlan::vfork_stack`].
pub(crate) const VFORK_STACK: usize = 64 * 1024;
