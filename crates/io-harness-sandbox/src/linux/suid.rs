//! Setuid and setgid bits are cleared from what a session leaves behind.
//!
//! A root harness runs the command as an unprivileged uid through an idmapped
//! workspace, so a file the command creates is owned by the host user on disk — and
//! a `chmod u+s` on it inside would leave a setuid binary of that user for a later,
//! unconfined process to run. The view mounts the workspace nosuid, so the bit gains
//! nothing inside; after the session (every process of it gone) the parent walks the
//! writable trees and clears the bits from regular files.
//!
//! The walk goes by directory descriptors: each directory is opened relative to its
//! parent's with `O_NOFOLLOW | O_DIRECTORY`, each entry looked at with `fstatat`
//! (`AT_SYMLINK_NOFOLLOW`) and changed through a descriptor of its own, so no link is
//! followed and no path length bounds the depth (a chain of directories longer than
//! `PATH_MAX` hides nothing). A directory of the harness's own user that it cannot
//! read is given `u+rwx` for the walk and has its mode put back after. What still
//! cannot be walked fails closed: it is made mode 0 (nobody but root reaches what is
//! below it) and reported as incomplete.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What one sweep did.
#[derive(Debug, Default)]
pub(crate) struct Sweep {
    /// The files whose bits were cleared.
    pub cleared: Vec<PathBuf>,
    /// What could not be walked or changed, and why (each made mode 0 when it could
    /// be): the sweep is incomplete when this is not empty.
    pub incomplete: Vec<(PathBuf, io::Error)>,
}

/// Clears setuid/setgid from every regular file under `roots`, saying which files
/// changed and what could not be walked (made mode 0 where it could be). Symlinks are
/// never followed.
pub(crate) fn sweep(roots: &[PathBuf]) -> Sweep {
    let mut out = Sweep::default();
    for root in roots {
        let top = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(root);
        match top {
            Ok(dir) => walk(root, Dir { dir, restore: None }, &mut out),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => out.incomplete.push((root.clone(), e)),
        }
    }
    out
}

/// An open directory; the mode to put back when the walk had to give itself access.
struct Dir {
    dir: File,
    restore: Option<u32>,
}

impl Drop for Dir {
    fn drop(&mut self) {
        if let Some(mode) = self.restore {
            let _ = self
                .dir
                .set_permissions(std::fs::Permissions::from_mode(mode));
        }
    }
}

fn walk(root: &Path, top: Dir, out: &mut Sweep) {
    let mut stack: Vec<(PathBuf, Dir, Vec<OsString>)> = Vec::new();
    let subdirs = scan(root, &top.dir, out);
    stack.push((root.to_path_buf(), top, subdirs));
    while let Some((path, dir, subdirs)) = stack.last_mut() {
        let Some(name) = subdirs.pop() else {
            stack.pop();
            continue;
        };
        let child_path = path.join(&name);
        match open_child(&dir.dir, &name) {
            Ok(child) => {
                let subdirs = scan(&child_path, &child.dir, out);
                stack.push((child_path, child, subdirs));
            }
            // Gone or no longer a directory: nothing of the sandbox is left to have
            // made it a link, and a link is not entered either way.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)
                ) => {}
            Err(e) => {
                let _ = fchmodat(&dir.dir, &name, 0);
                out.incomplete.push((child_path, e));
            }
        }
    }
}

/// Clears the bits of the regular files of `dir` (at `path`); its subdirectories.
fn scan(path: &Path, dir: &File, out: &mut Sweep) -> Vec<OsString> {
    let names = match list(dir) {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::set_permissions(fd_path(dir), std::fs::Permissions::from_mode(0o000));
            out.incomplete.push((path.to_path_buf(), e));
            return Vec::new();
        }
    };
    let mut subdirs = Vec::new();
    for name in names {
        let Ok(st) = fstatat(dir, &name) else {
            continue;
        };
        match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => subdirs.push(name),
            libc::S_IFREG if st.st_mode & 0o6000 != 0 => match clear_bits(dir, &name) {
                Ok(true) => out.cleared.push(path.join(&name)),
                Ok(false) => {}
                Err(e) => out.incomplete.push((path.join(&name), e)),
            },
            _ => {}
        }
    }
    subdirs
}

/// Clears setuid/setgid of `name` in `dir` through a descriptor of the entry itself
/// (`O_PATH | O_NOFOLLOW`, checked to be a regular file); whether it had them.
fn clear_bits(dir: &File, name: &OsStr) -> io::Result<bool> {
    let f = openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)?;
    let meta = f.metadata()?;
    if !meta.file_type().is_file() || meta.mode() & 0o6000 == 0 {
        return Ok(false);
    }
    let mode = meta.mode() & 0o1777;
    match std::fs::set_permissions(fd_path(&f), std::fs::Permissions::from_mode(mode)) {
        Ok(()) => Ok(true),
        // No /proc: by name, the entry just checked to be a regular file.
        Err(e) if e.kind() == io::ErrorKind::NotFound => fchmodat(dir, name, mode).map(|()| true),
        Err(e) => Err(e),
    }
}

