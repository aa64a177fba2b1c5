//! Landlock: reads everywhere in the view, writes only in the workspace and the private
//! temporary directories, TCP/UDP denied where there is no private network
//! namespace, abstract unix sockets and signals scoped to the sandbox (ABI 6+).
//!
//! The ruleset is created and filled in the parent with the landlock crate, for
//! every inode that exists before the clone (the host root, the workspace, device
//! nodes). Inodes that only exist inside the sandbox (its tmpfs mounts) get their
//! rules from the child with raw `landlock_add_rule` calls before it restricts
//! itself. The rights the crate reports as enforced (`RestrictionStatus`) come from
//! a one-time probe per ruleset shape on a throwaway thread, since the child cannot
//! call into the crate.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::plan::LandlockChild;
use crate::{LandlockReport, LandlockStatus, SandboxError};

/// The newest ABI whose filesystem rights we ask for (ABI 9 adds pathname unix
/// socket mediation; on older kernels the ruleset is reported partially enforced).
const FS_TARGET: ABI = ABI::V9;
/// The newest ABI whose network rights we ask for (TCP from ABI 4, UDP later).
const NET_TARGET: ABI = ABI::V10;

/// The shape of a ruleset: what it handles, independent of the paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Shape {
    /// Deny TCP/UDP bind and connect.
    pub deny_net: bool,
    /// Scope abstract unix sockets and signals.
    pub scoped: bool,
}

/// What to allow.
pub(crate) struct Rules<'a> {
    pub shape: Shape,
    /// Directories writable from the parent's view (workspace, floor's private dirs).
    pub writable: Vec<&'a Path>,
    /// Device files readable and writable (`/dev/null`...).
    pub devices: Vec<PathBuf>,
    /// Directories writable that only exist inside the sandbox (added by the child).
    pub child_writable: Vec<PathBuf>,
    /// Directories of terminals that only exist inside (added by the child).
    pub child_ttys: Vec<PathBuf>,
    /// Directories readable that only exist inside (the fresh root).
    pub child_readable: Vec<PathBuf>,
}

fn kernel_abi() -> Option<u32> {
    static ABI_VERSION: OnceLock<Option<u32>> = OnceLock::new();
    *ABI_VERSION.get_or_init(super::sys::landlock_abi)
}

fn fs_all() -> BitFlags<AccessFs> {
    AccessFs::from_all(FS_TARGET)
}

/// The rights of `FS_TARGET` this kernel knows: what a raw rule may carry.
fn supported_fs() -> BitFlags<AccessFs> {
    let abi = ABI::from(kernel_abi().map_or(0, |v| v as i32));
    AccessFs::from_all(abi) & fs_all()
}

fn ruleset(shape: Shape) -> Result<landlock::RulesetCreated, landlock::RulesetError> {
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(fs_all())?;
    if shape.deny_net {
        rs = rs.handle_access(AccessNet::from_all(NET_TARGET))?;
    }
    if shape.scoped {
        rs = rs.scope(Scope::AbstractUnixSocket | Scope::Signal)?;
    }
    rs.create()
}

/// The enforcement status the landlock crate reports for `shape` on this kernel.
/// Probed once per shape by restricting a throwaway thread with the same request.
pub(crate) fn status(shape: Shape) -> LandlockStatus {
    static MEMO: OnceLock<Mutex<HashMap<Shape, LandlockStatus>>> = OnceLock::new();
    let memo = MEMO.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(s) = memo.lock().ok().and_then(|m| m.get(&shape).copied()) {
        return s;
    }
    let probed = std::thread::Builder::new()
        .name("io-harness-landlock-probe".into())
        .spawn(move || -> Option<RestrictionStatus> {
            let rs = ruleset(shape).ok()?;
            let rs = rs
                .add_rule(PathBeneath::new(
                    PathFd::new("/").ok()?,
                    AccessFs::from_read(FS_TARGET),
                ))
                .ok()?;
            rs.restrict_self().ok()
        })
        .ok()
        .and_then(|h| h.join().ok())
        .flatten();
    let s = match probed.map(|p| p.ruleset) {
        Some(RulesetStatus::FullyEnforced) => LandlockStatus::FullyEnforced,
        Some(RulesetStatus::PartiallyEnforced) => LandlockStatus::PartiallyEnforced,
        _ => LandlockStatus::NotEnforced,
    };
    if let Ok(mut m) = memo.lock() {
        m.insert(shape, s);
    }
    s
}

/// `O_PATH` handles of the host root and device nodes, opened once: they name the
/// same inodes for the life of the process.
struct Fixed {
    root: std::fs::File,
    devices: Vec<(PathBuf, std::fs::File)>,
}

fn fixed_handles() -> Result<&'static Fixed, SandboxError> {
    static FIXED: OnceLock<Result<Fixed, String>> = OnceLock::new();
    FIXED
        .get_or_init(|| {
            let root = open_path(Path::new("/")).map_err(|e| e.to_string())?;
            let devices = super::mounts::DEVICES
                .iter()
                .map(|d| Path::new("/dev").join(d))
                .filter_map(|p| open_path(&p).ok().map(|f| (p, f)))
                .collect();
            Ok(Fixed { root, devices })
        })
        .as_ref()
        .map_err(|e| SandboxError::Spawn {
            stage: "landlock rule path",
            source: std::io::Error::other(e.clone()),
        })
}

/// An `O_PATH` handle: enough for a rule, and it never blocks on a device.
fn open_path(p: &Path) -> Result<std::fs::File, SandboxError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(p)
        .map_err(SandboxError::spawn("landlock rule path"))
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap_or_default()
}

/// Build the ruleset in the parent. `None` when this kernel has no Landlock.
pub(crate) fn prepare(
    rules: &Rules<'_>,
) -> Result<Option<(LandlockChild, LandlockReport)>, SandboxError> {
    let Some(abi) = kernel_abi() else {
        return Ok(None);
    };
    let status = status(rules.shape);
    if status == LandlockStatus::NotEnforced {
        return Ok(None);
    }
    let file_rights = AccessFs::from_file(FS_TARGET);
    let fixed = fixed_handles()?;
    let mut created = ruleset(rules.shape)?.add_rule(PathBeneath::new(
        fixed.root.as_fd(),
        AccessFs::from_read(FS_TARGET),
    ))?;
    for dir in &rules.writable {
        created = created.add_rule(PathBeneath::new(open_path(dir)?, fs_all()))?;
    }
    for (path, fd) in &fixed.devices {
        if rules.devices.contains(path) {
            created = created.add_rule(PathBeneath::new(fd.as_fd(), file_rights))?;
        }
    }
    let fd: Option<OwnedFd> = created.into();
    let Some(ruleset) = fd else {
        return Ok(None);
    };
    let supported = supported_fs();
    let tty = supported
        & (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::ReadDir | AccessFs::IoctlDev);
    let mut child = Vec::new();
    for d in &rules.child_writable {
        child.push((cpath(d), supported.bits()));
    }
    for d in &rules.child_ttys {
        child.push((cpath(d), tty.bits()));
    }
    let read = supported & AccessFs::from_read(FS_TARGET);
    for d in &rules.child_readable {
        child.push((cpath(d), read.bits()));
    }
    let report = LandlockReport {
        abi: Some(abi),
        status,
        tcp_denied: rules.shape.deny_net && abi >= 4,
        scoped: rules.shape.scoped && abi >= 6,
    };
    Ok(Some((
        LandlockChild {
            ruleset,
            rules: child,
        },
        report,
    )))
}

/// The kernel's Landlock ABI, if any.
pub(crate) fn abi() -> Option<u32> {
    kernel_abi()
}
