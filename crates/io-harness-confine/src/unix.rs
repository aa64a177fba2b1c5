//! The Unix backend: a root descriptor and `*at` syscalls relative to it.
//!
//! Resolution is [`Root::resolve`]: `openat2(2)` beneath the root when the kernel has
//! it, else a component walk that opens each directory with `O_NOFOLLOW` relative to
//! the previous one and refuses every symlink. Either way no path string is ever
//! resolved from the process's cwd or from `/`, so what a path means cannot change
//! between a check and a use: there is no separate check.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use crate::sys::{self, O_PATH};
use crate::{DirEntry, EntryKind, Error, FileId, Follow, Metadata, Resolver, reason};

/// A directory opened for reference.
const DIR: OFlags = O_PATH.union(OFlags::DIRECTORY);
/// A file opened to read; non-blocking so a FIFO swapped in cannot hang the open.
const READ: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK);
/// Tries at an `openat2` that reports `EAGAIN` (a concurrent rename) before giving up.
const RACE_RETRIES: usize = 16;

fn cstr(rel: &str, s: &OsStr) -> Result<CString, Error> {
    sys::cstring(s).map_err(|_| Error::refused(rel, reason::NUL))
}

fn metadata_of(st: sys::Stat) -> Metadata {
    Metadata {
        kind: st.kind,
        len: st.size,
    }
}

/// A regular file open for reading, or why it is not one.
fn regular(rel: &str, fd: OwnedFd) -> Result<(File, Metadata), Error> {
    let st = sys::fstat(fd.as_fd()).map_err(|e| Error::io(rel, e))?;
    match st.kind {
        EntryKind::File => Ok((File::from(fd), metadata_of(st))),
        EntryKind::Dir => Err(Error::IsADirectory(rel.to_string())),
        _ => Err(Error::NotAFile(rel.to_string())),
    }
}

/// After a failed `O_NOFOLLOW` open of `name` in `dir`: a symlink there is a refusal
/// for `why`, anything else the plain I/O error.
fn nofollow_error(dir: BorrowedFd<'_>, name: &CStr, rel: &str, why: &str, e: Errno) -> Error {
    match sys::lstatat(dir, name) {
        Ok(st) if st.kind == EntryKind::Symlink => Error::refused(rel, why),
        _ => Error::io(rel, e),
    }
}

/// The opened root and how paths beneath it are resolved.
#[derive(Debug)]
pub(crate) struct Root {
    fd: OwnedFd,
    walk: bool,
}

impl Root {
    pub(crate) fn open(path: &Path, force_walk: bool) -> io::Result<Self> {
        let fd = rustix::fs::open(path, DIR | OFlags::CLOEXEC, Mode::empty())?;
        let walk = force_walk
            || match sys::openat2(fd.as_fd(), c".", DIR, false) {
                Ok(_) => false,
                // Missing (ENOSYS), hidden by seccomp (EPERM) or an older ABI (E2BIG,
                // EINVAL): fall back to the walk.
                Err(Errno::NOSYS | Errno::PERM | Errno::TOOBIG | Errno::INVAL) => true,
                Err(e) => return Err(e.into()),
            };
        Ok(Self { fd, walk })
    }

    pub(crate) fn resolver(&self) -> Resolver {
        if self.walk {
            Resolver::Walk
        } else {
            Resolver::Openat2
        }
    }

    /// Opens the normalized path `rel` beneath the root with `flags`.
    fn resolve(&self, rel: &str, flags: OFlags, follow: Follow) -> Result<OwnedFd, Error> {
        if self.walk {
            return self.walk_resolve(rel, flags, follow);
        }
        let c = cstr(rel, OsStr::new(rel))?;
        for _ in 0..RACE_RETRIES {
            match sys::openat2(self.fd.as_fd(), &c, flags, follow == Follow::Never) {
                Ok(fd) => return Ok(fd),
                Err(Errno::AGAIN) => continue,
                Err(Errno::XDEV) => return Err(Error::refused(rel, reason::OUTSIDE)),
                Err(Errno::LOOP) if follow == Follow::Never => {
                    return Err(Error::refused(rel, reason::WRITE_SYMLINK));
                }
                Err(Errno::LOOP) => return Err(Error::refused(rel, reason::LOOP)),
                Err(e) => return Err(Error::io(rel, e)),
            }
        }
        Err(Error::refused(rel, reason::RACE))
    }

