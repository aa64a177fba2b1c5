//! Other Unixes: no `openat2(2)`. The caller falls back to its component-by-component
//! walk with `O_NOFOLLOW`, which refuses every symlink.

use std::ffi::CStr;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use libc::c_int;

use super::Kind;

/// Open for reference only. Without `O_PATH` this needs read permission; non-blocking
/// so a FIFO cannot hang the open.
pub(in super::super) const O_PATH: c_int = libc::O_RDONLY | libc::O_NONBLOCK;

/// Always `ENOSYS`: there is no `openat2(2)` here.
pub(in super::super) fn openat2(
    _dir: BorrowedFd<'_>,
    _path: &CStr,
    _flags: c_int,
    _no_symlinks: bool,
) -> io::Result<OwnedFd> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// errno is not portably writable; a null `readdir` is read as the end of the stream.
pub(super) fn clear_errno() {}

/// See [`clear_errno`]: never reports an error.
pub(super) fn readdir_error() -> Option<io::Error> {
    None
}

/// `d_type` is not portable; always ask `lstatat`.
///
/// # Safety
/// Trivially safe; `unsafe` only to share the Linux signature.
pub(super) unsafe fn dirent_kind(_ent: *const libc::dirent) -> Option<Kind> {
    None
}
