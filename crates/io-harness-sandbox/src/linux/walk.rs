//! Counting the disk space a directory tree holds, for the disk watcher, without
//! ever following a link the sandbox may have planted.
//!
//! Every directory is opened relative to its parent's fd with `O_NOFOLLOW`, and
//! every entry is `fstatat`ed with `AT_SYMLINK_NOFOLLOW`: a directory swapped for a
//! symlink mid-walk is not entered, so the walk cannot be sent across the host (to
//! cost time, or to count the host's files against the command). Allocated blocks
//! are counted (a sparse file costs what it really holds), a file with several
//! links once, and nothing on another filesystem. What cannot be read — a directory
//! made unreadable, nesting deeper than the fds a walk may hold, more entries than a
//! walk may visit — makes the tally *opaque*: the caller then cannot confirm growth
//! from the tree and charges the filesystem's growth instead.

use std::collections::HashSet;
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Deepest nesting walked (one fd per level).
const MAX_DEPTH: usize = 128;
/// Most entries visited by one walk.
const MAX_ENTRIES: u64 = 2_000_000;

/// A change-time threshold, as `(seconds, nanoseconds)` since the epoch.
pub(crate) type Stamp = (i64, i64);

/// What a walk found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Allocated bytes of every entry counted.
    pub bytes: u64,
    /// Part of the tree could not be counted.
    pub opaque: bool,
}

struct Walk {
    dev: u64,
    /// Entries changed at or after this stamp count as zero (a baseline taken while
    /// the command may already be writing).
    since: Option<Stamp>,
    linked: HashSet<(u64, u64)>,
    entries: u64,
    tally: Tally,
}

/// Count the tree under `root` (not following a symlink at `root` either).
/// With `since`, entries whose status changed at or after it count as zero.
pub(crate) fn tally(root: &Path, since: Option<Stamp>) -> Tally {
    let Ok(path) = CString::new(root.as_os_str().as_bytes()) else {
        return Tally {
            bytes: 0,
            opaque: true,
        };
    };
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: path is a valid C string.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        return Tally {
            bytes: 0,
            opaque: true,
        };
    }
    // SAFETY: an all-zero stat is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open and st valid for writes.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        // SAFETY: closing the fd opened above.
        unsafe { libc::close(fd) };
        return Tally {
            bytes: 0,
            opaque: true,
        };
    }
    let mut w = Walk {
        dev: st.st_dev,
        since,
        linked: HashSet::new(),
        entries: 0,
        tally: Tally::default(),
    };
    w.count(&st);
    w.dir(fd, 0);
    w.tally
}

impl Walk {
    fn count(&mut self, st: &libc::stat) {
        let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        if !is_dir && st.st_nlink > 1 && !self.linked.insert((st.st_dev, st.st_ino)) {
            return;
        }
        if let Some(since) = self.since
            && (st.st_ctime, st.st_ctime_nsec) >= since
        {
            return;
        }
        self.tally.bytes = self
            .tally
            .bytes
            .saturating_add((st.st_blocks.max(0) as u64).saturating_mul(512));
    }

    /// Walk the directory open at `fd`, which this call owns and closes.
    fn dir(&mut self, fd: libc::c_int, depth: usize) {
        // SAFETY: fd is an open directory fd; on success the DIR owns it.
        let dir = unsafe { libc::fdopendir(fd) };
        if dir.is_null() {
            // SAFETY: fdopendir failed, so fd is still ours to close.
            unsafe { libc::close(fd) };
            self.tally.opaque = true;
            return;
        }
        loop {
            // SAFETY: dir is a valid DIR stream until closedir below.
            let ent = unsafe { libc::readdir64(dir) };
            if ent.is_null() {
                break;
            }
            // SAFETY: readdir64 returned a valid entry whose d_name is NUL-terminated.
            let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            self.entries += 1;
            if self.entries > MAX_ENTRIES {
                self.tally.opaque = true;
                break;
            }
            // SAFETY: dir is valid; dirfd has no other precondition.
            let dfd = unsafe { libc::dirfd(dir) };
            // SAFETY: an all-zero stat is a valid value.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: dfd is open, name a valid C string, st valid for writes.
            let r =
                unsafe { libc::fstatat(dfd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
            if r != 0 || st.st_dev != self.dev {
                // Gone since readdir, or another filesystem: not ours to count.
                continue;
            }
            self.count(&st);
            if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
                continue;
            }
            if depth + 1 >= MAX_DEPTH {
                self.tally.opaque = true;
                continue;
            }
            let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            // SAFETY: dfd is open and name a valid C string.
            let sub = unsafe { libc::openat(dfd, name.as_ptr(), flags) };
            if sub < 0 {
                let e = std::io::Error::last_os_error().raw_os_error();
                // Removed or replaced (by a symlink) since readdir: nothing to count.
                if !matches!(
                    e,
                    Some(libc::ENOENT) | Some(libc::ELOOP) | Some(libc::ENOTDIR)
                ) {
                    self.tally.opaque = true;
                }
                continue;
            }
            self.dir(sub, depth + 1);
        }
        // SAFETY: dir came from fdopendir and is closed once.
        unsafe { libc::closedir(dir) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_blocks_once_per_inode_and_never_follows_symlinks() {
        let d = tempfile::tempdir().unwrap();
        let data = vec![1u8; 1 << 20];
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/a"), &data).unwrap();
        std::fs::hard_link(d.path().join("sub/a"), d.path().join("b")).unwrap();
        std::os::unix::fs::symlink("/usr", d.path().join("link")).unwrap();
        let t = tally(d.path(), None);
        assert!(!t.opaque);
        assert!(t.bytes >= 1 << 20 && t.bytes < 3 << 20, "{t:?}");
        // Everything changed after a stamp in the past counts as zero.
        let t = tally(d.path(), Some((0, 0)));
        assert_eq!(t.bytes, 0);
    }
}
