//! The native Linux backend on other systems: same signatures, a typed error.

use super::{Backend, RunSpec, Sandbox, SandboxChild, SandboxError, SandboxOutcome};

/// The native Linux backend, unavailable on this system.
#[derive(Debug, Clone, Default)]
pub struct NativeSandbox;

fn unavailable() -> SandboxError {
    SandboxError::Unavailable {
        backend: Backend::LinuxNamespaces,
        reason: "not Linux".into(),
    }
}

impl NativeSandbox {
    /// Always fails: this is not Linux.
    pub fn new() -> Result<Self, SandboxError> {
        Err(unavailable())
    }
}

impl Sandbox for NativeSandbox {
    fn backend(&self) -> Backend {
        Backend::LinuxNamespaces
    }
    fn run(&self, _spec: &RunSpec) -> Result<SandboxOutcome, SandboxError> {
        Err(unavailable())
    }
    fn spawn(&self, _spec: &RunSpec) -> Result<SandboxChild, SandboxError> {
        Err(unavailable())
    }
}
