//! Which isolation mechanism ran a command. The label is what the record stores, so a
//! backend only ever names itself when it really ran.

use std::fmt;
use std::str::FromStr;

/// An isolation backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Backend {
    /// Linux: user, mount, pid, net, ipc and uts namespaces, Landlock, seccomp, caps.
    LinuxNamespaces,
    /// macOS: `sandbox-exec` with a generated profile, plus rlimits.
    MacosSandboxExec,
    /// Windows with a real Job Object. Not implemented: nothing reports it yet.
    WindowsJobObject,
    /// A fresh subprocess with rlimits, a wall clock and a built environment; on Linux
    /// also Landlock and seccomp. The weakest backend, and named as such.
    PortableFloor,
}

impl Backend {
    /// The stable label: `linux-namespaces`, `macos-sandbox-exec`,
    /// `windows-job-object` or `portable-floor`.
    pub fn label(self) -> &'static str {
        match self {
            Backend::LinuxNamespaces => "linux-namespaces",
            Backend::MacosSandboxExec => "macos-sandbox-exec",
            Backend::WindowsJobObject => "windows-job-object",
            Backend::PortableFloor => "portable-floor",
        }
    }

    /// Every backend, strongest first.
    pub const ALL: [Backend; 4] = [
        Backend::LinuxNamespaces,
        Backend::MacosSandboxExec,
        Backend::WindowsJobObject,
        Backend::PortableFloor,
    ];
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A label that names no backend.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown sandbox backend `{0}` (expected linux-namespaces, macos-sandbox-exec, windows-job-object or portable-floor)"
)]
pub struct UnknownBackend(pub String);

impl FromStr for Backend {
    type Err = UnknownBackend;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Backend::ALL
            .into_iter()
            .find(|b| b.label() == s)
            .ok_or_else(|| UnknownBackend(s.to_owned()))
    }
}