fn fd_path(f: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()))
}

fn cname(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(io::Error::other)
}

fn openat(parent: &File, name: &OsStr, flags: libc::c_int) -> io::Result<File> {
    let c = cname(name)?;
    // SAFETY: a valid descriptor and a NUL-terminated name; the result is checked.
    let fd = unsafe { libc::openat(parent.as_raw_fd(), c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nobody else owns.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn fstatat(dir: &File, name: &OsStr) -> io::Result<libc::stat> {
    let c = cname(name)?;
    // SAFETY: zeroed is a valid `stat`; the call fills it or fails.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, name and out pointer.
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn fchmodat(dir: &File, name: &OsStr, mode: u32) -> io::Result<()> {
    let c = cname(name)?;
    // SAFETY: valid descriptor and name.
    let r = unsafe { libc::fchmodat(dir.as_raw_fd(), c.as_ptr(), mode as libc::mode_t, 0) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

const DIR_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

/// Opens the directory `name` of `parent` without following a link; one of the
/// harness's own user it cannot read is given `u+rwx` (put back when dropped).
fn open_child(parent: &File, name: &OsStr) -> io::Result<Dir> {
    match openat(parent, name, DIR_FLAGS) {
        Ok(dir) => Ok(Dir { dir, restore: None }),
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            let p = openat(
                parent,
                name,
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )?;
            let meta = p.metadata()?;
            // SAFETY: geteuid cannot fail.
            if meta.uid() != unsafe { libc::geteuid() } {
                return Err(e);
            }
            let mode = meta.mode() & 0o7777;
            std::fs::set_permissions(fd_path(&p), std::fs::Permissions::from_mode(mode | 0o700))?;
            match openat(parent, name, DIR_FLAGS) {
                Ok(dir) => Ok(Dir {
                    dir,
                    restore: Some(mode),
                }),
                Err(e) => {
                    let _ = std::fs::set_permissions(
                        fd_path(&p),
                        std::fs::Permissions::from_mode(mode),
                    );
                    Err(e)
                }
            }
        }
        Err(e) => Err(e),
    }
}

/// The names in the open directory `dir` (without `.` and `..`).
fn list(dir: &File) -> io::Result<Vec<OsString>> {
    // SAFETY: duplicating a valid descriptor; the result is checked.
    let fd = unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is ours; on success the stream owns it.
    let d = unsafe { libc::fdopendir(fd) };
    if d.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: `fd` is ours and not owned by a stream.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    let mut names = Vec::new();
    let result = loop {
        // SAFETY: errno is thread-local; reset so the end of the stream is told from
        // an error.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `d` is an open stream.
        let ent = unsafe { libc::readdir(d) };
        if ent.is_null() {
            let e = io::Error::last_os_error();
            break match e.raw_os_error() {
                Some(0) | None => Ok(()),
                _ => Err(e),
            };
        }
        // SAFETY: `ent` points to an entry whose name is NUL-terminated.
        let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
        let bytes = name.to_bytes();
        if bytes != b"." && bytes != b".." {
            names.push(OsStr::from_bytes(bytes).to_os_string());
        }
    };
    // SAFETY: `d` is an open stream, closed once.
    unsafe { libc::closedir(d) };
    result.map(|()| names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setuid_file_below_a_path_longer_than_path_max_is_cleared() {
        let d = tempfile::tempdir().unwrap();
        let name = "d".repeat(60);
        let mut dir = File::open(d.path()).unwrap();
        for _ in 0..100 {
            let c = cname(OsStr::new(&name)).unwrap();
            // SAFETY: valid descriptor and name.
            let r = unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o755) };
            assert_eq!(r, 0);
            dir = openat(&dir, OsStr::new(&name), DIR_FLAGS).unwrap();
        }
        let c = cname(OsStr::new("sh")).unwrap();
        // SAFETY: valid descriptor and name; the fd is closed at once.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o755,
            )
        };
        assert!(fd >= 0);
        // SAFETY: ours.
        unsafe { libc::close(fd) };
        fchmodat(&dir, OsStr::new("sh"), 0o4755).unwrap();
        let out = sweep(&[d.path().to_path_buf()]);
        assert!(out.incomplete.is_empty(), "{:?}", out.incomplete);
        assert_eq!(out.cleared.len(), 1);
        let st = fstatat(&dir, OsStr::new("sh")).unwrap();
        assert_eq!(st.st_mode & 0o7777, 0o755);
    }
}
