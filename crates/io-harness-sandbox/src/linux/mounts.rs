//! The filesystem view of the native backend, planned in the parent and applied by
//! the child inside its new mount namespace.
//!
//! The view is built in place rather than in a fresh root: the trees that must stay
//! reachable (the workspace, writable; toolchains, read-only; device nodes) are
//! cloned first with `open_tree`, then the whole host tree is made read-only,
//! nosuid and nodev with one recursive `mount_setattr`, then empty tmpfs mounts
//! *hide* `/tmp`, `/var/tmp`, `/run`, `$HOME`, the store and the audit directories
//! (a read-only mount would not stop `connect()` to a host unix socket), and finally
//! the clones are moved back to their paths. A fresh `/proc`, a minimal `/dev`,
//! read-only `.git`/`.io-harness` and the masks finish it.
//!
//! The parent decides every step; the child only walks [`MountPlan::apply`].

use std::collections::HashSet;
use std::ffi::CString;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use libc::{c_uint, c_ulong};

use super::sys::{self, Errno, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};
use crate::MountReport;

const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const OPEN_TREE_CLONE: c_uint = 0x1;
const AT_EMPTY_PATH: c_uint = 0x1000;
const AT_RECURSIVE: c_uint = 0x8000;

/// The empty, mode-000 file that masks and hidden files are bound to. Created in the
/// sandbox's private `/dev` and unlinked once every bind of it is in place.
const MASK_SOURCE: &str = "/dev/.io-harness-mask";

/// Device nodes bound from the host into the minimal `/dev`.
pub(crate) const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// `/proc` entries that are made read-only: writes there reach the host kernel.
pub(crate) const PROC_READ_ONLY: [&str; 4] =
    ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"];

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
    RootReadOnly,
    Tmpfs {
        target: CString,
        flags: c_ulong,
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
    /// The mask in `slot` over `target`, a file to hide. A file that vanished
    /// between the plan and the mount (a host socket whose server went away) needs no
    /// mask, so `ENOENT` is no failure; a file created there later is as visible as
    /// a socket bound after the spawn.
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
    Proc,
    DevPts,
    Unlink {
        path: CString,
    },
    ReadOnly {
        path: CString,
    },
}

#[derive(Debug)]
struct Step {
    op: Op,
    /// Failure is tolerated (conveniences such as `/dev/pts`).
    optional: bool,
}

/// What the parent knows when planning. Every path is canonical and exists; the
/// plan itself touches no filesystem (the parent caches the host facts).
#[derive(Debug, Default)]
pub(crate) struct MountInputs {
    /// Which of the paths below are directories.
    pub dirs: HashSet<PathBuf>,
    /// Host device nodes to bind into the minimal `/dev` (`/dev/null`...).
    pub devices: Vec<PathBuf>,
    /// `/proc` entries to make read-only (those that exist).
    pub proc_read_only: Vec<PathBuf>,
    /// The workspace (canonical).
    pub workdir: PathBuf,
    /// Extra writable directories outside it (canonical, existing).
    pub writable: Vec<PathBuf>,
    /// The host `$HOME` (canonical), hidden with mode 0700.
    pub home: Option<PathBuf>,
    /// Directories and files to hide (canonical, existing).
    pub hide: Vec<PathBuf>,
    /// Paths brought back read-only where a hide covers them (canonical, existing).
    pub read_only: Vec<PathBuf>,
    /// Paths in the workspace made read-only (`.git`, `.io-harness`).
    pub protect: Vec<PathBuf>,
    /// Paths made unreadable (canonical, existing).
    pub masked: Vec<PathBuf>,
    /// Mount a fresh `/proc` (needs a pid namespace of our own).
    pub fresh_proc: bool,
}

/// The steps, the number of detached-tree slots they use, and what they achieve.
#[derive(Debug)]
pub(crate) struct MountPlan {
    steps: Vec<Step>,
    /// Number of fd slots the child needs.
    pub slots: usize,
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

/// Whether `p` is visible given the hides and placements: the deepest covering
/// entry decides, and a placement at the same depth as a hide wins (it comes later).
fn visible(p: &Path, hides: &[PathBuf], places: &[PathBuf]) -> bool {
    let deepest = |set: &[PathBuf]| {
        set.iter()
            .filter(|h| p.starts_with(h))
            .map(|h| depth(h))
            .max()
    };
    match (deepest(hides), deepest(places)) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(h), Some(t)) => t >= h,
    }
}

