//! The memory the sandbox holds in its own tmpfs mounts (`/tmp`, `/dev/shm`,
//! `$HOME`...), for the memory monitor: a file written there is memory no process's
//! resident set shows, so without a memory cgroup it is added to the tree's RSS.
//!
//! The mounts are found from the outside, once: the sandbox's
//! `/proc/<pid>/mountinfo` lists every mount of its namespace, and a tmpfs whose
//! device number the harness's own namespace does not have is one the sandbox
//! created (the host's tmpfs mounts it merely covers keep their device). Each is
//! opened through `/proc/<pid>/root/<mount point>` — this needs ptrace-read access,
//! which an unprivileged harness has to the executed command (it is in a user
//! namespace the harness owns) but not to the non-dumpable init, so the tree's
//! processes are tried in turn. The open directories are then `fstatvfs`ed on every
//! tick: one system call per mount. The sandbox cannot mount or unmount (seccomp),
//! so the set found once stays right.
//!
//! Anonymous shared memory that is in no mount is closed off elsewhere:
//! `memfd_create` and SysV `shmget` are refused by the seccomp filter, because a
//! memfd can live on only as an fd in flight in a unix socket, where no walk of the
//! sandbox's fds would find it.

use std::collections::HashSet;
use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

use super::monitor;

/// The sandbox's private tmpfs mounts, opened once found.
#[derive(Debug)]
pub(crate) struct Tmpfs {
    /// Device numbers (`major:minor`) of the harness's own mounts.
    host: HashSet<String>,
    mounts: Option<Vec<File>>,
}

/// `(major:minor, mount point)` of every tmpfs in a mountinfo text.
fn tmpfs_mounts(mountinfo: &str) -> Vec<(String, String)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut l = left.split(' ');
            let majmin = l.nth(2)?;
            let point = l.nth(1)?;
            (right.split(' ').next()? == "tmpfs").then(|| (majmin.to_owned(), unescape(point)))
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Tmpfs {
    /// Remember the harness's own device numbers (before the sandbox exists).
    pub(crate) fn new() -> Tmpfs {
        let own = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let host = own
            .lines()
            .filter_map(|l| l.split(' ').nth(2).map(str::to_owned))
            .collect();
        Tmpfs { host, mounts: None }
    }

    /// Open the private tmpfs mounts through `pid`'s root, if `pid` lets us.
    fn open_through(&self, pid: i32) -> Option<Vec<File>> {
        let info = fs::read_to_string(format!("/proc/{pid}/mountinfo")).ok()?;
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut failed = false;
        for (majmin, point) in tmpfs_mounts(&info) {
            if self.host.contains(&majmin) || !seen.insert(majmin.clone()) {
                continue;
            }
            // `O_PATH`: enough for `fstatvfs`, and needs no read permission on the
            // mount's root (a mask is a mode-000 tmpfs).
            let path = format!("/proc/{pid}/root{point}");
            match fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
            {
                // A tmpfs another mount covers (the private `$HOME` when the workspace
                // is `$HOME`) resolves to the covering filesystem, whose usage is not
                // the sandbox's memory; nothing can write to the covered one.
                Ok(f) if device_of(&f).as_deref() == Some(majmin.as_str()) => out.push(f),
                Ok(_) => {}
                Err(_) => failed = true,
            }
        }
        // Nothing opened while something was there: `pid`'s root is closed to us
        // (ptrace access), try the next process.
        (!(failed && out.is_empty())).then_some(out)
    }

    /// Bytes used in the sandbox's private tmpfs mounts; 0 until they are found.
    /// `root` is the top process (init of the pid namespace, or the command).
    pub(crate) fn used_bytes(&mut self, root: i32) -> u64 {
        if self.mounts.is_none() {
            let mut candidates = vec![root];
            let kids = monitor::children(root);
            candidates.extend(&kids);
            for k in kids.iter().take(4) {
                candidates.extend(monitor::children(*k));
            }
            self.mounts = candidates.into_iter().find_map(|p| self.open_through(p));
        }
        self.mounts
            .iter()
            .flatten()
            .map(used)
            .fold(0u64, u64::saturating_add)
    }
}

/// `major:minor` of the filesystem `f` is on, as mountinfo writes it.
fn device_of(f: &File) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = f.metadata().ok()?.dev();
    Some(format!("{}:{}", libc::major(dev), libc::minor(dev)))
}

/// Used bytes of the filesystem `f` is on.
pub(crate) fn used(f: &File) -> u64 {
    // SAFETY: an all-zero statvfs is a valid value; fstatvfs fills it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: f is an open fd and st is valid for writes.
    if unsafe { libc::fstatvfs(f.as_raw_fd(), &mut st) } != 0 {
        return 0;
    }
    (st.f_blocks.saturating_sub(st.f_bfree)).saturating_mul(st.f_frsize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tmpfs_lines_and_unescapes_their_mount_points() {
        let info = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                    41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n\
                    50 23 0:51 / /tmp/a\\040b rw shared:1 - tmpfs tmpfs rw\n";
        assert_eq!(
            tmpfs_mounts(info),
            vec![
                ("0:28".to_owned(), "/sys/fs/cgroup".to_owned()),
                ("0:51".to_owned(), "/tmp/a b".to_owned()),
            ]
        );
    }
}