    /// The fallback: one component at a time, each opened with `O_NOFOLLOW` relative
    /// to the directory before it, refusing any symlink met.
    fn walk_resolve(&self, rel: &str, flags: OFlags, follow: Follow) -> Result<OwnedFd, Error> {
        let why = match follow {
            Follow::Never => reason::WRITE_SYMLINK,
            Follow::Inside => reason::WALK_SYMLINK,
        };
        if rel == "." {
            return sys::openat(self.fd.as_fd(), c".", flags, 0).map_err(|e| Error::io(rel, e));
        }
        let comps: Vec<&str> = rel.split('/').collect();
        let mut cur = sys::openat(self.fd.as_fd(), c".", DIR, 0).map_err(|e| Error::io(rel, e))?;
        for (i, comp) in comps.iter().enumerate() {
            let last = i + 1 == comps.len();
            let f = (if last { flags } else { DIR }) | OFlags::NOFOLLOW;
            let c = cstr(rel, OsStr::new(comp))?;
            cur = sys::openat(cur.as_fd(), &c, f, 0)
                .map_err(|e| nofollow_error(cur.as_fd(), &c, rel, why, e))?;
        }
        // With O_PATH, O_NOFOLLOW opens a final symlink itself instead of failing.
        match sys::fstat(cur.as_fd()) {
            Ok(st) if st.kind == EntryKind::Symlink => Err(Error::refused(rel, why)),
            Ok(_) => Ok(cur),
            Err(e) => Err(Error::io(rel, e)),
        }
    }

    pub(crate) fn metadata(&self, rel: &str) -> Result<Metadata, Error> {
        let fd = self.resolve(rel, O_PATH, Follow::Inside)?;
        sys::fstat(fd.as_fd())
            .map(metadata_of)
            .map_err(|e| Error::io(rel, e))
    }

    pub(crate) fn file_id(&self, rel: &str, follow: Follow) -> Result<Option<FileId>, Error> {
        let fd = self.resolve(rel, O_PATH, follow)?;
        let st = sys::fstat(fd.as_fd()).map_err(|e| Error::io(rel, e))?;
        Ok((st.kind == EntryKind::File).then_some(FileId {
            dev: st.dev,
            ino: st.ino,
        }))
    }

    pub(crate) fn open_file(&self, rel: &str, follow: Follow) -> Result<(File, Metadata), Error> {
        regular(rel, self.resolve(rel, READ, follow)?)
    }

    pub(crate) fn open_dir(&self, rel: &str) -> Result<Dir, Error> {
        match self.resolve(rel, DIR, Follow::Inside) {
            Ok(fd) => Ok(Dir { fd }),
            Err(Error::Io { source, .. })
                if source.raw_os_error() == Some(Errno::NOTDIR.raw_os_error()) =>
            {
                Err(Error::NotADirectory(rel.to_string()))
            }
            Err(e) => Err(e),
        }
    }

