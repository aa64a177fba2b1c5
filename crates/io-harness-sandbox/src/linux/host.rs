//! What the parent learns about the host before planning a sandbox: the system and
//! toolchain trees of the view, the devices and kernel knobs that exist, the signals
//! this process ignores. Facts that cannot change while the harness runs are found
//! once ([`host_facts`]); the secrets to exclude and the caller's paths per sandbox.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::mounts::{DEVICES, MountInputs, PROC_READ_ONLY, Source, Wanted};
use super::secrets;
use crate::RunSpec;

/// The system directories a build needs, shown read-only (or, where the host has a
/// symlink — a merged `/usr` — the same symlink).
pub(crate) const SYSTEM: [&str; 8] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// The parts of a cargo home a build reads: installed tools and the registry and git
/// caches — never its credentials or its config.
pub(crate) const CARGO_PARTS: [&str; 3] = ["bin", "registry", "git"];

/// Where the fresh root is assembled, in the child's mount namespace only: the first
/// of these that exists.
const STAGES: [&str; 3] = ["/tmp", "/mnt", "/dev"];

pub(crate) fn canonical_dir(p: &Path) -> Option<PathBuf> {
    fs::canonicalize(p).ok().filter(|p| p.is_dir())
}

/// The host home directory, if it is a real directory other than `/`.
fn host_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .and_then(|h| canonical_dir(&h))
        .filter(|h| h != Path::new("/"))
}

/// A toolchain home: the variable when it is set to an absolute path, else the
/// default under `$HOME` (canonical, existing).
fn tool_home(var: &str, default: &str, home: Option<&Path>) -> Option<PathBuf> {
    let set = std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    set.or_else(|| home.map(|h| h.join(default)))
        .and_then(|p| canonical_dir(&p))
}

/// Pathname unix sockets listening in the host network namespace now. Those inside
/// the view (a server in the workspace) are masked; one bound later in a tree the
/// view shows is reachable, which is why the view holds no host socket directory.
fn host_sockets() -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let text = fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let mut out: Vec<PathBuf> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(7))
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .filter(|p| fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket()))
        .collect();
    out.sort();
    out.dedup();
    out
}

pub(crate) fn cap_last() -> u32 {
    fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

/// Signals this process ignores, from `/proc/thread-self/status` (`SigIgn`, a hex
/// mask with bit n-1 for signal n). All but SIGKILL/SIGSTOP if it cannot be read.
pub(crate) fn ignored_signals() -> u64 {
    fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(u64::MAX)
}

/// Host facts that do not change while the harness runs, found once.
pub(crate) struct HostFacts {
    pub home: Option<PathBuf>,
    /// `CARGO_HOME` (or `~/.cargo`), canonical.
    pub cargo_home: Option<PathBuf>,
    /// The system and toolchain entries of every view.
    base: Vec<Wanted>,
    devices: Vec<PathBuf>,
    proc_read_only: Vec<PathBuf>,
    stage: PathBuf,
}

/// The system entries as they are on the host.
fn system_entries() -> Vec<Wanted> {
    SYSTEM
        .iter()
        .filter_map(|p| {
            let path = PathBuf::from(p);
            let meta = fs::symlink_metadata(&path).ok()?;
            let source = if meta.file_type().is_symlink() {
                Source::Link(fs::read_link(&path).ok()?)
            } else if meta.is_dir() {
                Source::ReadOnly
            } else {
                return None;
            };
            Some(Wanted {
                path,
                source,
                is_dir: meta.is_dir(),
            })
        })
        .collect()
}

/// The toolchain entries: the cargo home's parts and the whole rustup home.
fn toolchain_entries(cargo: Option<&Path>, rustup: Option<&Path>) -> Vec<Wanted> {
    let mut paths: Vec<PathBuf> = Vec::new();
    if let Some(c) = cargo {
        paths.extend(CARGO_PARTS.iter().filter_map(|p| canonical_dir(&c.join(p))));
    }
    paths.extend(rustup.map(Path::to_path_buf));
    paths
        .into_iter()
        .map(|path| Wanted {
            path,
            source: Source::ReadOnly,
            is_dir: true,
        })
        .collect()
}

pub(crate) fn host_facts() -> &'static HostFacts {
    static FACTS: OnceLock<HostFacts> = OnceLock::new();
    FACTS.get_or_init(|| {
        let home = host_home();
        let cargo_home = tool_home("CARGO_HOME", ".cargo", home.as_deref());
        let rustup_home = tool_home("RUSTUP_HOME", ".rustup", home.as_deref());
        let mut base = system_entries();
        base.extend(toolchain_entries(
            cargo_home.as_deref(),
            rustup_home.as_deref(),
        ));
        let devices = DEVICES
            .iter()
            .map(|d| Path::new("/dev").join(d))
            .filter(|d| d.exists())
            .collect();
        let proc_read_only = PROC_READ_ONLY
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect();
        let stage = STAGES
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_dir())
            .unwrap_or_else(|| PathBuf::from("/dev"));
        HostFacts {
            home,
            cargo_home,
            base,
            devices,
            proc_read_only,
            stage,
        }
    })
}

