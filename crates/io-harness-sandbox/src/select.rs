//! Probe what this machine really provides, and pick the strongest backend that works.
//!
//! The probe does not trust kernel versions or configuration files: it spawns a
//! sandboxed `/bin/true` per backend with every layer in best-effort mode and reads
//! back which layers the child managed to apply. A backend whose probe fails is not
//! offered; a layer that failed in the probe is simply absent from that backend's
//! report (and from every later run's report).
//!
//! Choosing the backend ([`select`]) asks once per process, and a native probe that
//! succeeded is remembered across processes for the same kernel, binary and identity
//! (`probe_cache`): a short-lived process such as `io-harness sandbox -- CMD` would
//! otherwise spend as long on the probe as on its command. [`probe`] (for `doctor`)
//! always probes afresh, and [`usable`] tries a real command under a backend.

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

/// Whether the native backend works here, decided once per process on first use: by
/// a cache entry of an earlier process with the same kernel, binary and identity
/// ([`crate::probe_cache`]), else by the probe, whose success is then cached. Kept
/// apart from the floor's probe so that choosing a backend costs at most one sandboxed
/// `/bin/true`, not two: the floor is probed only when asked about (`doctor`). Only the
/// choice comes from here; every session reports its own layers.
#[cfg(target_os = "linux")]
pub(crate) fn native_probe() -> &'static Result<(), Arc<SandboxError>> {
    static NATIVE: OnceLock<Result<(), Arc<SandboxError>>> = OnceLock::new();
    NATIVE.get_or_init(|| {
        let cached = super::probe_cache::current();
        if let Some((cache, key)) = &cached {
            match cache.check(key) {
                Ok(()) => {
                    tracing::debug!(
                        "probe cache hit: the native backend is chosen without a probe"
                    );
                    return Ok(());
                }
                Err(miss) => tracing::debug!(?miss, "probe cache miss: probing"),
            }
        }
        let probed = super::linux::probe(true).map(|_| ()).map_err(Arc::new);
        if let (Ok(()), Some((cache, key))) = (&probed, &cached) {
            cache.store(key);
        }
        probed
    })
}

/// After a native spawn failed for a reason of the backend: a cached choice must not
/// outlive it, so the next process probes afresh.
#[cfg(target_os = "linux")]
pub(crate) fn native_failed() {
    super::probe_cache::forget();
}

#[cfg(target_os = "linux")]
fn run_probe() -> ProbeReport {
    // Always a fresh probe: this report is what `doctor` shows, never a cached answer.
    let native = super::linux::probe(true).map_err(Arc::new);
    if native.is_ok()
        && let Some((cache, key)) = super::probe_cache::current()
    {
        cache.store(&key);
    }
    let floor = super::linux::probe(false).map_err(Arc::new);
    let selected = if native.is_ok() {
        Backend::LinuxNamespaces
    } else {
        Backend::PortableFloor
    };
    ProbeReport {
        selected,
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

/// Whether a command really runs under `backend` here, found by running `/bin/true`
/// in it as every session runs (each layer required, not best effort) — the probe may
/// succeed where a real session fails (inside another sandbox, dropping capabilities
/// is refused), so `doctor` asks this before calling a backend usable. Returns the
/// layers that session reported.
pub fn usable(backend: Backend) -> Result<LayerReport, SandboxError> {
    let dir = tempfile::Builder::new()
        .prefix("io-harness-try-")
        .tempdir()
        .map_err(SandboxError::spawn("trial workdir"))?;
    let mut spec = super::RunSpec::new(["/bin/true"], dir.path());
    spec.limits.wall_secs = Some(30);
    let out = require(backend)?.run(&spec)?;
    if out.exit_code != Some(0) {
        return Err(SandboxError::Spawn {
            stage: "trial",
            source: std::io::Error::other(format!(
                "/bin/true exited with {:?} (signal {:?}): {}",
                out.exit_code,
                out.signal,
                out.stderr.text().trim()
            )),
        });
    }
    Ok(out.layers)
}
