//! The caps the parent enforces by watching, in one place for the two supervisors
//! (the run loop in [`super::session`] and the spawn handle's
//! [`super::watchdog`]): memory without a memory cgroup (RSS plus private tmpfs),
//! CPU time over the whole process tree, the disk cap, and — where only
//! `RLIMIT_NPROC` holds the process cap — whether the tree was seen at its limit.
//!
//! Each watch has its own period: the filesystem trigger of the disk cap is one
//! `fstatvfs` and runs often, because a writer fills page cache at gigabytes per
//! second; the tree sample reads one `/proc` file per process and runs less often.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::disk::DiskWatch;
use super::monitor;
use super::tmpfs::Tmpfs;
use crate::Cap;

/// How often the tree is sampled (memory, CPU, tasks).
pub(crate) const SAMPLE_TICK: Duration = Duration::from_millis(50);
/// How often the cheap watches run: the disk trigger and the tmpfs mounts (one
/// `fstatvfs` each; a writer fills either at gigabytes per second).
pub(crate) const FAST_TICK: Duration = Duration::from_millis(5);

/// What to watch, decided by `prepare`.
#[derive(Debug, Default)]
pub(crate) struct WatchPlan {
    /// Memory cap for the monitor (no memory cgroup).
    pub memory: Option<u64>,
    /// Count the sandbox's private tmpfs mounts against `memory`.
    pub tmpfs: bool,
    /// CPU milliseconds of the whole tree.
    pub cpu_ms: Option<u64>,
    /// Read the tree's CPU time from this cgroup v2 `cpu.stat` instead of `/proc`,
    /// less its `usage_usec` in ms when the sandbox took the (pooled) group.
    pub cpu_stat: Option<(PathBuf, u64)>,
    /// `RLIMIT_NPROC`'s limit, to notice the tree at it.
    pub nproc: Option<u64>,
    /// The disk watcher, created before the launch.
    pub disk: Option<DiskWatch>,
    /// The top process is a pid namespace's init (see [`monitor::sample`]).
    pub init_root: bool,
}

/// A running watch.
#[derive(Debug)]
pub(crate) struct CapWatch {
    plan: WatchPlan,
    tmpfs: Option<Tmpfs>,
    next_sample: Instant,
    next_fast: Instant,
    /// Resident bytes at the last tree sample.
    last_rss: u64,
    /// The tree was sampled with as many tasks as `RLIMIT_NPROC` allows.
    pub nproc_reached: bool,
    /// Highest memory (RSS + tmpfs) sampled, in bytes.
    pub peak_memory: u64,
    /// Last CPU time of the tree, in ms.
    pub cpu_ms: u64,
}

impl CapWatch {
    pub(crate) fn new(plan: WatchPlan) -> CapWatch {
        let now = Instant::now();
        CapWatch {
            tmpfs: plan.tmpfs.then(Tmpfs::new),
            plan,
            next_sample: now,
            next_fast: now,
            last_rss: 0,
            nproc_reached: false,
            peak_memory: 0,
            cpu_ms: 0,
        }
    }

    fn samples(&self) -> bool {
        self.plan.memory.is_some() || self.plan.cpu_ms.is_some() || self.plan.nproc.is_some()
    }

    /// Whether there is anything to watch.
    pub(crate) fn active(&self) -> bool {
        self.samples() || self.plan.disk.is_some()
    }

    fn fast(&self) -> bool {
        self.plan.disk.is_some() || self.tmpfs.is_some() && self.plan.memory.is_some()
    }

    /// When the next tick is due, if anything is watched.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        let s = self.samples().then_some(self.next_sample);
        let d = self.fast().then_some(self.next_fast);
        match (s, d) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Run the watches that are due; the cap to kill the sandbox for, if one is
    /// passed. `root` is the host pid of the top process.
    pub(crate) fn tick(&mut self, root: i32) -> Option<Cap> {
        let now = Instant::now();
        let sample = self.samples() && now >= self.next_sample;
        if self.fast() && (now >= self.next_fast || sample) {
            self.next_fast = now + FAST_TICK;
            if let Some(disk) = self.plan.disk.as_mut()
                && disk.tick(root)
            {
                return Some(Cap::Disk);
            }
            if !sample && self.over_memory(root) {
                return Some(Cap::Memory);
            }
        }
        if !sample {
            return None;
        }
        self.next_sample = now + SAMPLE_TICK;
        let s = monitor::sample(root, self.plan.init_root);
        self.last_rss = s.rss_bytes;
        if let Some(limit) = self.plan.nproc
            && s.tasks >= limit
        {
            self.nproc_reached = true;
        }
        if self.over_memory(root) {
            return Some(Cap::Memory);
        }
        if let Some(cap) = self.plan.cpu_ms {
            self.cpu_ms = match &self.plan.cpu_stat {
                Some((path, base)) => {
                    cpu_stat_ms(path).map_or(s.cpu_ms, |ms| ms.saturating_sub(*base))
                }
                None => s.cpu_ms,
            };
            if self.cpu_ms >= cap {
                return Some(Cap::Cpu);
            }
        }
        None
    }

    /// The last resident memory sampled plus the tmpfs mounts now, against the cap.
    fn over_memory(&mut self, root: i32) -> bool {
        let Some(cap) = self.plan.memory else {
            return false;
        };
        let tmpfs = self.tmpfs.as_mut().map_or(0, |t| t.used_bytes(root));
        let used = self.last_rss.saturating_add(tmpfs);
        self.peak_memory = self.peak_memory.max(used);
        used > cap
    }

    /// The command did not join its cgroup: sample the tree's CPU time instead.
    pub(crate) fn without_cgroup(&mut self) {
        self.plan.cpu_stat = None;
    }

    /// At the end: whether the disk cap was reached (a last confirming walk).
    pub(crate) fn disk_reached(&mut self) -> bool {
        self.plan.disk.as_mut().is_some_and(DiskWatch::reached)
    }
}

/// `usage_usec` of a cgroup v2 `cpu.stat`, in ms.
pub(crate) fn cpu_stat_ms(path: &std::path::Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|us| us / 1000)
}
