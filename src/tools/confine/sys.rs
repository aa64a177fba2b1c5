//! The raw syscalls confinement is built from, and the only `unsafe` in the tools.
//!
//! Each wrapper is thin: it converts arguments, makes one libc call, and turns the
//! result into an `io::Result` owning whatever the kernel handed back. Policy (which
//! flags, what an errno means for the model) lives in the caller, `unix.rs`. The one
//! Linux-only call, `openat2(2)`, sits in `linux.rs`; other Unixes get a stub in
//! `portable.rs` that answers `ENOSYS`, which sends the caller to its component walk.
#![deny(clippy::undocumented_unsafe_blocks)]

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use libc::c_int;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as os;

#[cfg(not(target_os = "linux"))]
mod portable;
#[cfg(not(target_os = "linux"))]
use portable as os;

pub(super) use os::{O_PATH, openat2};

/// What an inode is, as far as the tools care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// The part of `struct stat` the tools use.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stat {
    pub kind: Kind,
    pub size: u64,
    /// Permission bits (`& 0o7777`).
    pub mode: u32,
}

fn kind_of_mode(mode: libc::mode_t) -> Kind {
    match mode & libc::S_IFMT {
        libc::S_IFREG => Kind::File,
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    }
}

// mode_t is u32 on Linux but u16 on macOS and the BSDs, hence the conversion.
#[allow(clippy::useless_conversion)]
fn stat_of(st: &libc::stat) -> Stat {
    Stat {
        kind: kind_of_mode(st.st_mode),
        size: u64::try_from(st.st_size).unwrap_or(0),
        mode: u32::from(st.st_mode) & 0o7777,
    }
}

/// A path argument as the kernel wants it; a NUL inside is `InvalidInput`.
pub(super) fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Retries `f` while it fails with `EINTR`.
fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Takes ownership of a descriptor a syscall returned (`-1` means errno is set).
fn owned(fd: c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is non-negative, freshly returned by the kernel to this call, and
    // owned by nobody else, so handing it to exactly one `OwnedFd` is sound.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn unit(r: c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `openat(2)`, always with `O_CLOEXEC`.
pub(super) fn openat(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    retry(|| {
        // SAFETY: `path` is NUL-terminated and outlives the call; `dir` is a live
        // descriptor borrowed for the call; the mode is passed promoted to c_uint as
        // the variadic ABI requires.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                path.as_ptr(),
                flags | libc::O_CLOEXEC,
                libc::c_uint::from(mode),
            )
        };
        owned(fd)
    })
}

/// `mkdirat(2)`: creates `name` in `dir`; never follows a symlink at `name`.
pub(super) fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated and outlives the call; `dir` is live.
    retry(|| unit(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) }))
}

/// `renameat(2)` within or across directories given by descriptor.
pub(super) fn renameat(
    from_dir: BorrowedFd<'_>,
    from: &CStr,
    to_dir: BorrowedFd<'_>,
    to: &CStr,
) -> io::Result<()> {
    retry(|| {
        // SAFETY: both names are NUL-terminated and outlive the call; both
        // descriptors are live for the call.
        unit(unsafe {
            libc::renameat(
                from_dir.as_raw_fd(),
                from.as_ptr(),
                to_dir.as_raw_fd(),
                to.as_ptr(),
            )
        })
    })
}

/// `unlinkat(2)` of a non-directory.
pub(super) fn unlinkat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated and outlives the call; `dir` is live.
    retry(|| unit(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) }))
}

/// `fstat(2)`.
pub(super) fn fstat(fd: BorrowedFd<'_>) -> io::Result<Stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` points to writable memory of the right size; `fd` is live.
    unit(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstat returned success, so it filled in the whole struct.
    let st = unsafe { st.assume_init() };
    Ok(stat_of(&st))
}

/// `fstatat(2)` with `AT_SYMLINK_NOFOLLOW`: what `name` in `dir` itself is.
pub(super) fn lstatat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `name` is NUL-terminated, `st` is writable and the right size, `dir`
    // is live for the call.
    unit(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    // SAFETY: fstatat returned success, so it filled in the whole struct.
    let st = unsafe { st.assume_init() };
    Ok(stat_of(&st))
}

/// `fchmod(2)`.
pub(super) fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    let mode = libc::mode_t::try_from(mode & 0o7777)
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: plain integer arguments; `fd` is live for the call.
    retry(|| unit(unsafe { libc::fchmod(fd.as_raw_fd(), mode) }))
}

/// Owns a `DIR*` and closes it (and the descriptor inside it) on drop.
struct DirStream(std::ptr::NonNull<libc::DIR>);

impl Drop for DirStream {
    fn drop(&mut self) {
        // SAFETY: the pointer came from a successful fdopendir and is closed once.
        unsafe { libc::closedir(self.0.as_ptr()) };
    }
}

/// The names in the directory `dir` (without `.` and `..`), each with its kind when
/// the directory entry says it (`None`: ask `lstatat`).
pub(super) fn read_dir(dir: BorrowedFd<'_>) -> io::Result<Vec<(OsString, Option<Kind>)>> {
    // A fresh descriptor: fdopendir takes ownership of it, `dir` may be O_PATH (which
    // fdopendir refuses), and the stream starts at offset 0.
    let fd = openat(dir, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    let raw = fd.into_raw_fd();
    // SAFETY: `raw` is an open directory descriptor we own; on success the DIR takes
    // ownership of it (closedir closes it).
    let dirp = unsafe { libc::fdopendir(raw) };
    let Some(dirp) = std::ptr::NonNull::new(dirp) else {
        let err = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so `raw` is still ours to close.
        drop(unsafe { OwnedFd::from_raw_fd(raw) });
        return Err(err);
    };
    let stream = DirStream(dirp);
    let mut out = Vec::new();
    loop {
        os::clear_errno();
        // SAFETY: the stream is live; the returned pointer stays valid until the next
        // readdir or closedir on it, and we copy everything out before either.
        let ent = unsafe { libc::readdir(stream.0.as_ptr()) };
        if ent.is_null() {
            if let Some(err) = os::readdir_error() {
                return Err(err);
            }
            break;
        }
        // SAFETY: `ent` is non-null and points to a dirent whose d_name is
        // NUL-terminated; we go through raw place expressions, never a reference to
        // the (possibly shorter than declared) record.
        let name = unsafe { CStr::from_ptr(std::ptr::addr_of!((*ent).d_name).cast()) };
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        // SAFETY: as above, `ent` is valid until the next readdir.
        let kind = unsafe { os::dirent_kind(ent) };
        out.push((OsString::from_vec(bytes.to_vec()), kind));
    }
    Ok(out)
}
