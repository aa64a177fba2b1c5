//! A long-lived sandboxed child with piped stdio (an MCP stdio server, a proxy
//! bridge), as opposed to run-to-completion.
//!
//! The pipes are the standard library's `ChildStdin`/`ChildStdout`/`ChildStderr`,
//! so async callers can wrap them (`tokio::process::ChildStdin::from_std`).
//! Dropping the handle kills the whole sandbox and tears it down.

use std::process::{ChildStderr, ChildStdin, ChildStdout};

use super::{Backend, LayerReport, SandboxError, SandboxOutcome};

/// The backend-specific control of a running child.
pub(crate) trait ChildControl: Send + Sync {
    fn backend(&self) -> Backend;
    fn layers(&self) -> &LayerReport;
    fn id(&self) -> u32;
    fn kill(&mut self);
    fn wait(&mut self) -> Result<SandboxOutcome, SandboxError>;
    fn try_wait(&mut self) -> Result<Option<SandboxOutcome>, SandboxError>;
}

/// A running sandboxed child.
///
/// The wall-clock cap (and the memory monitor, where no memory cgroup exists) is
/// enforced by a watchdog thread whether or not anyone waits. The outcome returned
/// by [`SandboxChild::wait`] has empty `stdout`/`stderr`: the caller read them.
pub struct SandboxChild {
    /// The child's stdin, if not taken yet.
    pub stdin: Option<ChildStdin>,
    /// The child's stdout, if not taken yet.
    pub stdout: Option<ChildStdout>,
    /// The child's stderr, if not taken yet.
    pub stderr: Option<ChildStderr>,
    control: Box<dyn ChildControl>,
}

impl std::fmt::Debug for SandboxChild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxChild")
            .field("backend", &self.control.backend())
            .field("id", &self.control.id())
            .finish_non_exhaustive()
    }
}

impl SandboxChild {
    pub(crate) fn new(
        stdin: ChildStdin,
        stdout: ChildStdout,
        stderr: ChildStderr,
        control: Box<dyn ChildControl>,
    ) -> Self {
        Self {
            stdin: Some(stdin),
            stdout: Some(stdout),
            stderr: Some(stderr),
            control,
        }
    }

    /// The backend isolating the child.
    pub fn backend(&self) -> Backend {
        self.control.backend()
    }

    /// The layers really applied.
    pub fn layers(&self) -> &LayerReport {
        self.control.layers()
    }

    /// Host pid of the sandbox's top process (its pid-namespace init on the native
    /// backend, the command itself on the floor).
    pub fn id(&self) -> u32 {
        self.control.id()
    }

    /// Kill every process of the sandbox. [`SandboxChild::wait`] then reaps it.
    pub fn kill(&mut self) {
        self.control.kill();
    }

    /// Wait for the child to exit (or be killed by a cap), then tear down.
    /// Closes stdin first so a child reading it sees end-of-file.
    pub fn wait(mut self) -> Result<SandboxOutcome, SandboxError> {
        self.stdin.take();
        self.control.wait()
    }

    /// The outcome, if the child has exited; never blocks.
    pub fn try_wait(&mut self) -> Result<Option<SandboxOutcome>, SandboxError> {
        self.control.try_wait()
    }
}
