//! The filesystem view of the native backend, planned in the parent and applied by
//! the child inside its new mount namespace.
//!
//! The view is an **allowlist** built in a fresh root: every tree the command may
//! see (system directories and toolchains read-only; the workspace writable) is
//! cloned with `open_tree`, an empty tmpfs is mounted on a staging directory, each
//! clone is moved to its own path inside it, private tmpfs mounts (`/tmp`, `HOME`),
//! a minimal `/dev` and a fresh `/proc` are added, secrets inside the read-only trees
//! are masked, and the child `pivot_root`s into the staging root and detaches the
//! host's. A path nobody listed is therefore *absent* — not merely read-only, which
//! would not stop `connect()` to a host unix socket bound there later — whatever
//! the list forgot to name.
//!
//! `/proc` is mounted before the pivot: the kernel only lets a user namespace mount
//! a proc that is no more revealing than one already visible, and the host's stops
//! being visible once the old root is detached.
//!
//! The parent decides every step; the child only walks [`MountPlan::apply`].

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use libc::{c_uint, c_ulong};

use super::sys::{self, Errno, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};
use crate::{MountReport, ViewAccess, ViewEntry};

const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const OPEN_TREE_CLONE: c_uint = 0x1;
const AT_EMPTY_PATH: c_uint = 0x1000;
const AT_RECURSIVE: c_uint = 0x8000;

/// The empty, mode-000 file that masks are bound to. Created in the sandbox's
/// private `/dev` and unlinked once every bind of it is in place.
const MASK_SOURCE: &str = "/dev/.io-harness-mask";

/// Device nodes bound from the host into the minimal `/dev`.
pub(crate) const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// `/proc` entries that are made read-only: writes there reach the host kernel.
pub(crate) const PROC_READ_ONLY: [&str; 4] =
    ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"];

/// Flags of a tmpfs that masks a directory.
const HIDE_FLAGS: c_ulong = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;

/// Size of the tmpfs mounts that only hold mount points (the root, `/dev`, masks).
const SMALL_TMPFS: &str = "size=1m";

/// How a planned entry is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// A host path bound read-only.
    ReadOnly,
    /// A host directory bound writable; `premade` when the parent hands over an
    /// idmapped clone instead of the child cloning it.
    Writable { premade: bool },
    /// An empty private tmpfs with this mode.
    Private { mode: u32 },
    /// A symlink with this target.
    Link(PathBuf),
}

/// One entry the parent wants in the view.
#[derive(Debug, Clone)]
pub(crate) struct Wanted {
    pub path: PathBuf,
    pub source: Source,
    pub is_dir: bool,
}

/// One mount step.
#[derive(Debug)]
enum Op {
    MakePrivate,
    Clone {
        path: CString,
        slot: usize,
        recursive: bool,
        attrs: u64,
    },
    Tmpfs {
        target: CString,
        flags: c_ulong,
        data: CString,
    },
    /// A read-only, mode-000 tmpfs over the directory `target`, a host directory to
    /// exclude; like [`Op::Mask`], one gone by then needs none.
    HideDir {
        target: CString,
        data: CString,
    },
    Mkdir {
        path: CString,
    },
    Touch {
        path: CString,
        mode: libc::mode_t,
    },
    Place {
        slot: usize,
        target: CString,
    },
    /// The mask in `slot` over `target`, a host file to exclude. A file that vanished
    /// between the plan and the mount (a host socket whose server went away) needs no
    /// mask, so `ENOENT` is no failure.
    Mask {
        slot: usize,
        target: CString,
    },
    BindReadOnly {
        path: CString,
    },
    Symlink {
        target: CString,
        link: CString,
    },
    Proc {
        target: CString,
    },
    DevPts {
        target: CString,
    },
    Unlink {
        path: CString,
    },
    ReadOnly {
        path: CString,
    },
    /// `pivot_root` into the staging root and detach the host's.
    Pivot {
        stage: CString,
    },
}

#[derive(Debug)]
struct Step {
    op: Op,
    /// Failure is tolerated (conveniences such as `/dev/pts`).
    optional: bool,
}

