//! What the caller asks for: the command, where it runs, its limits and its network.
//!
//! A [`RunSpec`] is plain data. It says nothing about *how* the isolation is done —
//! that is the backend's job — so the same spec runs unchanged under every backend,
//! and the [`crate::SandboxOutcome`] says what was really applied.

use std::path::PathBuf;

/// Whether sandboxed code may reach the network.
///
/// `None` is the default: the native backend gives the child a private network
/// namespace with only a loopback interface, so there is no route out at all.
/// `Allowlist` is the same private namespace plus one loopback port that leads to the
/// harness's egress proxy ([`RunSpec::proxy`]); where there is no private network
/// namespace (the floor) it is enforced as `None` and the outcome says so
/// ([`crate::LayerReport::proxy_bridge`] is false).
/// `Open` is an explicit operator choice and is recorded as such.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum NetworkPosture {
    /// No route out (private network namespace, or a filter where there is none).
    #[default]
    None,
    /// No route out but through the egress proxy's bridge (see [`ProxyBridge`]).
    Allowlist,
    /// The host's network, unfiltered. Only by explicit choice.
    Open,
}

impl NetworkPosture {
    /// The stable label used in records: `none`, `allowlist` or `open`.
    pub fn label(self) -> &'static str {
        match self {
            NetworkPosture::None => "none",
            NetworkPosture::Allowlist => "allowlist",
            NetworkPosture::Open => "open",
        }
    }
}

/// How an [`NetworkPosture::Allowlist`] sandbox reaches the egress proxy: a TCP
/// listener on `127.0.0.1:port` *inside* the sandbox's private network namespace, whose
/// connections the harness pipes, on the host side, to the unix socket `to_unix` (where
/// the egress proxy (`io_harness_egress::EgressProxy`) listens). The listener is created by the sandbox's init
/// inside the namespace and handed to the harness over a socket pair before the command
/// starts, so the command never holds it and the proxy socket stays hidden from it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProxyBridge {
    /// The loopback port inside the sandbox (the command's `HTTP(S)_PROXY` points at it).
    pub port: u16,
    /// The proxy's unix socket on the host.
    pub to_unix: PathBuf,
}

/// One resource cap, as reported in [`crate::SandboxOutcome::cap_hit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cap {
    /// Killed for the CPU time of its whole process tree (cgroup `cpu.stat`, or the
    /// tree sampled from `/proc` with reaped children's times), or one process killed
    /// by its own `RLIMIT_CPU`.
    Cpu,
    /// An out-of-memory kill was observed (cgroup event or the monitor's kill).
    Memory,
    /// Killed at the wall-clock deadline.
    Wall,
    /// A fork was refused at the process limit (cgroup `pids.events`), or — held by
    /// `RLIMIT_NPROC`, whose refusals nothing outside sees — the tree was sampled at
    /// the limit.
    Processes,
    /// The open-file limit. Enforced by `RLIMIT_NOFILE`, which only makes `open`
    /// fail inside; nothing outside can observe it, so it is never reported hit
    /// ([`crate::CapState::NotObservable`]).
    OpenFiles,
    /// Output was truncated at the limit.
    Output,
    /// The writable host directories (the workspace) grew past the disk cap: killed
    /// by the disk watcher, or by `RLIMIT_FSIZE` (one file reached the cap).
    Disk,
}

impl Cap {
    /// The stable label used in records (`cpu`, `memory`, `wall`, `processes`,
    /// `open_files`, `output`).
    pub fn label(self) -> &'static str {
        match self {
            Cap::Cpu => "cpu",
            Cap::Memory => "memory",
            Cap::Wall => "wall",
            Cap::Processes => "processes",
            Cap::OpenFiles => "open_files",
            Cap::Output => "output",
            Cap::Disk => "disk",
        }
    }
}