    /// Opens the directory `parent`, creating missing components one at a time with
    /// `mkdirat` relative to a descriptor already beneath the root.
    fn ensure_dir(&self, parent: &str) -> Result<OwnedFd, Error> {
        match self.resolve(parent, DIR, Follow::Never) {
            Err(Error::NotFound(_)) => {}
            other => return other,
        }
        let mut cur = self.resolve(".", DIR, Follow::Never)?;
        let mut prefix = String::new();
        for comp in parent.split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(comp);
            cur = match self.resolve(&prefix, DIR, Follow::Never) {
                Err(Error::NotFound(_)) => {
                    let c = cstr(&prefix, OsStr::new(comp))?;
                    match sys::mkdirat(cur.as_fd(), &c, 0o777) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(Error::io(&prefix, e)),
                    }
                    // Re-resolve from the root: whatever is there now must pass again.
                    self.resolve(&prefix, DIR, Follow::Never)?
                }
                other => other?,
            };
        }
        Ok(cur)
    }

    /// Unlinks the entry `rel` (a file or a symlink, never followed; a directory is
    /// refused by the kernel).
    pub(crate) fn remove_file(&self, rel: &str) -> Result<(), Error> {
        let (parent, name) = rel.rsplit_once('/').unwrap_or((".", rel));
        let dir = self.resolve(parent, DIR, Follow::Never)?;
        let c = cstr(rel, OsStr::new(name))?;
        match sys::unlinkat(dir.as_fd(), &c) {
            Ok(()) => Ok(()),
            Err(Errno::NOENT) => Err(Error::NotFound(rel.to_string())),
            Err(e) => Err(Error::io(rel, e)),
        }
    }

    /// Writes via a temporary file in the target's directory and `renameat` over the
    /// target. The rename replaces whatever entry is at the final name — a symlink
    /// planted after the check included — and never follows it.
    pub(crate) fn write(&self, rel: &str, bytes: &[u8], temp: &str) -> Result<(), Error> {
        let (parent, name) = rel.rsplit_once('/').unwrap_or((".", rel));
        let dir = self.ensure_dir(parent)?;
        let cname = cstr(rel, OsStr::new(name))?;
        let keep_mode = match sys::lstatat(dir.as_fd(), &cname) {
            Ok(st) => match st.kind {
                EntryKind::File => Some(st.mode),
                EntryKind::Symlink => return Err(Error::refused(rel, reason::WRITE_SYMLINK)),
                EntryKind::Dir => return Err(Error::IsADirectory(rel.to_string())),
                _ => return Err(Error::NotAFile(rel.to_string())),
            },
            Err(Errno::NOENT) => None,
            Err(e) => return Err(Error::io(rel, e)),
        };
        let (tmp, fd) = create_temp(dir.as_fd(), temp).map_err(|e| Error::io(rel, e))?;
        let written = (|| -> io::Result<()> {
            let mut f = File::from(fd);
            f.write_all(bytes)?;
            if let Some(mode) = keep_mode {
                sys::fchmod(f.as_fd(), mode)?;
            }
            f.sync_data()?;
            #[cfg(feature = "failpoints")]
            if std::env::var_os("IO_HARNESS_FAILPOINT")
                .is_some_and(|v| v == "confine.before_rename")
            {
                eprintln!("failpoint confine.before_rename hit; aborting");
                std::process::abort();
            }
            Ok(sys::renameat(dir.as_fd(), &tmp, dir.as_fd(), &cname)?)
        })();
        if let Err(e) = written {
            // Best effort: the temporary name is ours; a failure to remove it is
            // less important than the error being reported.
            let _ = sys::unlinkat(dir.as_fd(), &tmp);
            return Err(match Errno::from_io_error(&e) {
                Some(Errno::ISDIR | Errno::NOTEMPTY) => Error::IsADirectory(rel.to_string()),
                _ => Error::io(rel, e),
            });
        }
        Ok(())
    }
}

/// Creates a fresh temporary file in `dir` (`O_EXCL`, so nothing existing — a
/// symlink included — is ever opened): named `preferred` when that name is free.
fn create_temp(dir: BorrowedFd<'_>, preferred: &str) -> Result<(CString, OwnedFd), Errno> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
    let name = sys::cstring(OsStr::new(preferred))?;
    match sys::openat(dir, &name, flags, 0o666) {
        Ok(fd) => return Ok((name, fd)),
        Err(Errno::EXIST) => {}
        Err(e) => return Err(e),
    }
    let pid = std::process::id();
    for _ in 0..64 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = sys::cstring(OsStr::new(&format!(".io-harness-{pid}-{n}.tmp")))?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
        match sys::openat(dir, &name, flags, 0o666) {
            Ok(fd) => return Ok((name, fd)),
            Err(Errno::EXIST) => {}
            Err(e) => return Err(e),
        }
    }
    Err(Errno::EXIST)
}

/// An open directory; children are opened relative to it with `O_NOFOLLOW`.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
}

/// Why a child symlink is refused in a walk.
const CHILD_SYMLINK: &str = "is a symlink; directory walks never follow symlinks";

