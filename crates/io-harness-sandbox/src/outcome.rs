//! What happened: the command's status, its bounded output, the cap that stopped it,
//! and an honest list of the isolation layers that were really applied.
//!
//! Every field of [`LayerReport`] is filled from what the child reported back after
//! applying a layer (or from what the parent itself did), never from configuration.

use std::path::PathBuf;
use std::time::Duration;

use super::{Backend, Cap};

/// Bounded output of one stream.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first bytes, at most the output limit.
    pub bytes: Vec<u8>,
    /// More was written than the head holds.
    pub truncated: bool,
    /// When truncated: the last bytes written after the head (at most the output
    /// limit), so the real end of the output is kept, not only its beginning.
    pub tail: Vec<u8>,
    /// Bytes the command wrote to the stream in all (read to its end, or until the
    /// command was killed for writing too much).
    pub total_bytes: u64,
}

impl std::fmt::Debug for Captured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Captured")
            .field("text", &String::from_utf8_lossy(&self.bytes))
            .field("truncated", &self.truncated)
            .field("tail", &String::from_utf8_lossy(&self.tail))
            .field("total_bytes", &self.total_bytes)
            .finish()
    }
}

impl Captured {
    /// The kept bytes as text, lossily decoded.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// The result of one sandboxed command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SandboxOutcome {
    /// The backend that actually ran it.
    pub backend: Backend,
    /// Exit code, when the command exited normally.
    pub exit_code: Option<i32>,
    /// The signal that killed it, when it did not.
    pub signal: Option<i32>,
    /// Bounded standard output.
    pub stdout: Captured,
    /// Bounded standard error.
    pub stderr: Captured,
    /// The enforced cap that stopped or truncated it, if one did (the first seen).
    pub cap_hit: Option<Cap>,
    /// Every enforced cap with what is known of it: hit, not hit, or not observable
    /// from outside (see [`CapState`]). Caps that were not enforced are absent.
    pub caps: Vec<(Cap, CapState)>,
    /// Wall time from spawn to teardown.
    pub duration: Duration,
    /// What isolation was really applied.
    pub layers: LayerReport,
    /// The caller's [`crate::StopSignal`] ended it (killed, with everything it
    /// started): no cap was hit, and its exit status says only that it was killed.
    pub stopped: bool,
    /// Files in the workspace (and extra writable directories) whose setuid or setgid
    /// bit was cleared after the session: nothing the command left can later run
    /// with its owner's identity on the host.
    pub setuid_cleared: Vec<PathBuf>,
    /// Parts of those trees the sweep could not walk or change, each made mode 0
    /// where it could be: when this is not empty the sweep is incomplete, and a
    /// setuid file may remain there.
    pub setuid_incomplete: Vec<PathBuf>,
}

impl SandboxOutcome {
    /// An outcome of `backend` with `layers` applied and nothing observed yet (no exit
    /// status, no output, no cap), for a backend or a test double to fill in.
    pub fn new(backend: Backend, layers: LayerReport) -> Self {
        Self {
            backend,
            exit_code: None,
            signal: None,
            stdout: Captured::default(),
            stderr: Captured::default(),
            cap_hit: None,
            caps: Vec::new(),
            duration: Duration::ZERO,
            layers,
            stopped: false,
            setuid_cleared: Vec::new(),
            setuid_incomplete: Vec::new(),
        }
    }

    /// Exited with status 0, no cap was hit and it was not stopped.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && self.cap_hit.is_none() && !self.stopped
    }

    /// What is known of `cap`: `None` when it was not enforced at all.
    pub fn cap_state(&self, cap: Cap) -> Option<CapState> {
        self.caps.iter().find(|(c, _)| *c == cap).map(|(_, s)| *s)
    }

    /// Whether `cap` was hit: `Some(true)`/`Some(false)` when the parent could tell,
    /// `None` when it could not (not enforced, or enforced where nothing outside sees
    /// a hit). "Not observed" is never reported as "not hit".
    pub fn cap_was_hit(&self, cap: Cap) -> Option<bool> {
        match self.cap_state(cap)? {
            CapState::Hit => Some(true),
            CapState::NotHit => Some(false),
            CapState::NotObservable => None,
        }
    }
}

/// What the parent knows of one enforced cap after the command ended.
///
/// A cap can be enforced where its hit cannot be seen from outside: `RLIMIT_NOFILE`
/// and `RLIMIT_NPROC` only make a call fail inside the sandbox. Such a cap is
/// `NotObservable`, never `NotHit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CapState {
    /// The cap was reached (and the command stopped, refused or truncated).
    Hit,
    /// The cap was watched throughout and not reached.
    NotHit,
    /// The cap was enforced, but whether it was reached cannot be seen from outside.
    NotObservable,
}