/// What happens to output past [`SandboxLimits::output_bytes`] (`limits.output_overflow`
/// in the task file).
///
/// ```
/// use io_harness_sandbox::OutputOverflow;
/// assert_eq!(OutputOverflow::default(), OutputOverflow::Tail);
/// assert_eq!(OutputOverflow::Tail.kill_at(1024), 64 * 1024);
/// assert_eq!(OutputOverflow::Kill.kill_at(1024), 1024);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum OutputOverflow {
    /// Keep draining: the head and the true tail are kept (a ring buffer holds the
    /// tail), and the command is killed only once a stream passes
    /// [`OUTPUT_KILL_FACTOR`] times the cap — a runaway writer does not run to its wall
    /// clock, and a long build log still shows its summary.
    #[default]
    Tail,
    /// Kill the command as soon as a stream passes the cap.
    Kill,
}

/// With [`OutputOverflow::Tail`], a stream this many times the output cap gets the
/// command killed (recorded as the `output` cap hit).
pub const OUTPUT_KILL_FACTOR: u64 = 64;

impl OutputOverflow {
    /// Bytes of one stream past which the command is killed, for an output cap of
    /// `cap` bytes.
    pub fn kill_at(self, cap: u64) -> u64 {
        match self {
            Self::Tail => cap.saturating_mul(OUTPUT_KILL_FACTOR),
            Self::Kill => cap,
        }
    }

    /// The task-file word: `tail` or `kill`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tail => "tail",
            Self::Kill => "kill",
        }
    }
}

/// Resource caps for one sandboxed command. `None` means unbounded.
///
/// The defaults are those of the task file (`[sandbox] limits`): 600 s of CPU,
/// 900 s of wall clock, 4 GiB of memory, 512 processes, 1024 open files, 1 MiB of
/// captured output per stream and 8 GiB of workspace growth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SandboxLimits {
    /// CPU seconds of the whole process tree (and of each process, `RLIMIT_CPU`).
    pub cpu_secs: Option<u64>,
    /// Wall-clock seconds for the whole sandbox.
    pub wall_secs: Option<u64>,
    /// Memory in bytes for the whole sandbox (cgroup), or its process tree's resident
    /// memory plus its private tmpfs mounts (monitor).
    pub memory_bytes: Option<u64>,
    /// Processes (tasks) alive at once in the sandbox.
    pub processes: Option<u64>,
    /// Open files per process (`RLIMIT_NOFILE`).
    pub open_files: Option<u64>,
    /// Bytes of stdout and of stderr kept as head (and as much again as tail, see
    /// [`OutputOverflow`]); the middle is drained and dropped.
    pub output_bytes: Option<u64>,
    /// Bytes the writable host directories (the workspace) may grow by: no file
    /// larger (`RLIMIT_FSIZE`), and the whole growth watched.
    pub disk_bytes: Option<u64>,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            cpu_secs: Some(600),
            wall_secs: Some(900),
            memory_bytes: Some(4 << 30),
            processes: Some(512),
            open_files: Some(1024),
            output_bytes: Some(1 << 20),
            disk_bytes: Some(8 << 30),
        }
    }
}

impl SandboxLimits {
    /// No caps at all. Useful for long-lived helpers whose lifetime the caller owns.
    pub fn unbounded() -> Self {
        Self {
            cpu_secs: None,
            wall_secs: None,
            memory_bytes: None,
            processes: None,
            open_files: None,
            output_bytes: None,
            disk_bytes: None,
        }
    }
}

/// The default [`RunSpec::uid`]: `nobody`.
pub const DEFAULT_UID: u32 = 65534;

