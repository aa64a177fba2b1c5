//! Per-sandbox cgroups: the process and memory caps where a controller is ours to
//! use, and a reliable teardown.
//!
//! Three situations are supported, detected once per process:
//! - cgroup v2 with `pids`/`memory` delegated to our cgroup (a systemd user slice,
//!   a container): a child cgroup with `pids.max`, `memory.max`, read back through
//!   `pids.events` and `memory.events`;
//! - cgroup v1 `pids` and `memory` hierarchies we may write (root on a hybrid
//!   host, as on the development machines): the same caps through `pids.max`,
//!   `memory.limit_in_bytes`, `pids.events` and `memory.oom_control`;
//! - v2 without controllers: still a child cgroup for `cgroup.kill`, which kills
//!   every process in it (double-forked daemons included) in one write.
//!
//! Each sandbox gets `io-harness-<pid>-<n>` under our own cgroup in every usable
//! hierarchy. A harness killed before teardown leaves empty directories behind;
//! they are swept (rmdir only succeeds on empty cgroups) at the next detection.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::{CgroupController, SandboxError};

/// What this machine lets us use, found once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Support {
    /// Parent directory for v1 `pids` children.
    pub v1_pids: Option<PathBuf>,
    /// Parent directory for v1 `memory` children.
    pub v1_memory: Option<PathBuf>,
    /// Parent directory for v2 children, and which controllers they get.
    pub v2: Option<V2>,
}

/// A usable v2 parent.
#[derive(Debug, Clone)]
pub(crate) struct V2 {
    pub parent: PathBuf,
    pub pids: bool,
    pub memory: bool,
    pub kill: bool,
}

impl Support {
    /// Controllers a sandbox would get. A v2 group is joined whenever one can be made,
    /// even beside v1 hierarchies: besides `cgroup.kill` its `cpu.stat` counts the CPU
    /// time of every process that ever ran in it — children the kernel reaped itself
    /// (`SIGCHLD` ignored) included, which no walk of `/proc` sees.
    pub(crate) fn controllers(&self) -> Vec<CgroupController> {
        let mut out = Vec::new();
        let v2_pids = self.v2.as_ref().is_some_and(|v| v.pids);
        let v2_memory = self.v2.as_ref().is_some_and(|v| v.memory);
        if v2_pids {
            out.push(CgroupController::V2Pids);
        }
        if v2_memory {
            out.push(CgroupController::V2Memory);
        }
        if self.v1_pids.is_some() && !v2_pids {
            out.push(CgroupController::V1Pids);
        }
        if self.v1_memory.is_some() && !v2_memory {
            out.push(CgroupController::V1Memory);
        }
        if self.v2.as_ref().is_some_and(|v| v.kill) {
            out.push(CgroupController::V2Kill);
        }
        out
    }

    /// Whether anything is usable at all.
    pub(crate) fn any(&self) -> bool {
        !self.controllers().is_empty()
    }
}

/// Detect once per process.
pub(crate) fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(detect)
}

fn detect() -> Support {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut support = Support::default();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mount_point = left.split(' ').nth(4).unwrap_or("");
        let mut r = right.split(' ');
        let fstype = r.next().unwrap_or("");
        let super_opts = r.nth(1).unwrap_or("");
        if fstype == "cgroup2" && support.v2.is_none() {
            let rel = own_path(&own, str::is_empty, "0");
            let parent = Path::new(mount_point).join(rel.trim_start_matches('/'));
            support.v2 = v2_parent(&parent);
        } else if fstype == "cgroup" {
            for ctrl in ["pids", "memory"] {
                if !super_opts.split(',').any(|o| o == ctrl) {
                    continue;
                }
                let rel = own_path(&own, |c| c.split(',').any(|x| x == ctrl), "");
                let parent = Path::new(mount_point).join(rel.trim_start_matches('/'));
                if usable(&parent) {
                    match ctrl {
                        "pids" => support.v1_pids = Some(parent),
                        _ => support.v1_memory = Some(parent),
                    }
                }
            }
        }
    }
    support
}