/// The spec's `protected_paths` that really are inside `wd` with no symlink on the
/// way (canonical equals the plain join), and exist.
fn extra_protected(spec: &RunSpec, wd: &Path) -> Vec<PathBuf> {
    spec.protected_paths
        .iter()
        .map(|p| {
            if p.is_absolute() {
                p.clone()
            } else {
                wd.join(p)
            }
        })
        .filter(|p| fs::canonicalize(p).is_ok_and(|c| &c == p && c.starts_with(wd) && c != wd))
        .collect()
}

/// What the view of `spec` needs: the host facts, the private directories, the
/// workspace and the caller's paths. `idmapped` makes the writable entries premade
/// (the parent hands over idmapped clones).
pub(crate) fn mount_inputs(
    spec: &RunSpec,
    wd: &Path,
    facts: &HostFacts,
    idmapped: bool,
) -> MountInputs {
    let mut dirs = HashSet::new();
    let mut canonical = |p: &Path| -> Option<(PathBuf, bool)> {
        let c = fs::canonicalize(p).ok()?;
        let is_dir = c.is_dir();
        if is_dir {
            dirs.insert(c.clone());
        }
        Some((c, is_dir))
    };
    let mut wanted = facts.base.clone();
    let private = |path: PathBuf, mode| Wanted {
        path,
        source: Source::Private { mode },
        is_dir: true,
    };
    wanted.push(private(PathBuf::from("/tmp"), 0o1777));
    wanted.extend(facts.home.clone().map(|h| private(h, 0o700)));
    for p in &spec.read_only_paths {
        if let Some((path, is_dir)) = canonical(p).filter(|(c, _)| c != Path::new("/")) {
            wanted.push(Wanted {
                path,
                source: Source::ReadOnly,
                is_dir,
            });
        }
    }
    let writable = std::iter::once(wd.to_path_buf()).chain(
        spec.writable_paths
            .iter()
            .filter_map(|p| canonical(p).map(|c| c.0)),
    );
    for path in writable {
        wanted.push(Wanted {
            path,
            source: Source::Writable { premade: idmapped },
            is_dir: true,
        });
    }
    let mut protect: Vec<PathBuf> = [".git", ".io-harness"]
        .iter()
        .map(|n| wd.join(n))
        .filter(|p| fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink()))
        .collect();
    protect.extend(extra_protected(spec, wd));
    protect.sort();
    protect.dedup();
    let masked = spec
        .masked_paths
        .iter()
        .map(|m| {
            if m.is_absolute() {
                m.clone()
            } else {
                wd.join(m)
            }
        })
        .filter_map(|m| canonical(&m).map(|c| c.0))
        .collect();
    let mut excluded = secrets::existing(facts.cargo_home.as_deref());
    excluded.extend(host_sockets());
    dirs.extend(excluded.iter().filter(|p| p.is_dir()).cloned());
    MountInputs {
        stage: facts.stage.clone(),
        wanted,
        devices: facts.devices.clone(),
        proc_read_only: facts.proc_read_only.clone(),
        protect,
        masked,
        excluded,
        dirs,
        fresh_proc: true,
        tmpfs_size: spec.limits.memory_bytes,
    }
}