/// What the parent knows when planning. Every host path is canonical and exists; the
/// plan itself touches no filesystem.
#[derive(Debug, Default)]
pub(crate) struct MountInputs {
    /// An existing host directory the fresh root is assembled on (in the child's
    /// private mount namespace only).
    pub stage: PathBuf,
    /// The view, in any order.
    pub wanted: Vec<Wanted>,
    /// Host device nodes to bind into the minimal `/dev` (`/dev/null`...).
    pub devices: Vec<PathBuf>,
    /// `/proc` entries to make read-only (those that exist).
    pub proc_read_only: Vec<PathBuf>,
    /// Paths in the workspace made read-only (`.git`, `.io-harness`).
    pub protect: Vec<PathBuf>,
    /// Paths the policy denies reading (canonical, existing); directories in `dirs`.
    pub masked: Vec<PathBuf>,
    /// Host secrets inside read-only trees and host unix sockets listening inside the
    /// view (canonical, existing); directories in `dirs`.
    pub excluded: Vec<PathBuf>,
    /// Which of `masked` and `excluded` are directories.
    pub dirs: HashSet<PathBuf>,
    /// Mount a fresh `/proc` (needs a pid namespace of our own).
    pub fresh_proc: bool,
    /// `size=` of the writable private tmpfs mounts (`/tmp`, `HOME`, `/dev/shm`):
    /// the memory cap, so none can hold more than the sandbox may use.
    pub tmpfs_size: Option<u64>,
}

/// The steps, the number of detached-tree slots they use, and what they achieve.
#[derive(Debug)]
pub(crate) struct MountPlan {
    steps: Vec<Step>,
    /// Steps before this one only clone host trees: a root child runs them while it
    /// still has host root's identity (which may traverse `/root` and other 0700
    /// directories to reach a toolchain), the rest after it became the sandbox uid.
    clones_end: usize,
    /// Number of fd slots the child needs.
    pub slots: usize,
    /// Slots the parent fills with an idmapped clone of the path, before the launch.
    pub premade: Vec<(usize, PathBuf)>,
    /// What a successful application gives the command.
    pub report: MountReport,
}

fn c(path: &Path) -> CString {
    // Paths come from canonicalize() or constants and cannot contain NUL.
    CString::new(path.as_os_str().as_bytes()).unwrap_or_default()
}

fn cs(s: &str) -> CString {
    CString::new(s).unwrap_or_default()
}

fn depth(p: &Path) -> usize {
    p.components().count()
}

/// Whether `p` shows host content: the deepest entry covering it is a host bind.
fn shown(p: &Path, wanted: &[Wanted]) -> bool {
    wanted
        .iter()
        .filter(|w| p.starts_with(&w.path) && (w.is_dir || w.path == p))
        .max_by_key(|w| depth(&w.path))
        .is_some_and(|w| matches!(w.source, Source::ReadOnly | Source::Writable { .. }))
}

/// The read-only entries another read-only or writable host tree already shows
/// (binding them again would add nothing, or take writability away).
fn redundant(w: &Wanted, all: &[Wanted]) -> bool {
    w.source == Source::ReadOnly
        && all.iter().any(|o| {
            o.is_dir
                && o.path != w.path
                && w.path.starts_with(&o.path)
                && matches!(o.source, Source::ReadOnly | Source::Writable { .. })
                && !all.iter().any(|p| {
                    // ...unless something private lies between them.
                    matches!(p.source, Source::Private { .. })
                        && p.path.starts_with(&o.path)
                        && w.path.starts_with(&p.path)
                        && p.path != o.path
                })
        })
}

struct Builder {
    steps: Vec<Step>,
    slots: usize,
    stage: PathBuf,
    made: HashSet<PathBuf>,
}

