//! The Linux backends: the native one (`linux-namespaces`) and the Linux form of the
//! portable floor, which share the spawner, the child code and the supervisor and
//! differ only in the plan ([`prepare::Mode`]).

mod bridge;
mod caps;
mod cgroup;
mod child;
mod disk;
mod host;
mod idmap;
mod landlock;
mod monitor;
mod mounts;
mod netns;
mod pipes;
mod plan;
mod prepare;
mod seccomp;
mod secrets;
mod session;
mod spawn;
mod suid;
mod sys;
mod tmpfs;
mod walk;
mod watchdog;

use std::process::{ChildStderr, ChildStdin, ChildStdout};

use prepare::{Mode, prepare};
use session::Session;
use spawn::Stdin;

use super::handle::{ChildControl, SandboxChild};
use super::{Backend, LayerReport, RunSpec, Sandbox, SandboxError, SandboxOutcome};

/// An isolation layer that a test can switch off to prove the containment test for
/// it can fail. Only with the `sandbox-test-disable-layers` feature; nothing in a
/// release build can reach it.
#[cfg(feature = "sandbox-test-disable-layers")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Layer {
    /// The seccomp filter.
    Seccomp,
    /// Landlock.
    Landlock,
    /// The network namespace.
    NetNs,
    /// The pid namespace (and with it the fresh `/proc` and pid-1 teardown).
    PidNs,
    /// The mount namespace and every mount step (the allowlisted view, masks).
    MountNs,
    /// cgroups.
    Cgroup,
    /// `setsid`.
    Setsid,
    /// Dropping capabilities.
    Capabilities,
    /// The ipc namespace.
    IpcNs,
    /// The uts namespace.
    UtsNs,
    /// rlimits.
    Rlimits,
    /// The memory monitor's count of the sandbox's private tmpfs mounts.
    TmpfsAccounting,
    /// The disk watcher (`RLIMIT_FSIZE` stays, with the rlimits).
    DiskWatch,
    /// The CPU cap over the whole process tree (`RLIMIT_CPU` stays, per process).
    CpuTree,
    /// Mapping a root harness's command to an unprivileged uid (and with it the
    /// idmapped workspace): the command keeps host uid 0, without capabilities.
    UidMap,
    /// Clearing setuid/setgid bits in the workspace after the session.
    SetuidClear,
}

#[cfg(feature = "sandbox-test-disable-layers")]
impl Layer {
    fn bit(self) -> u32 {
        use prepare::off;
        match self {
            Layer::Seccomp => off::SECCOMP,
            Layer::Landlock => off::LANDLOCK,
            Layer::NetNs => off::NETNS,
            Layer::PidNs => off::PIDNS,
            Layer::MountNs => off::MOUNTNS,
            Layer::Cgroup => off::CGROUP,
            Layer::Setsid => off::SETSID,
            Layer::Capabilities => off::CAPS,
            Layer::IpcNs => off::IPCNS,
            Layer::UtsNs => off::UTSNS,
            Layer::Rlimits => off::RLIMITS,
            Layer::TmpfsAccounting => off::TMPFS,
            Layer::DiskWatch => off::DISK_WATCH,
            Layer::CpuTree => off::CPU_TREE,
            Layer::UidMap => off::UIDMAP,
            Layer::SetuidClear => off::SETUID_CLEAR,
        }
    }
}

/// The native Linux backend (`linux-namespaces`).
#[derive(Debug, Clone, Default)]
pub struct NativeSandbox {
    disabled: u32,
}

impl NativeSandbox {
    /// The native backend, if the probe found it working on this machine.
    pub fn new() -> Result<Self, SandboxError> {
        match super::select::native_probe() {
            Ok(_) => Ok(Self::default()),
            Err(e) => Err(SandboxError::Unavailable {
                backend: Backend::LinuxNamespaces,
                reason: e.to_string(),
            }),
        }
    }

    /// The same sandbox with `layer` switched off (tests only).
    #[cfg(feature = "sandbox-test-disable-layers")]
    pub fn without(mut self, layer: Layer) -> Self {
        self.disabled |= layer.bit();
        self
    }

    #[cfg(feature = "sandbox-test-disable-layers")]
    pub(crate) fn disabled_bits(&self) -> u32 {
        self.disabled
    }
}

/// Whether a failure belongs to the backend (and may fall back when allowed),
/// rather than to the spec or the command.
fn backend_failure(e: &SandboxError) -> bool {
    matches!(
        e,
        SandboxError::Spawn { .. } | SandboxError::Layer { .. } | SandboxError::Cgroup { .. }
    )
}

impl Sandbox for NativeSandbox {
    fn backend(&self) -> Backend {
        Backend::LinuxNamespaces
    }

    fn run(&self, spec: &RunSpec) -> Result<SandboxOutcome, SandboxError> {
        match start(
            Backend::LinuxNamespaces,
            Mode::Native,
            spec,
            self.disabled,
            run_stdin(spec),
        ) {
            Ok((session, pipes)) => session.run(
                pipes,
                &spec.stdin,
                spec.stop.as_ref(),
                spec.output_overflow,
                spec.echo_output,
            ),
            Err(e) if backend_failure(&e) && may_fall_back(spec) => {
                super::select::native_failed();
                tracing::warn!(error = %e, "native sandbox failed; running on the portable floor as allowed");
                run_floor(spec, 0)
            }
            Err(e) => {
                if backend_failure(&e) {
                    super::select::native_failed();
                }
                Err(e)
            }
        }
    }