/// Our cgroup path in a hierarchy, from /proc/self/cgroup
/// (`id:controllers:path`; v2 is `0::path`).
fn own_path(own: &str, matches: impl Fn(&str) -> bool, id: &str) -> String {
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(hid), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if (id.is_empty() || hid == id) && matches(ctrls) {
            return path.to_owned();
        }
    }
    "/".to_owned()
}

/// Can we create (and remove) a child here? Sweeps stale children on the way.
fn usable(parent: &Path) -> bool {
    sweep(parent);
    let probe = parent.join(format!("io-harness-{}-probe", std::process::id()));
    match fs::create_dir(&probe) {
        Ok(()) => fs::remove_dir(&probe).is_ok(),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => fs::remove_dir(&probe).is_ok(),
        Err(_) => false,
    }
}

fn v2_parent(parent: &Path) -> Option<V2> {
    if !usable(parent) {
        return None;
    }
    let subtree = fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
    let has = |c: &str| {
        subtree.split_whitespace().any(|x| x == c) || {
            // Try to enable it; this fails when our cgroup holds processes (the
            // "no internal processes" rule) or the controller is not delegated.
            fs::OpenOptions::new()
                .write(true)
                .open(parent.join("cgroup.subtree_control"))
                .and_then(|mut f| f.write_all(format!("+{c}").as_bytes()))
                .is_ok()
        }
    };
    let pids = has("pids");
    let memory = has("memory");
    let kill = {
        let probe = parent.join(format!("io-harness-{}-probe", std::process::id()));
        let ok = fs::create_dir(&probe).is_ok() && probe.join("cgroup.kill").exists();
        let _ = fs::remove_dir(&probe);
        ok
    };
    Some(V2 {
        parent: parent.to_owned(),
        pids,
        memory,
        kill,
    })
}

/// Remove `io-harness-<pid>-*` children left by harnesses that died, killing what
/// still runs in them first (a floor sandbox's grandchildren survive the harness).
fn sweep(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("io-harness-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let dir = entry.path();
            let _ = fs::write(dir.join("cgroup.kill"), "1");
            for p in fs::read_to_string(dir.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
            {
                if let Ok(p) = p.trim().parse::<i32>() {
                    // SAFETY: kill(2) of a process in a cgroup named after a dead harness.
                    unsafe { libc::kill(p, libc::SIGKILL) };
                }
            }
            let _ = fs::remove_dir(&dir);
        }
    }
}

/// One directory per usable hierarchy, used by one sandbox at a time and then
/// returned to a small pool: creating and removing cgroups (the memory controller's
/// especially) costs more than the rest of a sandbox's cgroup work together.
#[derive(Debug)]
struct Dirs {
    v1_pids: Option<PathBuf>,
    v1_memory: Option<PathBuf>,
    v2: Option<PathBuf>,
    /// Limits last written: a reused set is only rewritten when they change.
    pids_max: Option<Option<u64>>,
    memory_max: Option<Option<u64>>,
    /// Event counters when the current sandbox took the set (they never reset).
    base_forks_refused: u64,
    base_oom_kills: u64,
}

/// How many idle sets are kept.
const POOL_MAX: usize = 16;

fn pool() -> &'static Mutex<Vec<Dirs>> {
    static POOL: OnceLock<Mutex<Vec<Dirs>>> = OnceLock::new();
    POOL.get_or_init(|| Mutex::new(Vec::new()))
}

impl Dirs {
    fn all(&self) -> impl Iterator<Item = &PathBuf> {
        self.v2.iter().chain(&self.v1_pids).chain(&self.v1_memory)
    }