impl CapState {
    /// Stable label: `hit`, `not_hit`, `not_observable`.
    pub fn label(self) -> &'static str {
        match self {
            CapState::Hit => "hit",
            CapState::NotHit => "not_hit",
            CapState::NotObservable => "not_observable",
        }
    }
}

/// A Linux namespace the command ran in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Namespace {
    /// User namespace (uid/gid mapping, capabilities confined to it).
    User,
    /// Mount namespace (private view of the filesystem).
    Mount,
    /// Pid namespace (own pid 1; host processes invisible).
    Pid,
    /// Network namespace (loopback only).
    Net,
    /// IPC namespace (System V IPC and POSIX queues).
    Ipc,
    /// UTS namespace (hostname).
    Uts,
}

impl Namespace {
    /// Stable label: `user`, `mount`, `pid`, `net`, `ipc`, `uts`.
    pub fn label(self) -> &'static str {
        match self {
            Namespace::User => "user",
            Namespace::Mount => "mount",
            Namespace::Pid => "pid",
            Namespace::Net => "net",
            Namespace::Ipc => "ipc",
            Namespace::Uts => "uts",
        }
    }
}

/// How much of the requested Landlock ruleset the kernel enforces, as the landlock
/// crate's `RestrictionStatus` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum LandlockStatus {
    /// Every requested access right is enforced.
    FullyEnforced,
    /// Some requested rights are not known to this kernel (e.g. pathname unix
    /// socket mediation before ABI 9) and are not enforced.
    PartiallyEnforced,
    /// Landlock was not applied.
    #[default]
    NotEnforced,
}

impl LandlockStatus {
    /// Stable label: `fully`, `partially`, `not`.
    pub fn label(self) -> &'static str {
        match self {
            LandlockStatus::FullyEnforced => "fully",
            LandlockStatus::PartiallyEnforced => "partially",
            LandlockStatus::NotEnforced => "not",
        }
    }
}

/// The Landlock layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct LandlockReport {
    /// The kernel's Landlock ABI version, when it has Landlock.
    pub abi: Option<u32>,
    /// Enforcement status of the ruleset that was applied.
    pub status: LandlockStatus,
    /// TCP bind/connect were denied by Landlock (used where there is no private
    /// network namespace).
    pub tcp_denied: bool,
    /// Abstract unix sockets and signals were scoped to the sandbox (ABI 6+).
    pub scoped: bool,
}

/// A cgroup feature used to cap or tear down the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CgroupController {
    /// cgroup v1 `pids` (process cap, `pids.events`).
    V1Pids,
    /// cgroup v1 `memory` (memory cap, `memory.oom_control`).
    V1Memory,
    /// cgroup v2 `pids` controller.
    V2Pids,
    /// cgroup v2 `memory` controller.
    V2Memory,
    /// cgroup v2 `cgroup.kill` for teardown.
    V2Kill,
}

impl CgroupController {
    /// Stable label, e.g. `v1-pids`, `v2-kill`.
    pub fn label(self) -> &'static str {
        match self {
            CgroupController::V1Pids => "v1-pids",
            CgroupController::V1Memory => "v1-memory",
            CgroupController::V2Pids => "v2-pids",
            CgroupController::V2Memory => "v2-memory",
            CgroupController::V2Kill => "v2-kill",
        }
    }
}

/// How the sandbox's processes are found and killed at teardown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Teardown {
    /// Its pid namespace's init is killed, which kills every process in it.
    PidNamespace,
    /// Every process in its cgroup is killed and the cgroup is verified empty.
    Cgroup,
    /// Only its process group is killed: a daemon that starts its own session
    /// escapes. The weakest form, named as such.
    ProcessGroup,
    /// A Windows-style tree kill by the OS tool.
    ProcessTree,
}

impl Teardown {
    /// Stable label.
    pub fn label(self) -> &'static str {
        match self {
            Teardown::PidNamespace => "pid-namespace",
            Teardown::Cgroup => "cgroup",
            Teardown::ProcessGroup => "process-group",
            Teardown::ProcessTree => "process-tree",
        }
    }
}

/// How one entry of the view reaches the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ViewAccess {
    /// A host tree (or file) bound read-only, nosuid, nodev.
    ReadOnly,
    /// A host directory bound writable, nosuid, nodev (the workspace, extra writable
    /// directories).
    Writable,
    /// An empty private tmpfs (`/tmp`, the private `HOME`), gone with the sandbox.
    Private,
    /// A symbolic link, as on the host (`/bin -> usr/bin` on a merged-`/usr` system).
    Link,
}

impl ViewAccess {
    /// Stable label: `read-only`, `writable`, `private`, `link`.
    pub fn label(self) -> &'static str {
        match self {
            ViewAccess::ReadOnly => "read-only",
            ViewAccess::Writable => "writable",
            ViewAccess::Private => "private",
            ViewAccess::Link => "link",
        }
    }
}

