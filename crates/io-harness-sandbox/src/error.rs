//! Errors of the sandbox. Each keeps its cause and names the stage that failed, so a
//! failed layer is reported as that layer, never flattened into a string.

use std::io;
use std::path::PathBuf;

use super::Backend;

/// Why a sandboxed command could not be run as asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The spec itself is unusable (empty argv, a NUL byte, a missing workdir).
    #[error("invalid sandbox spec: {reason}")]
    InvalidSpec {
        /// What is wrong.
        reason: String,
    },
    /// The backend cannot run on this machine (probe failed, wrong OS).
    #[error("sandbox backend {backend} is unavailable: {reason}")]
    Unavailable {
        /// The backend asked for.
        backend: Backend,
        /// Why it cannot run.
        reason: String,
    },
    /// The parent could not prepare or start the child.
    #[error("sandbox spawn failed at {stage}: {source}")]
    Spawn {
        /// The step that failed (e.g. `clone3`, `pipe`).
        stage: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The child could not apply an isolation layer; nothing was executed.
    #[error("sandbox layer {stage} failed in the child ({detail}): {source}")]
    Layer {
        /// The layer (e.g. `mount`, `landlock`, `seccomp`).
        stage: &'static str,
        /// Which step of it (a mount step, an rlimit), when known.
        detail: String,
        /// The OS error the child saw.
        #[source]
        source: io::Error,
    },
    /// The command could not be executed (not found, not executable).
    #[error("cannot execute `{program}` in the sandbox: {source}")]
    Exec {
        /// `argv[0]`.
        program: String,
        /// The OS error of the last `execve` attempt.
        #[source]
        source: io::Error,
    },
    /// A cgroup could not be created, configured or removed.
    #[error("cgroup {path}: {source}")]
    Cgroup {
        /// The cgroup file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Landlock ruleset preparation failed in the parent.
    #[cfg(target_os = "linux")]
    #[error("landlock ruleset: {0}")]
    Landlock(#[from] landlock::RulesetError),
    /// The seccomp filter could not be compiled.
    #[cfg(target_os = "linux")]
    #[error("seccomp filter: {0}")]
    Seccomp(#[from] seccompiler::BackendError),
    /// Processes of the sandbox were still alive after teardown.
    #[error("sandbox teardown left {remaining} process(es) running")]
    Teardown {
        /// How many were left.
        remaining: usize,
    },
    /// Supervising the child failed (reading its output, waiting for it).
    #[error("sandbox supervision failed at {stage}: {source}")]
    Io {
        /// What was being done.
        stage: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl SandboxError {
    #[cfg_attr(target_os = "linux", allow(dead_code))]
    pub(crate) fn io(stage: &'static str) -> impl FnOnce(io::Error) -> SandboxError {
        move |source| SandboxError::Io { stage, source }
    }
    /// A failure to start something the session needs at `stage` (for a caller that
    /// prepares a session's companions, such as its egress proxy).
    pub fn spawn(stage: &'static str) -> impl FnOnce(io::Error) -> SandboxError {
        move |source| SandboxError::Spawn { stage, source }
    }
    /// A session whose configuration cannot be honoured, with the reason.
    pub fn invalid(reason: impl Into<String>) -> SandboxError {
        SandboxError::InvalidSpec {
            reason: reason.into(),
        }
    }
}
