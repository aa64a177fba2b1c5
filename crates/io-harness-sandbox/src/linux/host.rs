//! What the parent learns about the host before planning a sandbox: the paths to
//! hide and to bring back, the devices and kernel knobs that exist, the unix sockets
//! that listen, the signals this process ignores. Facts that cannot change while the
//! harness runs are found once ([`host_facts`]); the rest per sandbox.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::mounts::{DEVICES, MountInputs, PROC_READ_ONLY};
use crate::RunSpec;

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

/// Host files only root may read. A sandbox started by root keeps uid 0 (without
/// any capability), which still owns them, so they are hidden explicitly.
fn host_secrets() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = [
        "/etc/shadow",
        "/etc/shadow-",
        "/etc/gshadow",
        "/etc/gshadow-",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    if let Ok(entries) = fs::read_dir("/etc/ssh") {
        out.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with("_key")),
        );
    }
    out.retain(|p| p.is_file());
    out
}

/// Pathname unix sockets of the host network namespace, except those in directories
/// hidden anyway (most live in /run, /tmp and $HOME) and not brought back (the
/// workspace may lie in /tmp).
fn host_sockets(hidden: &[PathBuf], shown: &[&Path]) -> Vec<PathBuf> {
    let text = fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let mut out: Vec<PathBuf> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(7))
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .filter(|p| {
            !hidden.iter().any(|h| p.starts_with(h)) || shown.iter().any(|s| p.starts_with(s))
        })
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

/// Host facts that do not change while the harness runs, found once: what to hide
/// always, which toolchain directories exist, which devices and /proc knobs exist.
pub(crate) struct HostFacts {
    pub home: Option<PathBuf>,
    hide: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    devices: Vec<PathBuf>,
    proc_read_only: Vec<PathBuf>,
    dirs: HashSet<PathBuf>,
}

pub(crate) fn host_facts() -> &'static HostFacts {
    static FACTS: OnceLock<HostFacts> = OnceLock::new();
    FACTS.get_or_init(|| {
        let home = host_home();
        let mut hide: Vec<PathBuf> = ["/tmp", "/var/tmp", "/run", "/var/run"]
            .iter()
            .filter_map(|p| canonical_dir(Path::new(p)))
            .collect();
        hide.extend(home.clone());
        hide.extend(std::env::var_os("XDG_RUNTIME_DIR").and_then(|x| canonical_dir(Path::new(&x))));
        hide.extend(host_secrets());
        let mut read_only: Vec<PathBuf> = Vec::new();
        if let Some(h) = &home {
            for sub in [".cargo/bin", ".cargo/registry", ".rustup"] {
                read_only.push(h.join(sub));
            }
        }
        if let Some(v) = std::env::var_os("CARGO_HOME").map(PathBuf::from) {
            read_only.push(v.join("bin"));
            read_only.push(v.join("registry"));
        }
        read_only.extend(std::env::var_os("RUSTUP_HOME").map(PathBuf::from));
        let read_only: Vec<PathBuf> = read_only
            .iter()
            .filter_map(|p| fs::canonicalize(p).ok())
            .collect();
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
        let dirs = hide
            .iter()
            .chain(&read_only)
            .filter(|p| p.is_dir())
            .cloned()
            .collect();
        HostFacts {
            home,
            hide,
            read_only,
            devices,
            proc_read_only,
            dirs,
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

pub(crate) fn mount_inputs(spec: &RunSpec, wd: &Path, facts: &HostFacts) -> MountInputs {
    let mut dirs = facts.dirs.clone();
    dirs.insert(wd.to_owned());
    let mut canonical = |p: &Path| -> Option<PathBuf> {
        let c = fs::canonicalize(p).ok()?;
        if c.is_dir() {
            dirs.insert(c.clone());
        }
        Some(c)
    };
    let mut hide = facts.hide.clone();
    hide.extend(spec.hidden_paths.iter().filter_map(|p| canonical(p)));
    hide.extend(host_sockets(&facts.hide, &[wd]));
    hide.retain(|p| p != Path::new("/"));
    hide.sort();
    hide.dedup();

    let writable = spec
        .writable_paths
        .iter()
        .filter_map(|p| canonical(p))
        .collect();
    let mut read_only = facts.read_only.clone();
    read_only.extend(spec.read_only_paths.iter().filter_map(|p| canonical(p)));
    read_only.sort();
    read_only.dedup();

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
        .filter_map(|m| canonical(&m))
        .collect();
    MountInputs {
        dirs,
        devices: facts.devices.clone(),
        proc_read_only: facts.proc_read_only.clone(),
        workdir: wd.to_owned(),
        writable,
        home: facts.home.clone(),
        hide,
        read_only,
        protect,
        masked,
        fresh_proc: true,
    }
}