/// One path of the allowlisted view, at the same path as on the host.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ViewEntry {
    /// The path inside (and, for host trees, on the host).
    pub path: PathBuf,
    /// How it is there.
    pub access: ViewAccess,
}

/// The filesystem view the mount namespace gave the command: an allowlist in a
/// fresh root, so a path nobody listed is absent rather than merely read-only.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct MountReport {
    /// The command's root is a fresh tmpfs holding only [`MountReport::view`]
    /// (`pivot_root`): the host root is not reachable.
    pub fresh_root: bool,
    /// A fresh `/proc` of the pid namespace replaced the host's.
    pub fresh_proc: bool,
    /// A minimal `/dev` replaced the host's.
    pub minimal_dev: bool,
    /// Every path the command can see, besides `/proc` and `/dev`.
    pub view: Vec<ViewEntry>,
    /// The workspace (and extra writable directories) were mounted idmapped: the
    /// command's unprivileged uid owns what the host owner owns.
    pub idmapped: bool,
    /// Host secrets inside read-only trees made unreadable (`/etc/shadow`, ssh host
    /// keys, `credentials.toml` of a cargo home...).
    pub excluded: Vec<PathBuf>,
    /// Paths inside the workspace made read-only (`.git`, `.io-harness`).
    pub protected: Vec<PathBuf>,
    /// Paths made unreadable because the policy denies reading them.
    pub masked: Vec<PathBuf>,
}

impl MountReport {
    /// The entries with `access`.
    pub fn paths(&self, access: ViewAccess) -> impl Iterator<Item = &PathBuf> {
        self.view
            .iter()
            .filter(move |e| e.access == access)
            .map(|e| &e.path)
    }
}

/// How the limits were enforced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LimitReport {
    /// cgroup features used.
    pub cgroup: Vec<CgroupController>,
    /// rlimits set in the child (`cpu`, `nofile`, `core`, `nproc`).
    pub rlimits: Vec<&'static str>,
    /// A sampling monitor enforced the memory cap (no memory cgroup available): the
    /// resident memory of the process tree plus the sandbox's private tmpfs mounts.
    pub memory_monitor: bool,
    /// How the CPU cap over the whole process tree was measured, when there was one.
    pub cpu_tree: Option<CpuAccounting>,
    /// A watcher enforced the disk cap on the writable host directories.
    pub disk_watch: bool,
    /// The caps that were enforced; only these can appear in `cap_hit`.
    pub enforced: Vec<Cap>,
    /// Enforced caps whose hit nothing outside the sandbox can see (`open_files`
    /// always; `processes` where only `RLIMIT_NPROC` holds it).
    pub unobservable: Vec<Cap>,
    /// How processes are killed at teardown.
    pub teardown: Vec<Teardown>,
}

/// Where the CPU time of the sandbox's whole process tree was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CpuAccounting {
    /// The cgroup's `cpu.stat` (v2): every process ever in it, exact.
    CgroupCpuStat,
    /// `/proc/<pid>/stat` of every process of the tree, with the times of reaped
    /// children (`cutime`, `cstime`), sampled.
    ProcTree,
}

impl CpuAccounting {
    /// Stable label: `cgroup-cpu-stat`, `proc-tree`.
    pub fn label(self) -> &'static str {
        match self {
            CpuAccounting::CgroupCpuStat => "cgroup-cpu-stat",
            CpuAccounting::ProcTree => "proc-tree",
        }
    }
}

/// The isolation layers really applied to one command.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LayerReport {
    /// Namespaces the command ran in.
    pub namespaces: Vec<Namespace>,
    /// The filesystem view, when a mount namespace was set up.
    pub mounts: Option<MountReport>,
    /// Landlock.
    pub landlock: LandlockReport,
    /// A seccomp filter was installed.
    pub seccomp: bool,
    /// `PR_SET_NO_NEW_PRIVS` was set.
    pub no_new_privs: bool,
    /// The command started a new session (no controlling terminal).
    pub new_session: bool,
    /// All capabilities were dropped (bounding, ambient, effective, permitted).
    pub capabilities_dropped: bool,
    /// Every inherited fd but stdio was closed.
    pub fds_closed: bool,
    /// A loopback port inside the private network namespace led to the harness's egress
    /// proxy (posture `allowlist` really in force). False for every other posture and
    /// where an allowlist could not be set up as such (then nothing left the sandbox).
    pub proxy_bridge: bool,
    /// The host uid the command ran as, when a user namespace mapped it (never 0:
    /// a root harness maps the command to [`crate::RunSpec::uid`]).
    pub host_uid: Option<u32>,
    /// Limits and teardown.
    pub limits: LimitReport,
}

impl LayerReport {
    /// Whether `cap` was enforced for this command.
    pub fn enforces(&self, cap: Cap) -> bool {
        self.limits.enforced.contains(&cap)
    }
}