    fn create(support: &Support) -> Result<Dirs, SandboxError> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "io-harness-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut dirs = Dirs {
            v1_pids: None,
            v1_memory: None,
            v2: None,
            pids_max: None,
            memory_max: None,
            base_forks_refused: 0,
            base_oom_kills: 0,
        };
        let mkdir = |parent: &Path| -> Result<PathBuf, SandboxError> {
            let dir = parent.join(&name);
            fs::create_dir(&dir).map_err(|source| SandboxError::Cgroup {
                path: dir.clone(),
                source,
            })?;
            Ok(dir)
        };
        let controllers = support.controllers();
        let v2_used = controllers.iter().any(|c| {
            matches!(
                c,
                CgroupController::V2Pids | CgroupController::V2Memory | CgroupController::V2Kill
            )
        });
        if v2_used && let Some(v2) = &support.v2 {
            dirs.v2 = Some(mkdir(&v2.parent)?);
        }
        if controllers.contains(&CgroupController::V1Pids)
            && let Some(p) = &support.v1_pids
        {
            dirs.v1_pids = Some(mkdir(p)?);
        }
        if controllers.contains(&CgroupController::V1Memory)
            && let Some(p) = &support.v1_memory
        {
            dirs.v1_memory = Some(mkdir(p)?);
        }
        Ok(dirs)
    }

    fn pids_dir(&self, support: &Support) -> Option<&PathBuf> {
        if support.v2.as_ref().is_some_and(|v| v.pids) {
            self.v2.as_ref()
        } else {
            self.v1_pids.as_ref()
        }
    }

    fn memory_v2(&self, support: &Support) -> bool {
        support.v2.as_ref().is_some_and(|v| v.memory)
    }

    fn set_limits(
        &mut self,
        support: &Support,
        processes: Option<u64>,
        memory: Option<u64>,
    ) -> Result<(), SandboxError> {
        if self.pids_max != Some(processes)
            && let Some(dir) = self.pids_dir(support)
        {
            write(&dir.join("pids.max"), &limit(processes))?;
            self.pids_max = Some(processes);
        }
        if self.memory_max != Some(memory) {
            if self.memory_v2(support) {
                if let Some(dir) = &self.v2 {
                    write(&dir.join("memory.max"), &limit(memory))?;
                    let _ = fs::write(dir.join("memory.swap.max"), "0");
                }
            } else if let Some(dir) = &self.v1_memory {
                // memsw must stay >= the memory limit: order the two writes.
                let v = memory.map_or_else(|| "-1".to_owned(), |m| m.to_string());
                let sw = dir.join("memory.memsw.limit_in_bytes");
                if write(&dir.join("memory.limit_in_bytes"), &v).is_err() && sw.exists() {
                    write(&sw, &v)?;
                    write(&dir.join("memory.limit_in_bytes"), &v)?;
                } else if sw.exists() {
                    let _ = fs::write(&sw, &v);
                }
            }
            self.memory_max = Some(memory);
        }
        Ok(())
    }

    fn forks_refused(&self, support: &Support) -> Option<u64> {
        read_key(&self.pids_dir(support)?.join("pids.events"), "max")
    }

    fn oom_kills(&self, support: &Support) -> Option<u64> {
        if self.memory_v2(support) {
            read_key(&self.v2.as_ref()?.join("memory.events"), "oom_kill")
        } else {
            read_key(
                &self.v1_memory.as_ref()?.join("memory.oom_control"),
                "oom_kill",
            )
        }
    }

    fn procs(&self) -> Vec<i32> {
        let mut out = Vec::new();
        for dir in self.all() {
            if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
                out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    fn kill_all(&self) {
        if let Some(v2) = &self.v2 {
            let _ = fs::write(v2.join("cgroup.kill"), "1");
        }
        for pid in self.procs() {
            // SAFETY: kill(2) with a pid read from our own cgroup; no memory effects.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }

    fn remove(self) {
        for dir in self.all() {
            let _ = fs::remove_dir(dir);
        }
    }
}

/// The cgroups of one sandbox.
#[derive(Debug)]
pub(crate) struct SandboxCgroup {
    dirs: Option<Dirs>,
    support: &'static Support,
}

fn write(path: &Path, value: &str) -> Result<(), SandboxError> {
    fs::write(path, value).map_err(|source| SandboxError::Cgroup {
        path: path.to_owned(),
        source,
    })
}

/// Read a file holding one number.
fn read_value(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Read `key value` lines and return the value of `key`.
fn read_key(path: &Path, key: &str) -> Option<u64> {
    let text = fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

impl SandboxCgroup {
    /// Take a set of groups (from the pool, or new) and set the caps.
    /// `processes`/`memory` are `None` when unbounded. `None` when nothing is usable.
    pub(crate) fn create(
        support: &'static Support,
        processes: Option<u64>,
        memory: Option<u64>,
    ) -> Result<Option<SandboxCgroup>, SandboxError> {
        if !support.any() {
            return Ok(None);
        }
        let pooled = pool().lock().ok().and_then(|mut p| p.pop());
        let mut dirs = match pooled {
            Some(mut d) => match d.set_limits(support, processes, memory) {
                Ok(()) => d,
                Err(_) => {
                    // e.g. a lower memory limit below what the old set still holds.
                    d.remove();
                    let mut d = Dirs::create(support)?;
                    d.set_limits(support, processes, memory)?;
                    d
                }
            },
            None => {
                let mut d = Dirs::create(support)?;
                d.set_limits(support, processes, memory)?;
                d
            }
        };
        // Counters never reset: remember where this sandbox starts.
        if dirs.pids_max.is_some() {
            dirs.base_forks_refused = dirs.forks_refused(support).unwrap_or(0);
        }
        dirs.base_oom_kills = dirs.oom_kills(support).unwrap_or(0);
        Ok(Some(SandboxCgroup {
            dirs: Some(dirs),
            support,
        }))
    }

    /// The controllers really in use.
    pub(crate) fn controllers(&self) -> Vec<CgroupController> {
        self.support.controllers()
    }

    /// The `cgroup.procs` files the child writes itself into.
    pub(crate) fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs
            .iter()
            .flat_map(|d| d.all())
            .map(|d| d.join("cgroup.procs"))
            .collect()
    }

    /// Forks refused at `pids.max` during this sandbox.
    pub(crate) fn pids_max_hits(&self) -> Option<u64> {
        let d = self.dirs.as_ref()?;
        Some(
            d.forks_refused(self.support)?
                .saturating_sub(d.base_forks_refused),
        )
    }

    /// OOM kills inside the group during this sandbox.
    pub(crate) fn oom_kills(&self) -> Option<u64> {
        let d = self.dirs.as_ref()?;
        Some(d.oom_kills(self.support)?.saturating_sub(d.base_oom_kills))
    }

    /// The v2 group's `cpu.stat` (present in every v2 group, controller or not) and
    /// its CPU time in ms now, the start of this sandbox's share of a pooled group.
    pub(crate) fn cpu_stat(&self) -> Option<(PathBuf, u64)> {
        let path = self.dirs.as_ref()?.v2.as_ref()?.join("cpu.stat");
        let base = super::caps::cpu_stat_ms(&path)?;
        Some((path, base))
    }

    /// Kill everything in the groups.
    pub(crate) fn kill_all(&self) {
        if let Some(d) = &self.dirs {
            d.kill_all();
        }
    }

    /// Verify the groups are empty (killing what is left, for up to two seconds),
    /// then return them to the pool. Reports how many processes could not be killed.
    pub(crate) fn destroy(&mut self) -> Result<(), SandboxError> {
        let Some(dirs) = self.dirs.take() else {
            return Ok(());
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let procs = dirs.procs();
            if procs.is_empty() {
                // Killed orphans of a sandbox without a pid namespace may still be
                // zombies waiting for the host's init: they no longer show in
                // cgroup.procs but still count against pids.max. Only a set with
                // nothing charged goes back to the pool.
                let idle = dirs
                    .pids_dir(self.support)
                    .is_none_or(|d| read_value(&d.join("pids.current")) == Some(0));
                match pool().lock() {
                    Ok(mut p) if idle && p.len() < POOL_MAX => p.push(dirs),
                    _ => dirs.remove(),
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                dirs.remove();
                return Err(SandboxError::Teardown {
                    remaining: procs.len(),
                });
            }
            dirs.kill_all();
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for SandboxCgroup {
    fn drop(&mut self) {
        let _ = self.destroy();
    }
}

fn limit(v: Option<u64>) -> String {
    v.map_or_else(|| "max".to_owned(), |v| v.to_string())
}