/// One command to run in a sandbox.
///
/// Build it with [`RunSpec::new`] and adjust the public fields. The environment is
/// *built*, never inherited: only `env` reaches the child, plus defaults for
/// `PATH`, `LANG` and `TERM` when `env` lacks them; `HOME` and `TMPDIR` always point
/// at private, empty directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec {
    /// Program and arguments. `argv[0]` is looked up in the child's `PATH` when it
    /// has no `/`.
    pub argv: Vec<String>,
    /// The directory the command runs in; the host directory it may write (with
    /// `writable_paths`).
    pub workdir: PathBuf,
    /// Extra host directories the command may write, outside `workdir` (a gate's
    /// fresh report directory). Each must exist and be a directory.
    pub writable_paths: Vec<PathBuf>,
    /// Resource caps.
    pub limits: SandboxLimits,
    /// Network posture.
    pub network: NetworkPosture,
    /// With [`NetworkPosture::Allowlist`]: where the in-sandbox proxy port leads.
    /// Without it, an allowlist posture has no route at all.
    pub proxy: Option<ProxyBridge>,
    /// The child's environment, as built by the caller (names the contract allows).
    pub env: Vec<(String, String)>,
    /// Extra host paths made visible read-only (toolchains outside the defaults,
    /// an MCP server's install directory): the view is an allowlist, so a path
    /// nobody lists is absent.
    pub read_only_paths: Vec<PathBuf>,
    /// Files or directories the policy denies for reading (e.g. `.env` in the
    /// workspace). Relative paths are taken from `workdir`. Made unreadable inside.
    pub masked_paths: Vec<PathBuf>,
    /// The host uid (and gid) a root harness runs the command as, through the user
    /// namespace's map; default 65534 (`nobody`). Never 0: the command never holds host
    /// root's identity (a 0 here is refused). An unprivileged harness can only map
    /// its own uid, and does.
    pub uid: u32,
    /// More workspace paths made read-only besides `workdir`'s own `.git` and
    /// `.io-harness` (a nested repository's `.git` that existed before the run), so
    /// their hooks and config cannot be changed to run later on the host. Relative
    /// paths are taken from `workdir`; a path that does not exist, is a symlink or
    /// leaves `workdir` is skipped.
    pub protected_paths: Vec<PathBuf>,
    /// Bytes fed to the command's stdin by [`crate::Sandbox::run`]; empty
    /// means stdin reads end-of-file at once.
    pub stdin: Vec<u8>,
    /// If the chosen native backend fails at run time, run on the portable floor
    /// instead — the outcome then names the floor. Off by default: a failing
    /// native backend is an error, never a silent downgrade.
    pub allow_weaker: bool,
    /// Fired by the caller to end the command early ([`crate::StopSignal`]); `None`
    /// runs it to its end or its caps.
    pub stop: Option<crate::StopSignal>,
    /// The command may not start another process or program: `fork`, `vfork`, a
    /// `clone` without `CLONE_THREAD` and every `execve`/`execveat` after the one
    /// that starts it are refused (EPERM) by an extra seccomp program; threads still
    /// work. A Rust gate's test process runs so, so no child of it (a forked copy, the
    /// test binary run again) can learn or report a verdict. Applied with the
    /// native backend's seccomp layer only (the portable floor has none).
    pub single_process: bool,
    /// What happens to output past the output cap: keep the true tail (and kill at
    /// [`OUTPUT_KILL_FACTOR`] caps), or kill at the cap.
    pub output_overflow: OutputOverflow,
    /// Pass the command's output on to this process's own stdout and stderr as it
    /// arrives (the head, up to the output cap), besides capturing it: a one-off
    /// command shows its progress live instead of all at its exit.
    pub echo_output: bool,
}

impl RunSpec {
    /// A spec with the default limits, no network and an empty environment.
    pub fn new<I, S>(argv: I, workdir: impl Into<PathBuf>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            argv: argv.into_iter().map(Into::into).collect(),
            workdir: workdir.into(),
            writable_paths: Vec::new(),
            limits: SandboxLimits::default(),
            network: NetworkPosture::None,
            proxy: None,
            env: Vec::new(),
            read_only_paths: Vec::new(),
            masked_paths: Vec::new(),
            uid: DEFAULT_UID,
            protected_paths: Vec::new(),
            stdin: Vec::new(),
            allow_weaker: false,
            stop: None,
            single_process: false,
            output_overflow: OutputOverflow::Tail,
            echo_output: false,
        }
    }
}
