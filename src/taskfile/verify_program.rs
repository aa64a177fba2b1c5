//! A verify command's program must be there before the run starts: a program that does
//! not exist was found only at the first gate, after the agent had worked for nothing
//! (issue 19.6). It is resolved as the gate will resolve it: a path with a `/` against
//! the workspace (a workspace script counts when it is present), a bare name on the
//! gate's `PATH`. That is the sandbox's built one (the toolchain's `bin` and the system
//! directories, as the sandbox crate sets it) unless `[sandbox] env` passes the host's
//! `PATH` in; then, under the native sandbox, only its directories the sandbox's view
//! holds count (the system directories, the Rust toolchain's homes, `[sandbox]
//! read_only_paths` and the workspace), since a program elsewhere on the host is not
//! there for the gate. The portable floor has no view.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::contract::{ContractError, TaskContract, Verification};

/// The system directories every native sandbox view holds read-only (as the sandbox
/// crate mounts them).
const SYSTEM: [&str; 8] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// The sandbox's `PATH` when the host's is not passed in (the sandbox crate's
/// default, after the toolchain's `bin`).
const SANDBOX_PATH: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

const KEY: &str = "verify.command";

fn field(message: String) -> ContractError {
    ContractError::Field {
        key: KEY.to_string(),
        message,
    }
}

/// Refuses a verify command whose program the gate would not find (as a
/// [`ContractError::Field`] naming `verify.command`).
pub(super) fn check(c: &TaskContract) -> Result<(), ContractError> {
    for v in &c.verify.criteria {
        let Verification::Command { argv, .. } = v else {
            continue;
        };
        let Some(program) = argv.first() else {
            continue;
        };
        check_program(c, program)?;
    }
    Ok(())
}

fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn check_program(c: &TaskContract, program: &str) -> Result<(), ContractError> {
    if program.contains('/') {
        let path = if Path::new(program).is_absolute() {
            PathBuf::from(program)
        } else {
            c.root.join(program)
        };
        return match std::fs::metadata(&path) {
            Ok(_) if executable(&path) => Ok(()),
            Ok(_) => Err(field(format!(
                "`{program}` ({}) is not an executable file",
                path.display()
            ))),
            Err(e) => Err(field(format!("`{program}` ({}): {e}", path.display()))),
        };
    }
    let floor = c.sandbox.require.as_deref() == Some("portable-floor");
    let host_path = c.sandbox.env.iter().any(|n| n == "PATH");
    let view = view_roots(c);
    let dirs: Vec<PathBuf> = if host_path {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect()
    } else {
        let cargo_bin = (!floor)
            .then(|| tool_home("CARGO_HOME", ".cargo").map(|h| h.join("bin")))
            .flatten();
        cargo_bin
            .into_iter()
            .chain(SANDBOX_PATH.iter().map(PathBuf::from))
            .collect()
    };
    let mut outside = None;
    for dir in dirs {
        let candidate = dir.join(program);
        if !executable(&candidate) {
            continue;
        }
        let canonical = dir.canonicalize().unwrap_or(dir.clone());
        if floor || view.iter().any(|r| canonical.starts_with(r)) {
            return Ok(());
        }
        outside.get_or_insert(candidate);
    }
    if let Some(p) = outside {
        return Err(field(format!(
            "`{program}` is at {}, outside the sandbox's view, so the gate would not find it; add its directory to [sandbox] read_only_paths or name the program by a path the sandbox has",
            p.display()
        )));
    }
    let elsewhere = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(program))
        .find(|p| executable(p));
    Err(field(match elsewhere {
        Some(p) if !host_path => format!(
            "`{program}` is not on the gate's PATH ({}); it is at {} on the host's: pass the host's with [sandbox] env = [\"PATH\"] (and its directory in read_only_paths), or name the program by path",
            SANDBOX_PATH.join(":"),
            p.display()
        ),
        _ => format!("`{program}` is not found on PATH, so the gate could not run it"),
    }))
}

/// A toolchain home: the variable when absolute, else its default under `$HOME`.
fn tool_home(var: &str, default: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(default)))
}

/// The directories the native sandbox's view holds, canonical.
fn view_roots(c: &TaskContract) -> Vec<PathBuf> {
    let toolchain = [
        tool_home("CARGO_HOME", ".cargo"),
        tool_home("RUSTUP_HOME", ".rustup"),
    ];
    SYSTEM
        .iter()
        .map(PathBuf::from)
        .chain(toolchain.into_iter().flatten())
        .chain(c.sandbox.read_only_paths.iter().cloned())
        .chain(std::iter::once(c.root.clone()))
        .filter_map(|p| p.canonicalize().ok())
        .collect()
}