impl Builder {
    fn push(&mut self, op: Op) {
        self.steps.push(Step {
            op,
            optional: false,
        });
    }
    fn optional(&mut self, op: Op) {
        self.steps.push(Step { op, optional: true });
    }
    /// `p` inside the staging root.
    fn at(&self, p: &Path) -> PathBuf {
        self.stage.join(p.strip_prefix("/").unwrap_or(p))
    }
    fn slot(&mut self) -> usize {
        self.slots += 1;
        self.slots - 1
    }
    fn clone_tree(&mut self, path: &Path, recursive: bool, attrs: u64) -> usize {
        let slot = self.slot();
        self.push(Op::Clone {
            path: c(path),
            slot,
            recursive,
            attrs,
        });
        slot
    }
    fn tmpfs(&mut self, target: &Path, flags: c_ulong, data: &str) {
        self.push(Op::Tmpfs {
            target: c(target),
            flags,
            data: cs(data),
        });
    }
    /// Make the directories above `p` (an inside path) in the staging root.
    fn parents(&mut self, p: &Path) {
        let mut ancestors: Vec<PathBuf> = p
            .ancestors()
            .skip(1)
            .filter(|a| depth(a) > 1)
            .map(Path::to_path_buf)
            .collect();
        ancestors.reverse();
        for a in ancestors {
            if self.made.insert(a.clone()) {
                let at = self.at(&a);
                self.push(Op::Mkdir { path: c(&at) });
            }
        }
    }
    /// A mount point for `p` (inside path): a directory or an empty file.
    fn mount_point(&mut self, p: &Path, is_dir: bool) {
        self.parents(p);
        let at = self.at(p);
        if is_dir {
            self.made.insert(p.to_path_buf());
            self.push(Op::Mkdir { path: c(&at) });
        } else {
            self.push(Op::Touch {
                path: c(&at),
                mode: 0o600,
            });
        }
    }
    /// A read-only clone of the mask source, moved over `target` (inside path); a
    /// `tolerant` mask accepts a target that is gone by then.
    fn mask_file(&mut self, target: &Path, tolerant: bool) {
        let attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
        let source = self.at(Path::new(MASK_SOURCE));
        let slot = self.clone_tree(&source, false, attrs);
        let target = c(&self.at(target));
        self.push(if tolerant {
            Op::Mask { slot, target }
        } else {
            Op::Place { slot, target }
        });
    }
    /// An empty, mode-000, read-only tmpfs over the directory `target` (inside path);
    /// `tolerant` as for [`Builder::mask_file`].
    fn mask_dir(&mut self, target: &Path, tolerant: bool) {
        let at = self.at(target);
        let data = format!("mode=000,{SMALL_TMPFS}");
        if tolerant {
            self.push(Op::HideDir {
                target: c(&at),
                data: cs(&data),
            });
        } else {
            self.tmpfs(&at, HIDE_FLAGS, &data);
        }
    }
}

/// What [`Builder::clone_hosts`] planned: the slot of each host entry, the slots the
/// parent fills (idmapped clones), the device nodes' slots.
type Clones = (HashMap<PathBuf, usize>, Vec<(usize, PathBuf)>, Vec<usize>);

/// `mode=..,size=..` for a writable private tmpfs.
fn private_data(mode: u32, size: Option<u64>) -> String {
    match size {
        Some(n) => format!("mode={mode:o},size={n}"),
        None => format!("mode={mode:o}"),
    }
}

