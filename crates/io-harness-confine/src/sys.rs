//! The syscalls confinement is built from, through `rustix` (no `unsafe` here).
//!
//! Each helper is thin: one call, `O_CLOEXEC` always set on what it opens, `EINTR`
//! retried, the errno kept as [`Errno`] so the caller can tell its cases apart.
//! Policy (which flags, what an errno means) lives in the caller, `unix.rs`.
//! `openat2(2)` is Linux-only; elsewhere it answers `ENOSYS`, which sends the caller
//! to its component walk.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawMode};
use rustix::io::{Errno, Result, retry_on_intr};

use crate::EntryKind;

/// Open for reference only: resolution and `fstat`, no read permission needed, never
/// blocks on a FIFO.
#[cfg(target_os = "linux")]
pub(crate) const O_PATH: OFlags = OFlags::PATH;
/// Open for reference only. Without `O_PATH` this needs read permission;
/// non-blocking so a FIFO cannot hang the open.
#[cfg(not(target_os = "linux"))]
pub(crate) const O_PATH: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK);

/// The part of `struct stat` confinement uses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stat {
    pub kind: EntryKind,
    pub size: u64,
    /// Permission bits (`& 0o7777`).
    pub mode: u32,
    /// The device: with the inode, which file it is whatever its name.
    pub dev: u64,
    /// The inode.
    pub ino: u64,
}

fn kind_of(t: FileType) -> EntryKind {
    match t {
        FileType::RegularFile => EntryKind::File,
        FileType::Directory => EntryKind::Dir,
        FileType::Symlink => EntryKind::Symlink,
        _ => EntryKind::Other,
    }
}

// st_mode is u32 on Linux but u16 on macOS and the BSDs, hence the conversion.
#[allow(clippy::useless_conversion)]
fn stat_of(st: &rustix::fs::Stat) -> Stat {
    Stat {
        kind: kind_of(FileType::from_raw_mode(st.st_mode)),
        size: u64::try_from(st.st_size).unwrap_or(0),
        mode: u32::from(st.st_mode) & 0o7777,
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        dev: st.st_dev as u64,
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        ino: st.st_ino as u64,
    }
}

/// A path argument as the kernel wants it; a NUL inside is `EINVAL`.
pub(crate) fn cstring(s: &OsStr) -> Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| Errno::INVAL)
}

/// `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, plus
/// `RESOLVE_NO_SYMLINKS` when `no_symlinks`. Fails with `ENOSYS` on kernels before
/// 5.6 (or `EPERM` under a seccomp filter that does not know it).
#[cfg(target_os = "linux")]
pub(crate) fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: OFlags,
    no_symlinks: bool,
) -> Result<OwnedFd> {
    use rustix::fs::ResolveFlags;
    let mut resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    if no_symlinks {
        resolve |= ResolveFlags::NO_SYMLINKS;
    }
    retry_on_intr(|| {
        rustix::fs::openat2(dir, path, flags | OFlags::CLOEXEC, Mode::empty(), resolve)
    })
}

/// Always `ENOSYS`: there is no `openat2(2)` here.
#[cfg(not(target_os = "linux"))]
pub(crate) fn openat2(
    _dir: BorrowedFd<'_>,
    _path: &CStr,
    _flags: OFlags,
    _no_symlinks: bool,
) -> Result<OwnedFd> {
    Err(Errno::NOSYS)
}

/// `openat(2)`, always with `O_CLOEXEC`.
pub(crate) fn openat(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: OFlags,
    mode: u32,
) -> Result<OwnedFd> {
    let mode = Mode::from_raw_mode(raw_mode(mode)?);
    retry_on_intr(|| rustix::fs::openat(dir, path, flags | OFlags::CLOEXEC, mode))
}

/// `mkdirat(2)`: creates `name` in `dir`; never follows a symlink at `name`.
pub(crate) fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> Result<()> {
    let mode = Mode::from_raw_mode(raw_mode(mode)?);
    retry_on_intr(|| rustix::fs::mkdirat(dir, name, mode))
}

/// `renameat(2)` within or across directories given by descriptor.
pub(crate) fn renameat(
    from_dir: BorrowedFd<'_>,
    from: &CStr,
    to_dir: BorrowedFd<'_>,
    to: &CStr,
) -> Result<()> {
    retry_on_intr(|| rustix::fs::renameat(from_dir, from, to_dir, to))
}

/// `unlinkat(2)` of a non-directory.
pub(crate) fn unlinkat(dir: BorrowedFd<'_>, name: &CStr) -> Result<()> {
    retry_on_intr(|| rustix::fs::unlinkat(dir, name, AtFlags::empty()))
}

/// `fstat(2)`.
pub(crate) fn fstat(fd: BorrowedFd<'_>) -> Result<Stat> {
    rustix::fs::fstat(fd).map(|st| stat_of(&st))
}

/// `fstatat(2)` with `AT_SYMLINK_NOFOLLOW`: what `name` in `dir` itself is.
pub(crate) fn lstatat(dir: BorrowedFd<'_>, name: &CStr) -> Result<Stat> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map(|st| stat_of(&st))
}

/// `fchmod(2)` to the permission bits of `mode`.
pub(crate) fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> Result<()> {
    let mode = Mode::from_raw_mode(raw_mode(mode & 0o7777)?);
    retry_on_intr(|| rustix::fs::fchmod(fd, mode))
}

/// `mode_t` is u32 on Linux but u16 on macOS and the BSDs.
#[allow(clippy::useless_conversion, clippy::unnecessary_fallible_conversions)]
fn raw_mode(mode: u32) -> Result<RawMode> {
    RawMode::try_from(mode).map_err(|_| Errno::INVAL)
}

/// The names in the directory `dir` (without `.` and `..`), each with its kind when
/// the directory entry says it (`None`: ask `lstatat`).
pub(crate) fn read_dir(dir: BorrowedFd<'_>) -> Result<Vec<(OsString, Option<EntryKind>)>> {
    // A fresh descriptor: the stream takes ownership of it, `dir` may be O_PATH
    // (which getdents refuses), and the stream starts at offset 0.
    let fd = openat(dir, c".", OFlags::RDONLY | OFlags::DIRECTORY, 0)?;
    let mut out = Vec::new();
    for ent in rustix::fs::Dir::new(fd)? {
        let ent = ent?;
        let bytes = ent.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        // `Unknown` is `DT_UNKNOWN` (or a platform without `d_type`): ask `lstatat`.
        let kind = match ent.file_type() {
            FileType::Unknown => None,
            t => Some(kind_of(t)),
        };
        out.push((OsString::from_vec(bytes.to_vec()), kind));
    }
    Ok(out)
}
