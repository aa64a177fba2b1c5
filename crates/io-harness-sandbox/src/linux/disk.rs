//! The disk cap: how much the writable host directories (the workspace, a gate's
//! report directory, the floor's private `HOME`/`TMPDIR`) may grow while a command
//! runs.
//!
//! Two mechanisms, because neither alone is enough:
//! - `RLIMIT_FSIZE` at the cap in the child: no single file ever grows past it, at
//!   no cost, exactly (the writer gets `SIGXFSZ`);
//! - this watcher, for growth spread over many files. Walking the tree on every tick
//!   would cost too much, so the *trigger* is the used-block count of the
//!   filesystems the directories are on (`fstatvfs`, one system call each): the
//!   directories cannot have grown by more than their filesystems did. Only when
//!   the filesystems have grown near the cap is the tree walked ([`super::walk`]) to
//!   *confirm* the growth is the command's own — so another host process filling the
//!   same disk never kills a command. After a walk that finds the command under the
//!   cap, the next one waits until the filesystems have grown by what the command
//!   still has left.
//!
//! The baseline walk runs on the first tick, while the command may already write; it
//! counts entries whose status changed since just before the launch as zero, so what
//! the command wrote in the meantime is charged to it, never to the baseline.
//! Another process deleting files on the same filesystem while the command writes
//! can hide the command's growth from the trigger, so the tree is also walked
//! periodically, at most a twentieth of the time (a walk of a small workspace costs
//! well under a millisecond; a huge one is walked seldom, and there the trigger and
//! `RLIMIT_FSIZE`, which bounds every single file, carry the cap).

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::tmpfs::used;
use super::walk::{self, Stamp};

/// How far below the command's allowance the filesystems' growth triggers a walk,
/// so a fast writer is confirmed before, not after, it passes the cap.
const MARGIN: u64 = 16 << 20;
/// A walk also runs at least this often relative to its own cost (a 5% duty cycle),
/// whatever the filesystems say: another process freeing space on the same
/// filesystem would otherwise hide the command's growth from the trigger.
const DUTY: u32 = 20;
/// A walk this cheap is also done once more at the end, whatever the filesystems
/// say: another process freeing space while the command wrote would otherwise hide a
/// hit that `RLIMIT_FSIZE` stopped at the cap.
const CHEAP_WALK: Duration = Duration::from_millis(10);

/// The watcher of one sandbox.
#[derive(Debug)]
pub(crate) struct DiskWatch {
    cap: u64,
    roots: Vec<PathBuf>,
    /// One open directory per filesystem, with its used bytes at the start.
    filesystems: Vec<(File, u64)>,
    /// Their device numbers (an unlinked file still open counts where it lies).
    devs: Vec<u64>,
    /// The top process of the sandbox, once known (for its open unlinked files).
    root: Option<i32>,
    since: Stamp,
    baseline: Option<u64>,
    /// Filesystem growth at which the next confirming walk runs.
    next_walk: u64,
    /// The growth found by the last walk.
    pub growth: u64,
    /// Walks done (for the measurements in the tests' reports).
    pub walks: u32,
    /// When the next walk runs even without a trigger.
    next_periodic: Instant,
    /// What the last walk cost.
    last_cost: Duration,
}

impl DiskWatch {
    /// Start watching `roots` (canonical directories) against `cap` bytes of growth.
    /// Called before the command is launched, so the filesystems' starting point
    /// precedes every write of it.
    pub(crate) fn new(cap: u64, roots: Vec<PathBuf>) -> DiskWatch {
        let mut roots: Vec<PathBuf> = roots;
        roots.sort();
        roots.dedup();
        // A root inside another is walked as part of it.
        let nested: Vec<PathBuf> = roots
            .iter()
            .filter(|r| roots.iter().any(|o| o != *r && r.starts_with(o)))
            .cloned()
            .collect();
        roots.retain(|r| !nested.contains(r));
        let mut filesystems: Vec<(File, u64)> = Vec::new();
        let mut devs = Vec::new();
        for r in &roots {
            let Ok(f) = File::open(r) else { continue };
            let Ok(m) = f.metadata() else { continue };
            if devs.contains(&m.dev()) {
                continue;
            }
            devs.push(m.dev());
            let u = used(&f);
            filesystems.push((f, u));
        }
        let since = SystemTime::now()
            .checked_sub(Duration::from_millis(50))
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or((0, 0), |d| {
                (d.as_secs() as i64, i64::from(d.subsec_nanos()))
            });
        DiskWatch {
            cap,
            roots,
            filesystems,
            devs,
            root: None,
            since,
            baseline: None,
            next_walk: cap.saturating_sub(MARGIN),
            growth: 0,
            walks: 0,
            next_periodic: Instant::now(),
            last_cost: Duration::ZERO,
        }
    }

