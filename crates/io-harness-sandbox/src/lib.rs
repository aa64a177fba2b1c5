//! The execution sandbox: model-produced commands run isolated, and the outcome says
//! exactly how.
//!
//! # Why this shape
//!
//! A harness that runs code a model wrote must be able to answer afterwards *was
//! this really contained?* from its records alone. So the interface is built around
//! truthfulness:
//!
//! - a [`Backend`] names itself only when it really ran ([`SandboxOutcome::backend`]);
//! - [`LayerReport`] lists the layers the child *reported applying* (namespaces,
//!   mounts, Landlock with its enforcement status, seccomp, capabilities, rlimits,
//!   cgroup controllers), never what was merely configured;
//! - [`SandboxOutcome::cap_hit`] only names a cap that was enforced, and only when
//!   its effect was observed (an OOM kill, a refused fork, a deadline kill...);
//! - a native backend that fails at run time never silently downgrades: the run
//!   fails, or — only when [`RunSpec::allow_weaker`] says so — runs on the floor and
//!   the outcome names the floor.
//!
//! # Backends
//!
//! | backend | where | what |
//! |---|---|---|
//! | [`NativeSandbox`] (`linux-namespaces`) | Linux | user, mount, pid, net, ipc, uts namespaces; an allowlisted view in a fresh root (system directories, toolchains, `read_only_paths` read-only; the workspace writable, idmapped, nosuid); host uid never 0; fresh `/proc`, minimal `/dev`; Landlock; seccomp; no capabilities; cgroup or rlimit caps |
//! | [`FloorSandbox`] (`portable-floor`) | everywhere | fresh subprocess, private `HOME`/`TMPDIR`, rlimits, wall clock, built environment; on Linux also Landlock and seccomp |
//! | `macos-sandbox-exec` | macOS | an SBPL profile ([`macos::profile_for`]) plus the floor |
//! | Windows | Windows | the floor, reported as the floor ([`windows::JobLimits`] is the mapping a Job Object will use) |
//!
//! [`select`] probes once per process — by really spawning a sandboxed `/bin/true`
//! per backend and reading back what it applied — and returns the strongest backend
//! that works; a native probe that succeeded is cached across processes for the same
//! kernel, binary and identity (only the choice: each session still reports its own
//! layers; `IO_HARNESS_PROBE_CACHE=off` turns it off). [`probe`] exposes a fresh report
//! (for `io-harness doctor`), and [`usable`] tries a real command under a backend.
//!
//! # Blocking API
//!
//! [`Sandbox::run`] blocks until the command is done; from async code call it in
//! `spawn_blocking`. Every Linux child is cloned by one long-lived spawner thread
//! (its death would fire `PR_SET_PDEATHSIG` in every child), so it is safe to call
//! from any thread, including tokio's retiring blocking pool.
//!
//! # How the native backend starts a command (Linux)
//!
//! Everything the child needs — strings, pointer arrays, mount steps, the seccomp
//! program, the Landlock ruleset — is built in the parent (`linux/prepare.rs`), since
//! the child may not allocate. The spawner thread `clone3`s the child into new
//! namespaces; the child joins its cgroups, clones the host trees of its view, gets
//! its uid/gid map (a root harness's parent writes it, mapping the command to the
//! unprivileged [`RunSpec::uid`], and hands over an idmapped clone of the workspace —
//! `linux/idmap.rs`), builds the allowlisted view in a fresh root and pivots into it
//! (`linux/mounts.rs`), and as pid 1 of its pid namespace
//! `vfork`s the command, which drops capabilities, sets limits, restricts itself
//! with Landlock and seccomp, and executes. Init reaps orphans and exits with the
//! command's status, which kills whatever is left in the namespace. The child
//! reports each layer it applied over a pipe that closes on `execve`.
//!
//! Two things are reused across sandboxes, only after the previous user is verified
//! gone: cgroup directories (creating and removing them costs more than the rest of
//! the cgroup work) and, for a root harness, network namespaces (the most expensive
//! kernel object of a start; nothing of a dead sandbox survives in one, and the
//! sandbox cannot reconfigure it). Spawn latency of `/bin/true` with every layer is
//! then below `unshare -Urnpm --fork` and about half of a comparable bubblewrap
//! (`benches/sandbox_spawn.rs`).
//!
//! ```no_run
//! use io_harness_sandbox::{self as sandbox, RunSpec};
//!
//! let sandbox = sandbox::select()?;
//! let out = sandbox.run(&RunSpec::new(["cargo", "test", "--offline"], "/path/to/workspace"))?;
//! println!("{} exit={:?} cap={:?}", out.backend, out.exit_code, out.cap_hit);
//! # Ok::<(), io_harness_sandbox::SandboxError>(())
//! ```

#![deny(clippy::undocumented_unsafe_blocks)]

mod backend;
mod capture;
mod env;
mod error;
mod floor;
#[cfg(not(target_os = "linux"))]
mod floor_std;
mod handle;
pub mod macos;
mod outcome;
#[cfg(target_os = "linux")]
mod probe_cache;
mod select;
mod spec;
mod stop;
pub mod windows;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(not(target_os = "linux"))]
mod unsupported;

pub use backend::{Backend, UnknownBackend};
pub use error::SandboxError;
pub use floor::FloorSandbox;
pub use handle::SandboxChild;
#[cfg(all(target_os = "linux", feature = "sandbox-test-disable-layers"))]
pub use linux::Layer;
#[cfg(target_os = "linux")]
pub use linux::NativeSandbox;
pub use outcome::{
    CapState, Captured, CgroupController, CpuAccounting, LandlockReport, LandlockStatus,
    LayerReport, LimitReport, MountReport, Namespace, SandboxOutcome, Teardown, ViewAccess,
    ViewEntry,
};
pub use select::{ProbeReport, probe, require, select, usable};
pub use spec::{
    Cap, DEFAULT_UID, NetworkPosture, OUTPUT_KILL_FACTOR, OutputOverflow, ProxyBridge, RunSpec,
    SandboxLimits,
};
pub use stop::{StopOnDrop, StopSignal};
#[cfg(not(target_os = "linux"))]
pub use unsupported::NativeSandbox;

/// Runs commands in isolation. Object-safe: pick one at run time with [`select`].
///
/// Both methods block. Implementations are `Send + Sync` and may be shared between
/// threads; each call is an independent sandbox.
pub trait Sandbox: Send + Sync {
    /// The backend this sandbox would use. The backend that actually ran a command
    /// is in its outcome (it differs only when [`RunSpec::allow_weaker`] let a
    /// failing native backend fall back).
    fn backend(&self) -> Backend;

    /// Run `spec` to completion: bounded output, caps enforced, everything the
    /// command started killed at the end.
    fn run(&self, spec: &RunSpec) -> Result<SandboxOutcome, SandboxError>;

    /// Start `spec` with piped stdio and return a handle. [`RunSpec::stdin`] is
    /// ignored (write to the handle's stdin instead); output is not captured.
    fn spawn(&self, spec: &RunSpec) -> Result<SandboxChild, SandboxError>;
}