impl Builder {
    /// Clone every host tree (and device node) before anything is covered.
    fn clone_hosts(&mut self, wanted: &[Wanted], devices: &[PathBuf]) -> Clones {
        let mut slots = HashMap::new();
        let mut premade = Vec::new();
        for w in wanted {
            let slot = match &w.source {
                Source::ReadOnly => {
                    let attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
                    self.clone_tree(&w.path, w.is_dir, attrs)
                }
                Source::Writable { premade: false } => {
                    self.clone_tree(&w.path, true, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
                }
                Source::Writable { premade: true } => {
                    let slot = self.slot();
                    premade.push((slot, w.path.clone()));
                    slot
                }
                _ => continue,
            };
            slots.insert(w.path.clone(), slot);
        }
        let devs = devices
            .iter()
            .map(|d| self.clone_tree(d, false, 0))
            .collect();
        (slots, premade, devs)
    }

    /// Every entry at its path in the staging root, shallowest first.
    fn assemble(
        &mut self,
        wanted: &[Wanted],
        slots: &HashMap<PathBuf, usize>,
        size: Option<u64>,
    ) -> Vec<ViewEntry> {
        let mut order: Vec<&Wanted> = wanted.iter().collect();
        order.sort_by_key(|w| depth(&w.path));
        let mut view = Vec::new();
        for w in order {
            let access = match &w.source {
                Source::Link(target) => {
                    self.parents(&w.path);
                    let link = self.at(&w.path);
                    self.push(Op::Symlink {
                        target: c(target),
                        link: c(&link),
                    });
                    ViewAccess::Link
                }
                Source::Private { mode } => {
                    self.mount_point(&w.path, true);
                    let at = self.at(&w.path);
                    let data = private_data(*mode, size);
                    self.tmpfs(&at, libc::MS_NOSUID | libc::MS_NODEV, &data);
                    ViewAccess::Private
                }
                Source::ReadOnly | Source::Writable { .. } => {
                    let Some(&slot) = slots.get(&w.path) else {
                        continue;
                    };
                    self.mount_point(&w.path, w.is_dir);
                    let target = self.at(&w.path);
                    self.push(Op::Place {
                        slot,
                        target: c(&target),
                    });
                    if w.source == Source::ReadOnly {
                        ViewAccess::ReadOnly
                    } else {
                        ViewAccess::Writable
                    }
                }
            };
            view.push(ViewEntry {
                path: w.path.clone(),
                access,
            });
        }
        view
    }

    /// A minimal /dev: the cloned device nodes, the fd links, pts, shm, and the mask
    /// source.
    fn minimal_dev(&mut self, devices: &[PathBuf], slots: &[usize], size: Option<u64>) {
        let dev = self.at(Path::new("/dev"));
        self.push(Op::Mkdir { path: c(&dev) });
        self.tmpfs(
            &dev,
            libc::MS_NOSUID | libc::MS_NOEXEC,
            &format!("mode=0755,{SMALL_TMPFS}"),
        );
        for (d, slot) in devices.iter().zip(slots) {
            let at = self.at(d);
            self.push(Op::Touch {
                path: c(&at),
                mode: 0o666,
            });
            self.push(Op::Place {
                slot: *slot,
                target: c(&at),
            });
        }
        for (target, link) in [
            ("/proc/self/fd", "/dev/fd"),
            ("/proc/self/fd/0", "/dev/stdin"),
            ("/proc/self/fd/1", "/dev/stdout"),
            ("/proc/self/fd/2", "/dev/stderr"),
            ("pts/ptmx", "/dev/ptmx"),
        ] {
            let link = self.at(Path::new(link));
            self.push(Op::Symlink {
                target: cs(target),
                link: c(&link),
            });
        }
        let (pts, shm) = (
            self.at(Path::new("/dev/pts")),
            self.at(Path::new("/dev/shm")),
        );
        self.push(Op::Mkdir { path: c(&pts) });
        self.push(Op::Mkdir { path: c(&shm) });
        self.optional(Op::DevPts { target: c(&pts) });
        let data = private_data(0o1777, size);
        self.tmpfs(&shm, libc::MS_NOSUID | libc::MS_NODEV, &data);
        let source = self.at(Path::new(MASK_SOURCE));
        self.push(Op::Touch {
            path: c(&source),
            mode: 0,
        });
    }

    /// A fresh /proc for the pid namespace, its kernel knobs read-only.
    fn fresh_proc(&mut self, knobs: &[PathBuf]) {
        let proc = self.at(Path::new("/proc"));
        self.push(Op::Mkdir { path: c(&proc) });
        self.push(Op::Proc { target: c(&proc) });
        for p in knobs {
            let at = self.at(p);
            self.push(Op::BindReadOnly { path: c(&at) });
        }
    }

    /// Read-only workspace internals, host secrets and the policy's masks; each only
    /// where the view shows host content there.
    fn cover(&mut self, inputs: &MountInputs) -> (Vec<PathBuf>, Vec<PathBuf>, Vec<PathBuf>) {
        let mut protected = Vec::new();
        for p in &inputs.protect {
            if shown(p, &inputs.wanted) {
                let at = self.at(p);
                self.push(Op::BindReadOnly { path: c(&at) });
                protected.push(p.clone());
            }
        }
        let mut covered = [Vec::new(), Vec::new()];
        for (i, list) in [&inputs.excluded, &inputs.masked].into_iter().enumerate() {
            for m in list {
                if !shown(m, &inputs.wanted) {
                    continue;
                }
                // Host files are excluded tolerantly; the policy's masks are strict.
                if inputs.dirs.contains(m) {
                    self.mask_dir(m, i == 0);
                } else {
                    self.mask_file(m, i == 0);
                }
                covered[i].push(m.clone());
            }
        }
        let [excluded, masked] = covered;
        (protected, excluded, masked)
    }
}

impl MountPlan {
    /// Plan the view for `inputs`, in the order the module docs give.
    pub(crate) fn build(inputs: &MountInputs) -> MountPlan {
        let mut b = Builder {
            steps: Vec::new(),
            slots: 0,
            stage: inputs.stage.clone(),
            made: HashSet::new(),
        };
        let wanted: Vec<Wanted> = inputs
            .wanted
            .iter()
            .filter(|w| !redundant(w, &inputs.wanted))
            .cloned()
            .collect();
        b.push(Op::MakePrivate);
        let (slots, premade, dev_slots) = b.clone_hosts(&wanted, &inputs.devices);
        let clones_end = b.steps.len();
        let stage = inputs.stage.clone();
        b.tmpfs(
            &stage,
            libc::MS_NOSUID | libc::MS_NODEV,
            &format!("mode=0755,{SMALL_TMPFS}"),
        );
        let view = b.assemble(&wanted, &slots, inputs.tmpfs_size);
        b.minimal_dev(&inputs.devices, &dev_slots, inputs.tmpfs_size);
        if inputs.fresh_proc {
            b.fresh_proc(&inputs.proc_read_only);
        }
        let (protected, excluded, masked) = b.cover(inputs);
        let source = b.at(Path::new(MASK_SOURCE));
        b.push(Op::Unlink { path: c(&source) });
        let dev = b.at(Path::new("/dev"));
        b.push(Op::ReadOnly { path: c(&dev) });
        b.push(Op::ReadOnly { path: c(&stage) });
        b.push(Op::Pivot { stage: c(&stage) });
        MountPlan {
            slots: b.slots,
            steps: b.steps,
            clones_end,
            report: MountReport {
                fresh_root: true,
                fresh_proc: inputs.fresh_proc,
                minimal_dev: true,
                idmapped: !premade.is_empty(),
                view,
                excluded,
                protected,
                masked,
            },
            premade,
        }
    }

