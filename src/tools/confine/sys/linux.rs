//! Linux: `openat2(2)`, which resolves a whole path beneath a directory in the
//! kernel, so a symlink swapped in mid-walk cannot lead it out.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use libc::c_int;

use super::{Kind, owned};

/// Open for reference only: resolution and `fstat`, no read permission needed, never
/// blocks on a FIFO.
pub(in super::super) const O_PATH: c_int = libc::O_PATH;

/// `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, plus
/// `RESOLVE_NO_SYMLINKS` when `no_symlinks`. Fails with `ENOSYS` on kernels before
/// 5.6 (or `EPERM` under a seccomp filter that does not know it).
pub(in super::super) fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: c_int,
    no_symlinks: bool,
) -> io::Result<OwnedFd> {
    let mut resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    if no_symlinks {
        resolve |= libc::RESOLVE_NO_SYMLINKS;
    }
    // libc marks open_how non-exhaustive (the kernel extends it by size), so start
    // from all zeroes, which is also what the kernel wants in fields we do not set.
    // SAFETY: open_how is plain integers; the all-zero pattern is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = u64::from((flags | libc::O_CLOEXEC).cast_unsigned());
    how.mode = 0;
    how.resolve = resolve;
    loop {
        // SAFETY: `path` is NUL-terminated and `how` is a fully initialised open_how,
        // both outliving the call; the size passed is that of the struct we pass;
        // `dir` is live for the call. The kernel returns a new descriptor or -1.
        let r = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                path.as_ptr(),
                &raw const how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        let fd = c_int::try_from(r).unwrap_or(-1);
        match owned(fd) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Resets errno, so a null `readdir` can be told apart from an error.
pub(super) fn clear_errno() {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = 0 };
}

/// The error behind a null `readdir`, if there was one (errno cleared before it).
pub(super) fn readdir_error() -> Option<io::Error> {
    let e = io::Error::last_os_error();
    (e.raw_os_error() != Some(0)).then_some(e)
}

/// The kind a directory entry records, when the file system fills `d_type` in.
///
/// # Safety
/// `ent` must point to a live entry returned by `readdir`.
pub(super) unsafe fn dirent_kind(ent: *const libc::dirent) -> Option<Kind> {
    // SAFETY: the caller guarantees `ent` is live; we read one byte through a raw
    // place expression.
    let t = unsafe { (*ent).d_type };
    match t {
        libc::DT_REG => Some(Kind::File),
        libc::DT_DIR => Some(Kind::Dir),
        libc::DT_LNK => Some(Kind::Symlink),
        libc::DT_UNKNOWN => None,
        _ => Some(Kind::Other),
    }
}