struct Builder {
    steps: Vec<Step>,
    slots: usize,
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
    fn clone_tree(&mut self, path: &Path, recursive: bool, attrs: u64) -> usize {
        let slot = self.slots;
        self.slots += 1;
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
    /// Hide `path`: an empty tmpfs over a directory, the mask file over anything else.
    fn hide(&mut self, path: &Path, is_dir: bool, home: Option<&Path>) {
        if is_dir {
            let mode = if Some(path) == home {
                "mode=0700"
            } else if path == Path::new("/tmp") || path == Path::new("/var/tmp") {
                "mode=1777"
            } else {
                "mode=0755"
            };
            self.tmpfs(path, libc::MS_NOSUID | libc::MS_NODEV, mode);
        } else {
            // A host file (a socket, a key) that is gone by mount time needs no mask.
            let slot = self.mask_slot();
            self.push(Op::Mask {
                slot,
                target: c(path),
            });
        }
    }

    /// A read-only clone of the mask source, ready to be moved over a file.
    fn mask_slot(&mut self) -> usize {
        let attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
        self.clone_tree(Path::new(MASK_SOURCE), false, attrs)
    }

    /// Masks a file the policy denies: it must exist, or the layer fails.
    fn mask_file(&mut self, path: &Path) {
        let slot = self.mask_slot();
        self.push(Op::Place {
            slot,
            target: c(path),
        });
    }
}

/// What phase 1 cloned: the trees to move back (with their slots), the read-only
/// ones among them for the report, and the device nodes.
struct Cloned<'a> {
    places: Vec<(PathBuf, usize)>,
    brought_back: Vec<PathBuf>,
    devices: Vec<(&'a Path, usize)>,
}

/// What phases 5 and 6 did, for the report.
struct Covered {
    hidden: Vec<PathBuf>,
    protected: Vec<PathBuf>,
    masked: Vec<PathBuf>,
}

impl Builder {
    /// Phase 1: clone what must come back, before anything is covered.
    fn clone_places<'a>(&mut self, inputs: &'a MountInputs) -> Cloned<'a> {
        let mut places: Vec<(PathBuf, usize)> = Vec::new();
        let slot = self.clone_tree(&inputs.workdir, true, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        places.push((inputs.workdir.clone(), slot));
        for w in &inputs.writable {
            let slot = self.clone_tree(w, true, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
            places.push((w.clone(), slot));
        }
        let mut brought_back = Vec::new();
        for ro in &inputs.read_only {
            if visible(ro, &inputs.hide, &[]) || places.iter().any(|(p, _)| p == ro) {
                continue;
            }
            let attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
            let slot = self.clone_tree(ro, true, attrs);
            places.push((ro.clone(), slot));
            brought_back.push(ro.clone());
        }
        let devices: Vec<(&Path, usize)> = inputs
            .devices
            .iter()
            .map(|d| (d.as_path(), self.clone_tree(d, false, 0)))
            .collect();
        Cloned {
            places,
            brought_back,
            devices,
        }
    }

    /// Phase 3: a minimal /dev: the cloned device nodes, the fd links, pts, shm,
    /// and the mask source.
    fn minimal_dev(&mut self, devices: &[(&Path, usize)]) {
        self.tmpfs(
            Path::new("/dev"),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            "mode=0755",
        );
        for (dev, slot) in devices {
            self.push(Op::Touch {
                path: c(dev),
                mode: 0o666,
            });
            self.push(Op::Place {
                slot: *slot,
                target: c(dev),
            });
        }
        for (target, link) in [
            ("/proc/self/fd", "/dev/fd"),
            ("/proc/self/fd/0", "/dev/stdin"),
            ("/proc/self/fd/1", "/dev/stdout"),
            ("/proc/self/fd/2", "/dev/stderr"),
        ] {
            self.push(Op::Symlink {
                target: cs(target),
                link: cs(link),
            });
        }
        self.push(Op::Mkdir {
            path: cs("/dev/pts"),
        });
        self.push(Op::Mkdir {
            path: cs("/dev/shm"),
        });
        self.optional(Op::DevPts);
        self.optional(Op::Symlink {
            target: cs("pts/ptmx"),
            link: cs("/dev/ptmx"),
        });
        self.tmpfs(
            Path::new("/dev/shm"),
            libc::MS_NOSUID | libc::MS_NODEV,
            "mode=1777",
        );
        self.push(Op::Touch {
            path: cs(MASK_SOURCE),
            mode: 0,
        });
    }

    /// Phase 5: hide, place, hide what lies inside placed trees. Returns the hides
    /// applied.
    fn hide_and_place(
        &mut self,
        inputs: &MountInputs,
        mut places: Vec<(PathBuf, usize)>,
        place_paths: &[PathBuf],
    ) -> Vec<PathBuf> {
        let home = inputs.home.as_deref();
        let mut hides: Vec<PathBuf> = inputs.hide.clone();
        hides.sort_by_key(|h| depth(h));
        hides.dedup();
        let (late, early): (Vec<PathBuf>, Vec<PathBuf>) = hides
            .into_iter()
            .partition(|h| place_paths.iter().any(|t| h.starts_with(t) && h != t));
        let mut applied: Vec<PathBuf> = Vec::new();
        let is_dir = |p: &Path| inputs.dirs.contains(p);
        for h in &early {
            if visible(h, &applied, &[]) {
                self.hide(h, is_dir(h), home);
                applied.push(h.clone());
            }
        }
        places.sort_by_key(|(p, _)| depth(p));
        for (target, slot) in &places {
            self.place(target, *slot, is_dir(target), &applied);
        }
        for h in &late {
            if visible(h, &applied, place_paths) {
                self.hide(h, is_dir(h), home);
                applied.push(h.clone());
            }
        }
        applied
    }

    /// Moves the clone in `slot` back to `target`, first making its mount point where
    /// a hide covers it.
    fn place(&mut self, target: &Path, slot: usize, is_dir: bool, applied: &[PathBuf]) {
        // Mount points only need creating inside a hiding tmpfs: below the
        // deepest hide that covers the target (if any).
        let cover = applied
            .iter()
            .filter(|h| target.starts_with(h))
            .map(|h| depth(h))
            .max();
        if let Some(cover) = cover {
            let mut ancestors: Vec<&Path> = target
                .ancestors()
                .skip(1)
                .filter(|a| depth(a) > cover)
                .collect();
            ancestors.reverse();
            for a in ancestors {
                self.push(Op::Mkdir { path: c(a) });
            }
        }
        match (cover, is_dir) {
            (Some(_), true) => self.push(Op::Mkdir { path: c(target) }),
            (Some(_), false) => self.push(Op::Touch {
                path: c(target),
                mode: 0o600,
            }),
            (None, _) => {}
        }
        self.push(Op::Place {
            slot,
            target: c(target),
        });
    }

    /// Phase 6: read-only workspace internals, then the masks; `/dev` is sealed
    /// read-only.
    fn protect_and_mask(
        &mut self,
        inputs: &MountInputs,
        hidden: Vec<PathBuf>,
        place_paths: &[PathBuf],
    ) -> Covered {
        let mut protected = Vec::new();
        for p in &inputs.protect {
            if visible(p, &hidden, place_paths) {
                self.push(Op::BindReadOnly { path: c(p) });
                protected.push(p.clone());
            }
        }
        let mut masked = Vec::new();
        for m in &inputs.masked {
            if !visible(m, &hidden, place_paths) {
                continue;
            }
            if inputs.dirs.contains(m) {
                let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
                self.tmpfs(m, flags, "mode=000");
            } else {
                self.mask_file(m);
            }
            masked.push(m.clone());
        }
        self.push(Op::Unlink {
            path: cs(MASK_SOURCE),
        });
        self.push(Op::ReadOnly { path: cs("/dev") });
        Covered {
            hidden,
            protected,
            masked,
        }
    }
}

impl MountPlan {
    /// Plan the view for `inputs`, in the order the module docs give.
    pub(crate) fn build(inputs: &MountInputs) -> MountPlan {
        let mut b = Builder {
            steps: Vec::new(),
            slots: 0,
        };
        b.push(Op::MakePrivate);
        let cloned = b.clone_places(inputs);
        // Phase 2: the host tree becomes read-only, nosuid, nodev.
        b.push(Op::RootReadOnly);
        b.minimal_dev(&cloned.devices);
        // Phase 4: a fresh /proc for the pid namespace, with the kernel knobs read-only.
        if inputs.fresh_proc {
            b.push(Op::Proc);
        }
        for p in &inputs.proc_read_only {
            b.push(Op::BindReadOnly { path: c(p) });
        }
        let place_paths: Vec<PathBuf> = cloned.places.iter().map(|(p, _)| p.clone()).collect();
        let hidden = b.hide_and_place(inputs, cloned.places, &place_paths);
        let covered = b.protect_and_mask(inputs, hidden, &place_paths);
        MountPlan {
            slots: b.slots,
            steps: b.steps,
            report: MountReport {
                root_read_only: true,
                fresh_proc: inputs.fresh_proc,
                minimal_dev: true,
                hidden: covered.hidden,
                read_only: cloned.brought_back,
                protected: covered.protected,
                masked: covered.masked,
            },
        }
    }