    /// How much the filesystems have grown since the start.
    fn fs_growth(&self) -> u64 {
        self.filesystems
            .iter()
            .map(|(f, start)| used(f).saturating_sub(*start))
            .fold(0, u64::saturating_add)
    }

    fn walk(&mut self, since: Option<Stamp>) -> walk::Tally {
        self.walks += 1;
        let started = Instant::now();
        let mut total = walk::Tally::default();
        for r in &self.roots {
            let t = walk::tally(r, since);
            total.bytes = total.bytes.saturating_add(t.bytes);
            total.opaque |= t.opaque;
        }
        let now = Instant::now();
        self.last_cost = now - started;
        self.next_periodic = now + self.last_cost * DUTY;
        total
    }

    /// The command's growth now, by a walk; an opaque walk is charged the
    /// filesystems' growth.
    fn confirm(&mut self, fs_growth: u64) -> u64 {
        let baseline = self.baseline.unwrap_or(0);
        let t = self.walk(None);
        // A file unlinked while still open is in no directory the walk sees, yet holds
        // its blocks until it is closed: counted from the processes' descriptors.
        let held = self.root.map_or(0, |r| unlinked_open_bytes(r, &self.devs));
        let mut growth = t.bytes.saturating_sub(baseline).saturating_add(held);
        if t.opaque {
            growth = growth.max(fs_growth);
        }
        self.growth = growth;
        growth
    }

    /// One tick: true when the command's growth is past the cap (kill it).
    pub(crate) fn tick(&mut self, root: i32) -> bool {
        self.root = Some(root);
        if self.baseline.is_none() {
            let since = Some(self.since);
            self.baseline = Some(self.walk(since).bytes);
        }
        let fs_growth = self.fs_growth();
        if fs_growth < self.next_walk && Instant::now() < self.next_periodic {
            return false;
        }
        let growth = self.confirm(fs_growth);
        if growth > self.cap {
            return true;
        }
        self.next_walk = fs_growth.saturating_add((self.cap - growth).saturating_sub(MARGIN));
        false
    }

    /// At the end: whether the command's growth reached the cap (one last walk, when
    /// the filesystems grew that much or walks are cheap).
    pub(crate) fn reached(&mut self) -> bool {
        if self.baseline.is_none() {
            return false;
        }
        let fs_growth = self.fs_growth();
        if fs_growth < self.cap && self.last_cost > CHEAP_WALK {
            return self.growth >= self.cap;
        }
        self.confirm(fs_growth) >= self.cap
    }
}

/// Bytes held by files on `devs` that the processes of the tree under `root` keep open
/// after unlinking them (`/proc/<pid>/fd/<n>` → `… (deleted)`), each file once.
fn unlinked_open_bytes(root: i32, devs: &[u64]) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    let mut total = 0u64;
    let mut stack = vec![root];
    let mut visited = 0;
    while let Some(pid) = stack.pop() {
        visited += 1;
        if visited > 65_536 {
            break;
        }
        stack.extend(super::monitor::children(pid));
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let deleted = std::fs::read_link(fd.path())
                .is_ok_and(|t| t.as_os_str().as_encoded_bytes().ends_with(b" (deleted)"));
            if !deleted {
                continue;
            }
            let Ok(m) = std::fs::metadata(fd.path()) else {
                continue;
            };
            if m.is_file() && devs.contains(&m.dev()) && seen.insert((m.dev(), m.ino())) {
                total = total.saturating_add(m.blocks().saturating_mul(512));
            }
        }
    }
    total
}
