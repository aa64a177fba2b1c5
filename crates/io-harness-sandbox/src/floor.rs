//! The portable floor (`portable-floor`): the weakest backend, and named as such.
//!
//! A fresh subprocess in the given workdir with a private, empty `HOME` and
//! `TMPDIR`, a built environment (proxy variables stripped), rlimits where the OS
//! has them, a wall clock, and everything it started killed at the end (its process
//! group; on Linux its cgroup where one is usable). On Linux it also gets Landlock
//! (reads everywhere, writes only in the workdir and its private directories, TCP
//! denied without network) and the seccomp filter (which then also refuses IPv4 and
//! IPv6 sockets, since there is no network namespace). It never names itself
//! anything stronger.
//!
//! What it does not stop, by construction: metadata changes (chmod, chown, utimes)
//! on host files the user owns — Landlock does not mediate them; `connect()` to host
//! pathname unix sockets (before Landlock ABI 9); UDP where Landlock has no UDP
//! rights (seccomp refuses IPv4/IPv6 sockets instead); reading anything the user can
//! read; and daemons that leave its process group when no cgroup is usable.

use super::{Backend, RunSpec, Sandbox, SandboxChild, SandboxError, SandboxOutcome};

/// The portable floor.
#[derive(Debug, Clone, Default)]
pub struct FloorSandbox {
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    disabled: u32,
}

impl FloorSandbox {
    /// The floor. Always available.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same sandbox with `layer` switched off (tests only).
    #[cfg(all(target_os = "linux", feature = "sandbox-test-disable-layers"))]
    pub fn without(self, layer: super::Layer) -> Self {
        let probe = super::NativeSandbox::default().without(layer);
        Self {
            disabled: self.disabled | probe.disabled_bits(),
        }
    }
}

impl Sandbox for FloorSandbox {
    fn backend(&self) -> Backend {
        Backend::PortableFloor
    }

    fn run(&self, spec: &RunSpec) -> Result<SandboxOutcome, SandboxError> {
        #[cfg(target_os = "linux")]
        return super::linux::run_floor(spec, self.disabled);
        #[cfg(not(target_os = "linux"))]
        return super::floor_std::run(Backend::PortableFloor, spec, &super::floor_std::unwrapped);
    }

    fn spawn(&self, spec: &RunSpec) -> Result<SandboxChild, SandboxError> {
        #[cfg(target_os = "linux")]
        return super::linux::spawn_floor(spec, self.disabled);
        #[cfg(not(target_os = "linux"))]
        return super::floor_std::spawn(Backend::PortableFloor, spec, &super::floor_std::unwrapped);
    }
}