    /// A readable description of step `i`, for error messages.
    pub(crate) fn describe(&self, i: usize) -> String {
        self.steps
            .get(i)
            .map_or_else(|| format!("step {i}"), |s| format!("{:?}", s.op))
    }

    /// Apply every step. Runs in the child: raw system calls only, no allocation.
    pub(crate) fn apply(&self, slots: &mut [RawFd]) -> Result<(), (usize, Errno)> {
        for (i, step) in self.steps.iter().enumerate() {
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
        Op::RootReadOnly => sys::mount_setattr(
            libc::AT_FDCWD,
            c"/",
            AT_RECURSIVE,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        ),
        Op::Tmpfs {
            target,
            flags,
            data,
        } => sys::mount(Some(c"tmpfs"), target, Some(c"tmpfs"), *flags, Some(data)),
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
        Op::Symlink { target, link } => sys::symlink(target, link),
        Op::Proc => sys::mount(
            Some(c"proc"),
            c"/proc",
            Some(c"proc"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
        ),
        Op::DevPts => sys::mount(
            Some(c"devpts"),
            c"/dev/pts",
            Some(c"devpts"),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            Some(c"newinstance,ptmxmode=0666,mode=0620"),
        ),
        Op::Unlink { path } => sys::unlink(path),
        Op::ReadOnly { path } => sys::mount_setattr(libc::AT_FDCWD, path, 0, MOUNT_ATTR_RDONLY),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_prefers_the_deepest_cover() {
        let hides = vec![PathBuf::from("/tmp"), PathBuf::from("/tmp/w/secret")];
        let places = vec![PathBuf::from("/tmp/w")];
        assert!(visible(Path::new("/usr/bin"), &hides, &places));
        assert!(!visible(Path::new("/tmp/x"), &hides, &places));
        assert!(visible(Path::new("/tmp/w/src"), &hides, &places));
        assert!(!visible(Path::new("/tmp/w/secret/key"), &hides, &places));
        assert!(visible(Path::new("/tmp/w"), &hides, &places));
    }

    /// Regression (seen in CI): a host socket found when the plan was made and gone
    /// by mount time (its test server closed) failed the whole sandbox with `ENOENT`.
    /// Host files are hidden by a tolerant `Mask`; the policy's masks stay strict.
    #[test]
    fn a_hidden_host_file_is_a_tolerant_mask_and_a_policy_mask_is_strict() {
        let inputs = MountInputs {
            workdir: PathBuf::from("/srv/w"),
            hide: vec![PathBuf::from("/var/lib/x/gone.sock")],
            masked: vec![PathBuf::from("/srv/w/.env")],
            dirs: ["/srv/w"].iter().map(PathBuf::from).collect(),
            ..MountInputs::default()
        };
        let plan = MountPlan::build(&inputs);
        let ops: Vec<String> = plan.steps.iter().map(|s| format!("{:?}", s.op)).collect();
        assert!(
            ops.iter()
                .any(|o| o.starts_with("Mask {") && o.contains("gone.sock")),
            "{ops:#?}"
        );
        assert!(
            ops.iter()
                .any(|o| o.starts_with("Place {") && o.contains("/srv/w/.env")),
            "{ops:#?}"
        );
    }

    #[test]
    fn workdir_under_a_hidden_dir_is_placed_after_the_hide() {
        let inputs = MountInputs {
            workdir: PathBuf::from("/tmp/w"),
            hide: vec![PathBuf::from("/tmp"), PathBuf::from("/tmp/w/inner")],
            dirs: ["/tmp", "/tmp/w", "/tmp/w/inner"]
                .iter()
                .map(PathBuf::from)
                .collect(),
            ..MountInputs::default()
        };
        let plan = MountPlan::build(&inputs);
        let ops: Vec<String> = plan.steps.iter().map(|s| format!("{:?}", s.op)).collect();
        let find = |needle: &str| ops.iter().position(|o| o.contains(needle)).unwrap();
        let hide = find("Tmpfs { target: \"/tmp\"");
        let mkdir = find("Mkdir { path: \"/tmp/w\" }");
        let place = find("Place { slot: 0");
        let late = find("\"/tmp/w/inner\"");
        assert!(hide < mkdir && mkdir < place && place < late, "{ops:#?}");
        assert!(
            !ops.iter().any(|o| o == "Mkdir { path: \"/tmp\" }"),
            "{ops:#?}"
        );
        assert_eq!(
            plan.report.hidden,
            vec![PathBuf::from("/tmp"), PathBuf::from("/tmp/w/inner")]
        );
    }
}
