//! macOS (`macos-sandbox-exec`): the floor run under `sandbox-exec` with a generated
//! SBPL profile.
//!
//! The profile keeps a permissive base — compilers read their sysroots, fork linkers
//! and look up mach services — and narrows the two things that matter: **network**
//! is denied unless the operator opened it, and **file writes** are confined to the
//! workspace and the sandbox's private directories. In SBPL the last matching rule
//! wins, so the broad allow comes first and the narrowing rules after.
//!
//! The profile builder is pure so it is tested on every platform; the runner is
//! compiled on macOS only.

use std::fmt::Write;
use std::path::Path;

use super::NetworkPosture;

/// Quote `s` as an SBPL string literal.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            _ => out.push(ch),
        }
    }
    out.push('"');
    out
}

/// The SBPL profile for a command in `workdir`.
pub fn profile_for(workdir: &Path, network: NetworkPosture) -> String {
    profile_with(workdir, &[], network)
}

/// The SBPL profile, also allowing writes under `extra_writable` (the floor's
/// private `HOME` and `TMPDIR`). Paths should be canonical: the kernel matches the
/// resolved path (`/private/var/...`, not `/var/...`).
pub fn profile_with(workdir: &Path, extra_writable: &[&Path], network: NetworkPosture) -> String {
    let mut p = String::from("(version 1)\n(allow default)\n");
    if network != NetworkPosture::Open {
        p.push_str("(deny network*)\n");
    }
    p.push_str("(deny file-write*)\n(allow file-write*\n");
    for dir in std::iter::once(workdir).chain(extra_writable.iter().copied()) {
        let _ = writeln!(p, "  (subpath {})", quote(&dir.to_string_lossy()));
    }
    for dev in ["/dev/null", "/dev/zero", "/dev/tty", "/dev/dtracehelper"] {
        let _ = writeln!(p, "  (literal {})", quote(dev));
    }
    p.push_str("  (regex #\"^/dev/fd/\"))\n");
    p
}

#[cfg(target_os = "macos")]
pub use runner::MacosSandbox;

#[cfg(target_os = "macos")]
pub(crate) use runner::probe;

#[cfg(target_os = "macos")]
mod runner {
    use std::path::Path;

    use super::profile_with;
    use crate::{
        Backend, LayerReport, RunSpec, Sandbox, SandboxChild, SandboxError, SandboxOutcome,
    };

    const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

    /// The macOS backend.
    #[derive(Debug, Clone, Default)]
    pub struct MacosSandbox;

    impl MacosSandbox {
        /// Available when `sandbox-exec` is.
        pub fn new() -> Result<Self, SandboxError> {
            if Path::new(SANDBOX_EXEC).exists() {
                Ok(Self)
            } else {
                Err(SandboxError::Unavailable {
                    backend: Backend::MacosSandboxExec,
                    reason: format!("{SANDBOX_EXEC} not found"),
                })
            }
        }
    }

    fn wrap(spec: &RunSpec) -> impl Fn(&Path, &[String]) -> Vec<String> + '_ {
        move |private: &Path, argv: &[String]| {
            let wd = std::fs::canonicalize(&spec.workdir).unwrap_or_else(|_| spec.workdir.clone());
            let private = std::fs::canonicalize(private).unwrap_or_else(|_| private.to_owned());
            let extra: Vec<std::path::PathBuf> = spec
                .writable_paths
                .iter()
                .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
                .collect();
            let mut writable: Vec<&Path> = vec![&private];
            writable.extend(extra.iter().map(std::path::PathBuf::as_path));
            let profile = profile_with(&wd, &writable, spec.network);
            let mut out = vec![SANDBOX_EXEC.to_owned(), "-p".to_owned(), profile];
            out.extend(argv.iter().cloned());
            out
        }
    }

    impl Sandbox for MacosSandbox {
        fn backend(&self) -> Backend {
            Backend::MacosSandboxExec
        }
        fn run(&self, spec: &RunSpec) -> Result<SandboxOutcome, SandboxError> {
            crate::floor_std::run(Backend::MacosSandboxExec, spec, &wrap(spec))
        }
        fn spawn(&self, spec: &RunSpec) -> Result<SandboxChild, SandboxError> {
            crate::floor_std::spawn(Backend::MacosSandboxExec, spec, &wrap(spec))
        }
    }

    /// Run `/usr/bin/true` under the profile.
    pub(crate) fn probe() -> Result<LayerReport, SandboxError> {
        let sb = MacosSandbox::new()?;
        let dir = tempfile::tempdir().map_err(SandboxError::spawn("probe workdir"))?;
        let out = sb.run(&RunSpec::new(["/usr/bin/true"], dir.path()))?;
        if out.exit_code == Some(0) {
            Ok(out.layers)
        } else {
            Err(SandboxError::Unavailable {
                backend: Backend::MacosSandboxExec,
                reason: format!("sandbox-exec probe exited with {:?}", out.exit_code),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_denied_unless_open() {
        let p = profile_for(Path::new("/w"), NetworkPosture::None);
        assert!(p.contains("(deny network*)"));
        let open = profile_for(Path::new("/w"), NetworkPosture::Open);
        assert!(!open.contains("deny network"));
    }

    #[test]
    fn writes_confined_to_the_workdir_after_a_global_deny() {
        let p = profile_with(Path::new("/w"), &[Path::new("/priv")], NetworkPosture::None);
        let deny = p.find("(deny file-write*)").unwrap();
        let allow = p.find("(allow file-write*").unwrap();
        assert!(deny < allow, "the narrowing allow must come after the deny");
        assert!(p.contains("(subpath \"/w\")"));
        assert!(p.contains("(subpath \"/priv\")"));
        assert!(!p.contains("(subpath \"/\")"));
    }

    #[test]
    fn paths_are_quoted() {
        let p = profile_for(Path::new("/a \"b\"\\c"), NetworkPosture::None);
        assert!(p.contains(r#"(subpath "/a \"b\"\\c")"#), "{p}");
    }
}
