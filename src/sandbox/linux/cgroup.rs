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
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::sandbox::{CgroupController, SandboxError};

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
    /// Controllers a sandbox would get.
    pub(crate) fn controllers(&self) -> Vec<CgroupController> {
        let mut out = Vec::new();
        if let Some(v2) = &self.v2 {
            if v2.pids {
                out.push(CgroupController::V2Pids);
            }
            if v2.memory {
                out.push(CgroupController::V2Memory);
            }
            if v2.kill {
                out.push(CgroupController::V2Kill);
            }
        }
        if self.v1_pids.is_some() && !self.v2.as_ref().is_some_and(|v| v.pids) {
            out.push(CgroupController::V1Pids);
        }
        if self.v1_memory.is_some() && !self.v2.as_ref().is_some_and(|v| v.memory) {
            out.push(CgroupController::V1Memory);
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

/// The cgroups of one sandbox.
#[derive(Debug)]
pub(crate) struct SandboxCgroup {
    dirs: Vec<(CgroupController, PathBuf)>,
    /// Directory of the v2 group (for cgroup.kill), if any.
    v2: Option<PathBuf>,
    removed: bool,
}

fn write(path: &Path, value: &str) -> Result<(), SandboxError> {
    fs::write(path, value).map_err(|source| SandboxError::Cgroup {
        path: path.to_owned(),
        source,
    })
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
    /// Create the groups and set the caps. `processes`/`memory` are `None` when
    /// unbounded. Returns `None` when nothing is usable.
    pub(crate) fn create(
        support: &Support,
        processes: Option<u64>,
        memory: Option<u64>,
    ) -> Result<Option<SandboxCgroup>, SandboxError> {
        if !support.any() {
            return Ok(None);
        }
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "io-harness-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut cg = SandboxCgroup {
            dirs: Vec::new(),
            v2: None,
            removed: false,
        };
        let mkdir = |parent: &Path| -> Result<PathBuf, SandboxError> {
            let dir = parent.join(&name);
            fs::create_dir(&dir).map_err(|source| SandboxError::Cgroup {
                path: dir.clone(),
                source,
            })?;
            Ok(dir)
        };
        for ctrl in support.controllers() {
            match ctrl {
                CgroupController::V2Pids
                | CgroupController::V2Memory
                | CgroupController::V2Kill => {
                    let Some(v2) = &support.v2 else { continue };
                    let dir = match &cg.v2 {
                        Some(d) => d.clone(),
                        None => {
                            let d = mkdir(&v2.parent)?;
                            cg.v2 = Some(d.clone());
                            cg.dirs.push((CgroupController::V2Kill, d.clone()));
                            d
                        }
                    };
                    if ctrl == CgroupController::V2Pids {
                        write(&dir.join("pids.max"), &limit(processes))?;
                    }
                    if ctrl == CgroupController::V2Memory {
                        write(&dir.join("memory.max"), &limit(memory))?;
                        let _ = fs::write(dir.join("memory.swap.max"), "0");
                    }
                }
                CgroupController::V1Pids => {
                    let Some(parent) = &support.v1_pids else {
                        continue;
                    };
                    let dir = mkdir(parent)?;
                    cg.dirs.push((ctrl, dir.clone()));
                    write(&dir.join("pids.max"), &limit(processes))?;
                }
                CgroupController::V1Memory => {
                    let Some(parent) = &support.v1_memory else {
                        continue;
                    };
                    let dir = mkdir(parent)?;
                    cg.dirs.push((ctrl, dir.clone()));
                    if let Some(m) = memory {
                        write(&dir.join("memory.limit_in_bytes"), &m.to_string())?;
                        let sw = dir.join("memory.memsw.limit_in_bytes");
                        if sw.exists() {
                            let _ = fs::write(sw, m.to_string());
                        }
                    }
                }
            }
        }
        Ok(Some(cg))
    }

    /// The controllers really in use.
    pub(crate) fn controllers(&self, support: &Support) -> Vec<CgroupController> {
        let mut out = support.controllers();
        out.retain(|c| match c {
            CgroupController::V1Pids | CgroupController::V1Memory => {
                self.dirs.iter().any(|(k, _)| k == c)
            }
            _ => self.v2.is_some(),
        });
        out
    }

    /// Move `pid` into every group.
    pub(crate) fn add(&self, pid: i32) -> Result<(), SandboxError> {
        let pid = pid.to_string();
        for (_, dir) in &self.dirs {
            write(&dir.join("cgroup.procs"), &pid)?;
        }
        Ok(())
    }

    /// Times a fork was refused at `pids.max`.
    pub(crate) fn pids_max_hits(&self) -> Option<u64> {
        self.dirs
            .iter()
            .find(|(k, _)| matches!(k, CgroupController::V1Pids))
            .map(|(_, d)| d.join("pids.events"))
            .or_else(|| self.v2.as_ref().map(|d| d.join("pids.events")))
            .and_then(|p| read_key(&p, "max"))
    }

    /// OOM kills inside the group.
    pub(crate) fn oom_kills(&self) -> Option<u64> {
        if let Some((_, d)) = self
            .dirs
            .iter()
            .find(|(k, _)| matches!(k, CgroupController::V1Memory))
        {
            return read_key(&d.join("memory.oom_control"), "oom_kill");
        }
        self.v2
            .as_ref()
            .and_then(|d| read_key(&d.join("memory.events"), "oom_kill"))
    }

    fn procs(&self) -> Vec<i32> {
        let mut out = Vec::new();
        for (_, dir) in &self.dirs {
            if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
                out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Kill everything in the groups.
    pub(crate) fn kill_all(&self) {
        if let Some(d) = &self.v2 {
            let _ = fs::write(d.join("cgroup.kill"), "1");
        }
        for pid in self.procs() {
            // SAFETY: kill(2) with a pid read from our own cgroup; no memory effects.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }

    /// Kill everything, verify the groups are empty, remove them. Bounded: gives up
    /// after two seconds and reports how many processes were left.
    pub(crate) fn destroy(&mut self) -> Result<(), SandboxError> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut dirs: Vec<PathBuf> = self.dirs.iter().map(|(_, d)| d.clone()).collect();
        let mut killed = false;
        loop {
            let procs = self.procs();
            if !procs.is_empty() || !killed {
                self.kill_all();
                killed = true;
            }
            dirs.retain(|d| fs::remove_dir(d).is_err() && d.exists());
            if dirs.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let remaining = self.procs().len();
                return if remaining > 0 {
                    Err(SandboxError::Teardown { remaining })
                } else {
                    Err(SandboxError::Cgroup {
                        path: dirs[0].clone(),
                        source: io::Error::other("cgroup could not be removed"),
                    })
                };
            }
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
