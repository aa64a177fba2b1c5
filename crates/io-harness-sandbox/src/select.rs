//! Probe once per process what this machine really provides, and pick the strongest
//! backend that works.
//!
//! The probe does not trust kernel versions or configuration files: it spawns a
//! sandboxed `/bin/true` per backend with every layer in best-effort mode and reads
//! back which layers the child managed to apply. A backend whose probe fails is not
//! offered; a layer that failed in the probe is simply absent from that backend's
//! report (and from every later run's report).

use std::sync::{Arc, OnceLock};

use super::{Backend, FloorSandbox, LayerReport, NativeSandbox, Sandbox, SandboxError};

/// What the probe found.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProbeReport {
    /// The native backend of this OS and the layers its probe applied, or why it
    /// cannot run.
    pub native: Result<LayerReport, Arc<SandboxError>>,
    /// The floor and the layers its probe applied.
    pub floor: Result<LayerReport, Arc<SandboxError>>,
    /// The backend [`select`] returns.
    pub selected: Backend,
}

/// Run the probe (once per process) and return its report.
pub fn probe() -> &'static ProbeReport {
    static REPORT: OnceLock<ProbeReport> = OnceLock::new();
    REPORT.get_or_init(run_probe)
}

/// What the native backend's probe found, probed once per process on first use. Kept
/// apart from the floor's probe so that choosing a backend costs one sandboxed
/// `/bin/true`, not two: the floor is probed only when asked about (`doctor`) or needed.
#[cfg(target_os = "linux")]
pub(crate) fn native_probe() -> &'static Result<LayerReport, Arc<SandboxError>> {
    static NATIVE: OnceLock<Result<LayerReport, Arc<SandboxError>>> = OnceLock::new();
    NATIVE.get_or_init(|| super::linux::probe(true).map_err(Arc::new))
}

#[cfg(target_os = "linux")]
fn run_probe() -> ProbeReport {
    let native = native_probe().clone();
    let floor = super::linux::probe(false).map_err(Arc::new);
    ProbeReport {
        selected: selected_backend(),
        native,
        floor,
    }
}

#[cfg(target_os = "linux")]
fn selected_backend() -> Backend {
    if native_probe().is_ok() {
        Backend::LinuxNamespaces
    } else {
        Backend::PortableFloor
    }
}

#[cfg(not(target_os = "linux"))]
fn selected_backend() -> Backend {
    probe().selected
}

#[cfg(target_os = "macos")]
fn run_probe() -> ProbeReport {
    let native = super::macos::probe().map_err(Arc::new);
    let selected = if native.is_ok() {
        Backend::MacosSandboxExec
    } else {
        Backend::PortableFloor
    };
    ProbeReport {
        native,
        floor: Ok(LayerReport::default()),
        selected,
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn run_probe() -> ProbeReport {
    ProbeReport {
        native: Err(Arc::new(SandboxError::Unavailable {
            backend: Backend::LinuxNamespaces,
            reason: "no native backend on this OS".into(),
        })),
        floor: Ok(LayerReport::default()),
        selected: Backend::PortableFloor,
    }
}

/// The strongest backend that works here.
pub fn select() -> Result<Box<dyn Sandbox>, SandboxError> {
    require(selected_backend())
}

/// Exactly `backend`, or an error saying why it is unavailable — never something
/// weaker (`[sandbox] require = "linux-namespaces"`).
pub fn require(backend: Backend) -> Result<Box<dyn Sandbox>, SandboxError> {
    match backend {
        Backend::PortableFloor => Ok(Box::new(FloorSandbox::new())),
        Backend::LinuxNamespaces => Ok(Box::new(NativeSandbox::new()?)),
        #[cfg(target_os = "macos")]
        Backend::MacosSandboxExec => Ok(Box::new(super::macos::MacosSandbox::new()?)),
        other => Err(SandboxError::Unavailable {
            backend: other,
            reason: "not available on this system".into(),
        }),
    }
}