    /// A readable description of step `i`, for error messages.
    pub(crate) fn describe(&self, i: usize) -> String {
        self.steps
            .get(i)
            .map_or_else(|| format!("step {i}"), |s| format!("{:?}", s.op))
    }

    /// Apply the cloning steps (`clones` true) or the rest. Runs in the child: raw
    /// system calls only, no allocation.
    pub(crate) fn apply(&self, slots: &mut [RawFd], clones: bool) -> Result<(), (usize, Errno)> {
        let range = if clones {
            0..self.clones_end
        } else {
            self.clones_end..self.steps.len()
        };
        for (i, step) in self
            .steps
            .iter()
            .enumerate()
            .take(range.end)
            .skip(range.start)
        {
            match apply_op(&step.op, slots) {
                Err(e) if !step.optional => return Err((i, e)),
                _ => {}
            }
        }
        Ok(())
    }
}

fn apply_op(op: &Op, slots: &mut [RawFd]) -> Result<(), Errno> {
    match op {
        Op::MakePrivate => sys::mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None),
        Op::Clone {
            path,
            slot,
            recursive,
            attrs,
        } => {
            let rec = if *recursive { AT_RECURSIVE } else { 0 };
            let fd = sys::open_tree(path, OPEN_TREE_CLONE | libc::O_CLOEXEC as c_uint | rec)?;
            slots[*slot] = fd;
            if *attrs != 0 {
                sys::mount_setattr(fd, c"", AT_EMPTY_PATH | rec, *attrs)?;
            }
            Ok(())
        }
        Op::Tmpfs {
            target,
            flags,
            data,
        } => sys::mount(Some(c"tmpfs"), target, Some(c"tmpfs"), *flags, Some(data)),
        Op::HideDir { target, data } => {
            match sys::mount(
                Some(c"tmpfs"),
                target,
                Some(c"tmpfs"),
                HIDE_FLAGS,
                Some(data),
            ) {
                Err(libc::ENOENT) => Ok(()),
                r => r,
            }
        }
        Op::Mkdir { path } => sys::mkdir_exist_ok(path, 0o755),
        Op::Touch { path, mode } => sys::touch(path, *mode),
        Op::Place { slot, target } => {
            let fd = slots[*slot];
            let r = sys::move_mount_fd(fd, target);
            sys::close(fd);
            r
        }
        Op::Mask { slot, target } => {
            let fd = slots[*slot];
            let r = match sys::move_mount_fd(fd, target) {
                Err(libc::ENOENT) => Ok(()),
                other => other,
            };
            sys::close(fd);
            r
        }
        Op::BindReadOnly { path } => {
            let fd = sys::open_tree(
                path,
                OPEN_TREE_CLONE | libc::O_CLOEXEC as c_uint | AT_RECURSIVE,
            )?;
            let attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
            let r = sys::mount_setattr(fd, c"", AT_EMPTY_PATH | AT_RECURSIVE, attrs)
                .and_then(|()| sys::move_mount_fd(fd, path));
            sys::close(fd);
            r
        }
        Op::Symlink { target, link } => match sys::symlink(target, link) {
            Err(libc::EEXIST) => Ok(()),
            r => r,
        },
        Op::Proc { target } => sys::mount(
            Some(c"proc"),
            target,
            Some(c"proc"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
        ),
        Op::DevPts { target } => sys::mount(
            Some(c"devpts"),
            target,
            Some(c"devpts"),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            Some(c"newinstance,ptmxmode=0666,mode=0620"),
        ),
        Op::Unlink { path } => sys::unlink(path),
        Op::ReadOnly { path } => sys::mount_setattr(libc::AT_FDCWD, path, 0, MOUNT_ATTR_RDONLY),
        Op::Pivot { stage } => sys::chdir(stage)
            .and_then(|()| sys::pivot_root(c".", c"."))
            .and_then(|()| sys::umount_detach(c"."))
            .and_then(|()| sys::chdir(c"/")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(path: &str, source: Source, is_dir: bool) -> Wanted {
        Wanted {
            path: PathBuf::from(path),
            source,
            is_dir,
        }
    }

    fn ops(plan: &MountPlan) -> Vec<String> {
        plan.steps.iter().map(|s| format!("{:?}", s.op)).collect()
    }

    #[test]
    fn covered_read_only_entries_are_not_bound_twice() {
        let wanted = vec![
            w("/usr", Source::ReadOnly, true),
            w("/usr/local/cargo/bin", Source::ReadOnly, true),
            w("/root", Source::Private { mode: 0o700 }, true),
            w("/root/.cargo/bin", Source::ReadOnly, true),
        ];
        assert!(redundant(&wanted[1], &wanted));
        assert!(!redundant(&wanted[3], &wanted));
        assert!(!redundant(&wanted[0], &wanted));
    }

    #[test]
    fn a_workspace_in_tmp_is_placed_after_the_private_tmp() {
        let inputs = MountInputs {
            stage: PathBuf::from("/mnt"),
            wanted: vec![
                w("/tmp/w", Source::Writable { premade: false }, true),
                w("/tmp", Source::Private { mode: 0o1777 }, true),
                w("/usr", Source::ReadOnly, true),
                w("/bin", Source::Link("usr/bin".into()), false),
            ],
            masked: vec![PathBuf::from("/tmp/w/.env"), PathBuf::from("/tmp/x")],
            ..MountInputs::default()
        };
        let plan = MountPlan::build(&inputs);
        let ops = ops(&plan);
        let find = |needle: &str| {
            ops.iter()
                .position(|o| o.contains(needle))
                .unwrap_or_else(|| panic!("{needle} in {ops:#?}"))
        };
        let tmp = find("Tmpfs { target: \"/mnt/tmp\"");
        let place = find("Place { slot: 0, target: \"/mnt/tmp/w\"");
        assert!(tmp < place, "{ops:#?}");
        assert!(find("Pivot") == ops.len() - 1);
        // The mask in the workspace applies; one under the private /tmp has nothing to hide.
        assert_eq!(plan.report.masked, vec![PathBuf::from("/tmp/w/.env")]);
        let access: Vec<(&str, ViewAccess)> = plan
            .report
            .view
            .iter()
            .map(|e| (e.path.to_str().unwrap(), e.access))
            .collect();
        assert_eq!(
            access,
            [
                ("/tmp", ViewAccess::Private),
                ("/usr", ViewAccess::ReadOnly),
                ("/bin", ViewAccess::Link),
                ("/tmp/w", ViewAccess::Writable),
            ]
        );
    }

    #[test]
    fn premade_slots_have_no_clone_step() {
        let inputs = MountInputs {
            stage: PathBuf::from("/mnt"),
            wanted: vec![w("/srv/w", Source::Writable { premade: true }, true)],
            ..MountInputs::default()
        };
        let plan = MountPlan::build(&inputs);
        assert_eq!(plan.premade, vec![(0, PathBuf::from("/srv/w"))]);
        assert!(plan.report.idmapped);
        assert!(
            !ops(&plan)
                .iter()
                .any(|o| o.contains("Clone { path: \"/srv/w\""))
        );
    }
}