    fn spawn(&self, spec: &RunSpec) -> Result<SandboxChild, SandboxError> {
        match spawn_child(Backend::LinuxNamespaces, Mode::Native, spec, self.disabled) {
            Err(e) if backend_failure(&e) => {
                super::select::native_failed();
                if may_fall_back(spec) {
                    spawn_child(Backend::PortableFloor, Mode::Floor, spec, 0)
                } else {
                    Err(e)
                }
            }
            r => r,
        }
    }
}

/// Whether a failed native session may run on the floor instead: only when the spec
/// allows it and the harness is not root. The floor runs commands as the harness's
/// own user, and a sandboxed command never runs as host uid 0 — a native failure the
/// command itself provoked (a mask raced away) must not buy it root.
fn may_fall_back(spec: &RunSpec) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if spec.allow_weaker && root {
        tracing::warn!(
            "native sandbox failed; not falling back: the floor would run the command as host root"
        );
    }
    spec.allow_weaker && !root
}

fn run_stdin(spec: &RunSpec) -> Stdin {
    if spec.stdin.is_empty() {
        Stdin::Null
    } else {
        Stdin::Pipe
    }
}

fn start(
    backend: Backend,
    mode: Mode,
    spec: &RunSpec,
    disabled: u32,
    stdin: Stdin,
) -> Result<(Session, session::Pipes), SandboxError> {
    let prepared = prepare(mode, spec, disabled, true)?;
    Session::start(backend, prepared, spec.limits, stdin)
}

/// Run on the Linux floor.
pub(crate) fn run_floor(spec: &RunSpec, disabled: u32) -> Result<SandboxOutcome, SandboxError> {
    let (session, pipes) = start(
        Backend::PortableFloor,
        Mode::Floor,
        spec,
        disabled,
        run_stdin(spec),
    )?;
    session.run(
        pipes,
        &spec.stdin,
        spec.stop.as_ref(),
        spec.output_overflow,
        spec.echo_output,
    )
}

/// Spawn on the Linux floor.
pub(crate) fn spawn_floor(spec: &RunSpec, disabled: u32) -> Result<SandboxChild, SandboxError> {
    spawn_child(Backend::PortableFloor, Mode::Floor, spec, disabled)
}

fn spawn_child(
    backend: Backend,
    mode: Mode,
    spec: &RunSpec,
    disabled: u32,
) -> Result<SandboxChild, SandboxError> {
    let (mut session, pipes) = start(backend, mode, spec, disabled, Stdin::Pipe)?;
    session.start_watchdog()?;
    let stdin = pipes.stdin.ok_or_else(|| SandboxError::Spawn {
        stage: "stdin pipe",
        source: std::io::Error::other("no stdin pipe"),
    })?;
    Ok(SandboxChild::new(
        ChildStdin::from(stdin),
        ChildStdout::from(pipes.stdout),
        ChildStderr::from(pipes.stderr),
        Box::new(session),
    ))
}

impl ChildControl for Session {
    fn backend(&self) -> Backend {
        Session::backend(self)
    }
    fn layers(&self) -> &LayerReport {
        Session::layers(self)
    }
    fn id(&self) -> u32 {
        self.pid()
    }
    fn kill(&mut self) {
        Session::kill(self);
    }
    fn wait(&mut self) -> Result<SandboxOutcome, SandboxError> {
        Session::wait(self)
    }
    fn try_wait(&mut self) -> Result<Option<SandboxOutcome>, SandboxError> {
        Session::try_wait(self)
    }
}

/// Probe a backend by running `/bin/true` in it with every layer best-effort, and
/// return what it applied.
pub(crate) fn probe(native: bool) -> Result<LayerReport, SandboxError> {
    let dir = tempfile::Builder::new()
        .prefix("io-harness-probe-")
        .tempdir()
        .map_err(SandboxError::spawn("probe workdir"))?;
    let mut spec = RunSpec::new(["/bin/true"], dir.path());
    spec.limits.wall_secs = Some(30);
    let (mode, backend) = if native {
        (Mode::Native, Backend::LinuxNamespaces)
    } else {
        (Mode::Floor, Backend::PortableFloor)
    };
    let prepared = prepare(mode, &spec, 0, true)?;
    let (session, pipes) = Session::start(backend, prepared, spec.limits, Stdin::Null)?;
    let out = session.run(pipes, &[], None, crate::OutputOverflow::Tail, false)?;
    if out.exit_code != Some(0) {
        return Err(SandboxError::Spawn {
            stage: "probe",
            source: std::io::Error::other(format!(
                "/bin/true exited with {:?} (signal {:?}): {}",
                out.exit_code,
                out.signal,
                out.stderr.text().trim()
            )),
        });
    }
    if native && out.layers.mounts.is_none() {
        return Err(SandboxError::Spawn {
            stage: "probe",
            source: std::io::Error::other("the mount namespace could not be set up"),
        });
    }
    Ok(out.layers)
}
