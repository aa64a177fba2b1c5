//! Idmapped clones of the workspace, made by a root parent.
//!
//! A root harness runs the command as an unprivileged uid (`RunSpec::uid`), which
//! could not write a workspace owned by the host user. Rather than chown the tree
//! (and have to undo it, also after a killed harness), the parent clones the
//! workspace mount with `open_tree` and gives the clone an *idmapping* with
//! `mount_setattr(MOUNT_ATTR_IDMAP)`: through that mount only, files owned by host
//! uid 0 appear owned by the sandbox uid, and what the command creates lands on disk
//! as uid 0. Nothing on disk changes ownership; the mapping dies with the mount.
//!
//! Only a process privileged over the filesystem's user namespace (the host root)
//! may idmap a mount, so it is done here, before the clone, and the child moves the
//! detached clone into its view. The idmapping is a user namespace mapping the
//! workspace directory's owner (uid and gid) to the sandbox uid, made once per pair
//! and kept open for the life of the process; files of other owners keep no mapping
//! and are not the command's to change.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use crate::SandboxError;

const OPEN_TREE_CLONE: libc::c_uint = 0x1;
const AT_EMPTY_PATH: libc::c_uint = 0x1000;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

fn fail(what: &'static str) -> impl FnOnce(std::io::Error) -> SandboxError {
    move |source| SandboxError::Layer {
        stage: "idmapped workspace",
        detail: what.to_owned(),
        source,
    }
}

fn last(what: &'static str) -> SandboxError {
    fail(what)(std::io::Error::last_os_error())
}

/// A user namespace whose maps are `owner uid 1` and `group uid 1`, as an fd.
fn new_userns((owner, group, uid): Key) -> Result<OwnedFd, SandboxError> {
    // SAFETY: clone3 without CLONE_VM duplicates the process like fork; the child
    // only waits in pause(2), an async-signal-safe call, until it is killed below.
    let pid = unsafe {
        let args = super::spawn::CloneArgs {
            flags: libc::CLONE_NEWUSER as u64,
            exit_signal: libc::SIGCHLD as u64,
            ..super::spawn::CloneArgs::default()
        };
        let pid = libc::syscall(
            libc::SYS_clone3,
            &args as *const super::spawn::CloneArgs,
            std::mem::size_of::<super::spawn::CloneArgs>(),
        );
        if pid == 0 {
            loop {
                libc::pause();
            }
        }
        pid
    };
    if pid < 0 {
        return Err(last("clone a user namespace"));
    }
    let made = std::fs::write(format!("/proc/{pid}/uid_map"), format!("{owner} {uid} 1\n"))
        .and_then(|()| std::fs::write(format!("/proc/{pid}/setgroups"), "deny"))
        .and_then(|()| std::fs::write(format!("/proc/{pid}/gid_map"), format!("{group} {uid} 1\n")))
        .and_then(|()| std::fs::File::open(format!("/proc/{pid}/ns/user")));
    // SAFETY: pid is our child; kill and reap it whatever happened above.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
        libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
    }
    made.map(OwnedFd::from)
        .map_err(fail("map a user namespace"))
}

/// (owner uid, owner gid, sandbox uid) of an idmapping.
type Key = (u32, u32, u32);

/// Run `f` with the fd of the idmapping user namespace for `key`.
fn with_userns<R>(key: Key, f: impl FnOnce(RawFd) -> R) -> Result<R, SandboxError> {
    static CACHE: OnceLock<Mutex<HashMap<Key, OwnedFd>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    let fd = match map.entry(key) {
        std::collections::hash_map::Entry::Occupied(e) => e.get().as_raw_fd(),
        std::collections::hash_map::Entry::Vacant(v) => v.insert(new_userns(key)?).as_raw_fd(),
    };
    Ok(f(fd))
}

/// A detached, recursive, idmapped (the owner of `path` shown as `uid`), nosuid, nodev
/// clone of the mount tree at `path`.
pub(crate) fn clone(path: &Path, uid: u32) -> Result<OwnedFd, SandboxError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(fail("read the workspace's owner"))?;
    let key = (meta.uid(), meta.gid(), uid);
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SandboxError::invalid("a NUL byte in a path"))?;
    // SAFETY: cpath is a valid NUL-terminated string.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            cpath.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
        )
    };
    if fd < 0 {
        return Err(last("clone the workspace mount"));
    }
    // SAFETY: open_tree returned a new fd that we own.
    let tree = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    let tree = above_stdio(tree)?;
    let r = with_userns(key, |userns| {
        let attr = super::sys::MountAttr {
            attr_set: MOUNT_ATTR_IDMAP
                | super::sys::MOUNT_ATTR_NOSUID
                | super::sys::MOUNT_ATTR_NODEV,
            attr_clr: 0,
            propagation: 0,
            userns_fd: userns as u64,
        };
        // SAFETY: the empty path with AT_EMPTY_PATH names the tree fd itself; attr is
        // a valid struct of the size passed.
        unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                tree.as_raw_fd(),
                c"".as_ptr(),
                AT_EMPTY_PATH | AT_RECURSIVE,
                &attr as *const super::sys::MountAttr,
                std::mem::size_of::<super::sys::MountAttr>(),
            )
        }
    })?;
    if r < 0 {
        return Err(last(
            "idmap the workspace mount (the filesystem may not support idmapped mounts)",
        ));
    }
    Ok(tree)
}

/// `fd` renumbered to 3 or above, so the child's `dup2` onto stdio cannot clobber it.
fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, SandboxError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC on an fd we own returns a new fd we then own.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(last("renumber the workspace clone"));
    }
    // SAFETY: fcntl just returned this fd.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}