impl Dir {
    pub(crate) fn entries(&self) -> io::Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        for (name, kind) in sys::read_dir(self.fd.as_fd())? {
            let kind = match kind {
                Some(k) => k,
                None => match sys::cstring(&name).and_then(|c| sys::lstatat(self.fd.as_fd(), &c)) {
                    Ok(st) => st.kind,
                    // Removed since it was listed.
                    Err(Errno::NOENT) => continue,
                    Err(e) => return Err(e.into()),
                },
            };
            out.push(DirEntry::new(name, kind));
        }
        Ok(out)
    }

    pub(crate) fn open_subdir(&self, name: &OsStr, rel: &str) -> Result<Dir, Error> {
        let c = cstr(rel, name)?;
        let fd = sys::openat(self.fd.as_fd(), &c, DIR | OFlags::NOFOLLOW, 0)
            .map_err(|e| nofollow_error(self.fd.as_fd(), &c, rel, CHILD_SYMLINK, e))?;
        match sys::fstat(fd.as_fd()) {
            Ok(st) if st.kind == EntryKind::Dir => Ok(Dir { fd }),
            Ok(st) if st.kind == EntryKind::Symlink => Err(Error::refused(rel, CHILD_SYMLINK)),
            Ok(_) => Err(Error::NotADirectory(rel.to_string())),
            Err(e) => Err(Error::io(rel, e)),
        }
    }

    pub(crate) fn open_file(&self, name: &OsStr, rel: &str) -> Result<(File, Metadata), Error> {
        let c = cstr(rel, name)?;
        let fd = sys::openat(self.fd.as_fd(), &c, READ | OFlags::NOFOLLOW, 0)
            .map_err(|e| nofollow_error(self.fd.as_fd(), &c, rel, CHILD_SYMLINK, e))?;
        regular(rel, fd)
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::CString;
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    use crate::{EntryKind, Error, Resolver, Workspace, reason};

    /// `ws/` with `a/b.txt`, an `outside/secret.txt` beside it.
    fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        fs::create_dir_all(root.join("a")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(root.join("a/b.txt"), "inside").unwrap();
        fs::write(outside.join("secret.txt"), "SECRET").unwrap();
        (tmp, root, outside)
    }

    fn refusal(r: Result<impl std::fmt::Debug, Error>) -> String {
        match r {
            Err(Error::Refused(e)) => e.reason,
            other => panic!("expected a confinement refusal, got {other:?}"),
        }
    }

    #[test]
    fn fallback_walk_reads_writes_and_refuses_every_symlink() {
        let (_tmp, root, outside) = tree();
        symlink("a", root.join("alias")).unwrap();
        symlink(&outside, root.join("out")).unwrap();
        symlink(outside.join("secret.txt"), root.join("planted.txt")).unwrap();
        let ws = Workspace::open_forcing_walk(&root).unwrap();
        assert_eq!(ws.resolver(), Resolver::Walk);

        assert_eq!(ws.read("a/b.txt").unwrap(), b"inside");
        assert_eq!(ws.metadata("a").unwrap().kind, EntryKind::Dir);
        // Even a symlink that stays inside is refused: the walk cannot tell race-free.
        assert_eq!(refusal(ws.read("alias/b.txt")), reason::WALK_SYMLINK);
        assert_eq!(refusal(ws.read("out/secret.txt")), reason::WALK_SYMLINK);
        assert_eq!(refusal(ws.list_dir("out")), reason::WALK_SYMLINK);
        assert!(matches!(ws.read("a/missing"), Err(Error::NotFound(_))));

        ws.write("new/deep/c.txt", b"made").unwrap();
        assert_eq!(fs::read(root.join("new/deep/c.txt")).unwrap(), b"made");
        ws.write("a/b.txt", b"replaced").unwrap();
        assert_eq!(ws.read("a/b.txt").unwrap(), b"replaced");
        assert_eq!(refusal(ws.write("out/x.txt", b"no")), reason::WRITE_SYMLINK);
        assert_eq!(
            refusal(ws.write("planted.txt", b"no")),
            reason::WRITE_SYMLINK
        );
        assert_eq!(fs::read(outside.join("secret.txt")).unwrap(), b"SECRET");
        let names: Vec<_> = fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["secret.txt"]);

        let names: Vec<String> = ws
            .list_dir(".")
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["a", "alias", "new", "out", "planted.txt"]);
    }

    #[test]
    fn openat2_follows_inside_symlinks_and_refuses_escapes() {
        let (_tmp, root, outside) = tree();
        symlink("a", root.join("alias")).unwrap();
        symlink("../outside", root.join("up")).unwrap();
        symlink(&outside, root.join("abs")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        let ws = Workspace::open(&root).unwrap();
        if ws.resolver() != Resolver::Openat2 {
            eprintln!("openat2 unavailable here; the walk is covered by the fallback test");
            return;
        }
        assert_eq!(ws.read("alias/b.txt").unwrap(), b"inside");
        assert_eq!(refusal(ws.read("up/secret.txt")), reason::OUTSIDE);
        assert_eq!(refusal(ws.read("abs/secret.txt")), reason::OUTSIDE);
        assert_eq!(refusal(ws.read("loop")), reason::LOOP);
        // Writes never go through a symlink, even one that stays inside.
        assert_eq!(
            refusal(ws.write("alias/c.txt", b"x")),
            reason::WRITE_SYMLINK
        );
        assert!(!root.join("a/c.txt").exists());
    }

    #[test]
    fn walk_subdirs_and_files_refuse_symlinks() {
        let (_tmp, root, outside) = tree();
        symlink(&outside, root.join("out")).unwrap();
        symlink("a/b.txt", root.join("link.txt")).unwrap();
        let ws = Workspace::open(&root).unwrap();
        let top = ws.open_dir(".").unwrap();
        let a = top.open_subdir("a".as_ref()).unwrap();
        assert_eq!(a.rel(), "a");
        assert_eq!(a.read_file("b.txt".as_ref(), 100).unwrap(), b"inside");
        assert!(matches!(
            top.open_subdir("out".as_ref()),
            Err(Error::Refused(_))
        ));
        assert!(matches!(
            top.open_file("link.txt".as_ref()),
            Err(Error::Refused(_))
        ));
        assert!(matches!(
            a.read_file("b.txt".as_ref(), 3),
            Err(Error::TooLarge { size: 6, .. })
        ));
    }

    /// The walk is race-free too: a directory swapped (atomically, by
    /// `RENAME_EXCHANGE`) for a symlink to the outside never leads a read or a write
    /// out, in either resolver.
    #[cfg(target_os = "linux")]
    #[test]
    fn swapping_a_directory_for_a_symlink_never_leads_outside_in_either_mode() {
        use std::os::unix::ffi::OsStrExt;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};

        fn exchange(a: &std::ffi::CStr, b: &std::ffi::CStr) {
            use rustix::fs::{CWD, RenameFlags, renameat_with};
            renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).expect("RENAME_EXCHANGE");
        }

        for force_walk in [false, true] {
            let (_tmp, root, outside) = tree();
            fs::write(outside.join("b.txt"), "SECRET").unwrap();
            symlink(&outside, root.join("other")).unwrap();
            let ws = if force_walk {
                Workspace::open_forcing_walk(&root).unwrap()
            } else {
                Workspace::open(&root).unwrap()
            };
            let a = CString::new(root.join("a").as_os_str().as_bytes()).unwrap();
            let b = CString::new(root.join("other").as_os_str().as_bytes()).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let swapper = {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) && n < 10_000_000 {
                        exchange(&a, &b);
                        n += 1;
                    }
                    if n % 2 == 1 {
                        exchange(&a, &b);
                    }
                })
            };
            for i in 0..500 {
                if let Ok(bytes) = ws.read("a/b.txt") {
                    assert_eq!(bytes, b"inside");
                }
                let _ = ws.write(&format!("a/w{i}"), b"w");
                if let Ok(d) = ws.open_dir("a") {
                    let _ = d
                        .read_file("b.txt".as_ref(), 100)
                        .map(|b| assert_eq!(b, b"inside"));
                }
            }
            stop.store(true, Ordering::Relaxed);
            swapper.join().unwrap();
            let mut names: Vec<_> = fs::read_dir(&outside)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            names.sort();
            assert_eq!(
                names,
                ["b.txt", "secret.txt"],
                "written outside (walk: {force_walk})"
            );
            assert_eq!(fs::read(outside.join("b.txt")).unwrap(), b"SECRET");
        }
    }
}
