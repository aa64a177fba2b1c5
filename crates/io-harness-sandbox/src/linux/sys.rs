//! Thin wrappers over the raw system calls the child makes between `clone` and
//! `execve`.
//!
//! Everything here is async-signal-safe: no allocation, no locks, no glibc wrapper
//! that keeps process-wide state (glibc's `setuid` family, `fork` and `malloc` are
//! avoided on purpose — after a raw `clone` of a multi-threaded process their locks
//! may be held by threads that do not exist in the child). Errors are plain errno
//! values so that reporting them allocates nothing either.
//!
//! The parent uses a few of them too (`clone3`, `pidfd_send_signal`).

use std::ffi::CStr;
use std::os::fd::RawFd;

use libc::{c_char, c_int, c_long, c_uint, c_ulong};

/// An errno value.
pub(crate) type Errno = i32;

/// The calling thread's errno.
fn errno() -> Errno {
    // SAFETY: __errno_location returns a valid pointer to the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

fn check(ret: c_long) -> Result<c_long, Errno> {
    if ret < 0 { Err(errno()) } else { Ok(ret) }
}

fn check_int(ret: c_int) -> Result<c_int, Errno> {
    if ret < 0 { Err(errno()) } else { Ok(ret) }
}

/// `read(2)`, retried on EINTR.
pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> Result<usize, Errno> {
    loop {
        // SAFETY: buf is a valid writable buffer of buf.len() bytes.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        match check(n as c_long) {
            Err(libc::EINTR) => continue,
            r => return r.map(|n| n as usize),
        }
    }
}

/// Write all of `buf`, retried on EINTR.
pub(crate) fn write_all(fd: RawFd, mut buf: &[u8]) -> Result<(), Errno> {
    while !buf.is_empty() {
        // SAFETY: buf is a valid readable buffer of buf.len() bytes.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        match check(n as c_long) {
            Err(libc::EINTR) => continue,
            Err(e) => return Err(e),
            Ok(0) => return Err(libc::EIO),
            Ok(n) => buf = &buf[n as usize..],
        }
    }
    Ok(())
}

/// `close(2)`; errors are irrelevant to every caller.
pub(crate) fn close(fd: RawFd) {
    // SAFETY: closing an fd number has no memory-safety requirements; callers only
    // close fds they own in this process image.
    unsafe { libc::close(fd) };
}

/// `dup2(2)`.
pub(crate) fn dup2(old: RawFd, new: RawFd) -> Result<(), Errno> {
    // SAFETY: plain fd syscall.
    check_int(unsafe { libc::dup2(old, new) }).map(drop)
}

/// `close_range(2)`.
pub(crate) fn close_range(first: c_uint, last: c_uint, flags: c_uint) -> Result<(), Errno> {
    // SAFETY: plain syscall with integer arguments.
    check(unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) }).map(drop)
}

/// `open(2)` of a path.
pub(crate) fn open(path: &CStr, flags: c_int, mode: libc::mode_t) -> Result<RawFd, Errno> {
    // SAFETY: path is a valid NUL-terminated string.
    check_int(unsafe { libc::open(path.as_ptr(), flags, mode as c_uint) })
}

/// `mkdir(2)`; an existing entry is success.
pub(crate) fn mkdir_exist_ok(path: &CStr, mode: libc::mode_t) -> Result<(), Errno> {
    // SAFETY: path is a valid NUL-terminated string.
    match check_int(unsafe { libc::mkdir(path.as_ptr(), mode) }) {
        Ok(_) | Err(libc::EEXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Create an empty regular file (a mount point for a file bind) with one
/// `mknod(2)`; an existing entry is success.
pub(crate) fn touch(path: &CStr, mode: libc::mode_t) -> Result<(), Errno> {
    // SAFETY: path is a valid NUL-terminated string; S_IFREG needs no privilege.
    match check_int(unsafe { libc::mknod(path.as_ptr(), libc::S_IFREG | mode, 0) }) {
        Ok(_) | Err(libc::EEXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// `symlink(2)`.
pub(crate) fn symlink(target: &CStr, link: &CStr) -> Result<(), Errno> {
    // SAFETY: both are valid NUL-terminated strings.
    check_int(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) }).map(drop)
}

/// `unlink(2)`.
pub(crate) fn unlink(path: &CStr) -> Result<(), Errno> {
    // SAFETY: path is a valid NUL-terminated string.
    check_int(unsafe { libc::unlink(path.as_ptr()) }).map(drop)
}

fn opt_ptr(s: Option<&CStr>) -> *const c_char {
    s.map_or(std::ptr::null(), CStr::as_ptr)
}

/// `mount(2)`.
pub(crate) fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: c_ulong,
    data: Option<&CStr>,
) -> Result<(), Errno> {
    // SAFETY: every pointer is NULL or a valid NUL-terminated string.
    check_int(unsafe {
        libc::mount(
            opt_ptr(source),
            target.as_ptr(),
            opt_ptr(fstype),
            flags,
            opt_ptr(data).cast(),
        )
    })
    .map(drop)
}

/// Whether the read end of the pipe whose write end is `fd` is closed (`POLLERR`).
pub(crate) fn peer_closed(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: p is a valid pollfd; a zero timeout never blocks.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & libc::POLLERR != 0
}

/// `pivot_root(2)`.
pub(crate) fn pivot_root(new_root: &CStr, put_old: &CStr) -> Result<(), Errno> {
    // SAFETY: both are valid NUL-terminated strings.
    check(unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) })
        .map(drop)
}

/// `umount2(2)` with `MNT_DETACH`.
pub(crate) fn umount_detach(target: &CStr) -> Result<(), Errno> {
    // SAFETY: target is a valid NUL-terminated string.
    check_int(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) }).map(drop)
}

/// Become `uid`/`gid` with no supplementary groups, by raw system calls (glibc's
/// wrappers broadcast to every thread, which a cloned child does not have).
pub(crate) fn become_user(uid: u32, gid: u32) -> Result<(), Errno> {
    // SAFETY: setgroups(0, NULL) clears the list; the setres* calls take integers.
    unsafe {
        check(libc::syscall(
            libc::SYS_setgroups,
            0usize,
            std::ptr::null::<libc::gid_t>(),
        ))?;
        check(libc::syscall(libc::SYS_setresgid, gid, gid, gid))?;
        check(libc::syscall(libc::SYS_setresuid, uid, uid, uid))?;
    }
    Ok(())
}

/// `open_tree(2)`: a detached clone of the mount at `path`.
pub(crate) fn open_tree(path: &CStr, flags: c_uint) -> Result<RawFd, Errno> {
    // SAFETY: path is a valid NUL-terminated string.
    check(unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) })
        .map(|fd| fd as RawFd)
}

/// `move_mount(2)` of a detached tree `fd` onto `target`.
pub(crate) fn move_mount_fd(fd: RawFd, target: &CStr) -> Result<(), Errno> {
    const MOVE_MOUNT_F_EMPTY_PATH: c_uint = 0x4;
    // SAFETY: the empty string and target are valid NUL-terminated strings.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
pub(crate) struct MountAttr {
    pub(crate) attr_set: u64,
    pub(crate) attr_clr: u64,
    pub(crate) propagation: u64,
    pub(crate) userns_fd: u64,
}

/// `MOUNT_ATTR_RDONLY`.
pub(crate) const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// `MOUNT_ATTR_NOSUID`.
pub(crate) const MOUNT_ATTR_NOSUID: u64 = 0x2;
/// `MOUNT_ATTR_NODEV`.
pub(crate) const MOUNT_ATTR_NODEV: u64 = 0x4;

/// `mount_setattr(2)` on `path` (or on `fd` itself when `path` is empty).
pub(crate) fn mount_setattr(fd: RawFd, path: &CStr, flags: c_uint, set: u64) -> Result<(), Errno> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: path is a valid string and attr a valid struct of the size passed.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// `prctl(2)` with integer arguments.
pub(crate) fn prctl(option: c_int, a2: c_ulong, a3: c_ulong) -> Result<c_int, Errno> {
    // SAFETY: the options used take integer arguments only.
    check_int(unsafe { libc::prctl(option, a2, a3, 0 as c_ulong, 0 as c_ulong) })
}

/// `prlimit64(2)` on the calling process.
pub(crate) fn setrlimit(resource: c_int, soft: u64, hard: u64) -> Result<(), Errno> {
    let lim = libc::rlimit64 {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: lim is a valid rlimit64; the old-value pointer is NULL.
    check(unsafe {
        libc::syscall(
            libc::SYS_prlimit64,
            0,
            resource,
            &lim as *const libc::rlimit64,
            std::ptr::null_mut::<libc::rlimit64>(),
        )
    })
    .map(drop)
}

/// `setsid(2)`.
pub(crate) fn setsid() -> Result<(), Errno> {
    // SAFETY: no arguments.
    check_int(unsafe { libc::setsid() }).map(drop)
}

/// `chdir(2)`.
pub(crate) fn chdir(path: &CStr) -> Result<(), Errno> {
    // SAFETY: path is a valid NUL-terminated string.
    check_int(unsafe { libc::chdir(path.as_ptr()) }).map(drop)
}

/// `sethostname(2)`.
pub(crate) fn sethostname(name: &[u8]) -> Result<(), Errno> {
    // SAFETY: name is a valid buffer of name.len() bytes.
    check_int(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }).map(drop)
}

/// Start `entry(arg)` in a child that shares our memory on its own `stack` until it
/// executes or exits (vfork semantics: we are suspended meanwhile). No page tables
/// are copied, which makes this much cheaper than a fork of a large process.
pub(crate) fn vfork_on(
    stack: &mut [u8],
    entry: extern "C" fn(*mut libc::c_void) -> c_int,
    arg: *mut libc::c_void,
) -> Result<libc::pid_t, Errno> {
    // The stack grows down: pass its 16-byte aligned top.
    let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    // SAFETY: glibc's clone() is a thin assembly wrapper (no locks, no atfork
    // handlers). The child runs `entry` on the dedicated stack, which stays alive
    // (owned by the plan) until the child execs or exits, during which we are
    // suspended; `arg` points to data that outlives that period.
    check_int(unsafe { libc::clone(entry, top as *mut libc::c_void, flags, arg) })
}

/// `wait4(-1)`: reap any child, with its resource usage.
pub(crate) fn wait_any(status: &mut c_int, usage: &mut libc::rusage) -> Result<libc::pid_t, Errno> {
    loop {
        // SAFETY: status and usage are valid for writes.
        let r = unsafe { libc::wait4(-1, status, 0, usage) };
        match check_int(r) {
            Err(libc::EINTR) => continue,
            other => return other,
        }
    }
}

/// `execve(2)`; only returns on failure.
pub(crate) fn execve(path: &CStr, argv: *const *const c_char, envp: *const *const c_char) -> Errno {
    // SAFETY: path is a valid string; argv and envp are NULL-terminated arrays of
    // valid strings owned by the launch plan, which outlives this call.
    unsafe { libc::execve(path.as_ptr(), argv, envp) };
    errno()
}

/// `_exit(2)`.
pub(crate) fn exit(code: c_int) -> ! {
    // SAFETY: terminates the process without running any user-space handlers.
    unsafe { libc::_exit(code) }
}

/// Reset the `ignored` signals (bit n-1 for signal n) to their default and unblock
/// all signals, so the command neither inherits the harness's ignored signals nor
/// the spawner's mask. Handled signals need nothing: exec resets them.
pub(crate) fn reset_signals(ignored: u64) {
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP || ignored & (1 << (sig - 1)) == 0 {
            continue;
        }
        // SAFETY: a zeroed sigaction with SIG_DFL is valid; rt_sigaction with the
        // kernel's sigset size (8 bytes) is the raw form of sigaction(2).
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = libc::SIG_DFL;
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                &act as *const libc::sigaction,
                std::ptr::null_mut::<libc::sigaction>(),
                8usize,
            );
        }
    }
    let empty: u64 = 0;
    // SAFETY: an 8-byte empty kernel sigset; old-set pointer is NULL.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &empty as *const u64,
            std::ptr::null_mut::<u64>(),
            8usize,
        )
    };
}

/// Drop every capability: bounding set, ambient set, then effective, permitted and
/// inheritable. After this even uid 0 in the user namespace holds nothing.
///
/// A process without `CAP_SETPCAP` (an unprivileged floor) cannot shrink its
/// bounding set (EPERM) — and does not need to: it holds no capability to lose and
/// cannot gain one (no uid 0, no_new_privs); the rest still applies.
pub(crate) fn drop_capabilities(cap_last: u32) -> Result<(), Errno> {
    for cap in 0..=cap_last {
        match prctl(libc::PR_CAPBSET_DROP, cap as c_ulong, 0) {
            Ok(_) | Err(libc::EINVAL) => {}
            // SAFETY: geteuid has no preconditions.
            Err(libc::EPERM) if unsafe { libc::geteuid() } != 0 => break,
            Err(e) => return Err(e),
        }
    }
    // PR_CAP_AMBIENT = 47, PR_CAP_AMBIENT_CLEAR_ALL = 4.
    match prctl(47, 4, 0) {
        Ok(_) | Err(libc::EINVAL) => {}
        Err(e) => return Err(e),
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and a two-element data array are what capset(2) v3 expects.
    check(unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) })
        .map(drop)
}

/// `landlock_add_rule(2)` with a `LANDLOCK_RULE_PATH_BENEATH` rule for `path`.
/// A path that does not exist is skipped.
pub(crate) fn landlock_add_path(ruleset: RawFd, path: &CStr, access: u64) -> Result<(), Errno> {
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    let parent = match open(path, libc::O_PATH | libc::O_CLOEXEC, 0) {
        Ok(fd) => fd,
        Err(libc::ENOENT) => return Ok(()),
        Err(e) => return Err(e),
    };
    let rule = PathBeneath {
        allowed_access: access,
        parent_fd: parent,
    };
    // SAFETY: rule is a valid landlock_path_beneath_attr; LANDLOCK_RULE_PATH_BENEATH = 1.
    let r = check(unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            1 as c_int,
            &rule as *const PathBeneath,
            0 as c_uint,
        )
    });
    close(parent);
    r.map(drop)
}

/// `landlock_restrict_self(2)`.
pub(crate) fn landlock_restrict_self(ruleset: RawFd) -> Result<(), Errno> {
    // SAFETY: plain syscall with integer arguments.
    check(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0 as c_uint) })
        .map(drop)
}

/// The running kernel's Landlock ABI version, if it has Landlock.
pub(crate) fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: c_uint = 1;
    // SAFETY: with a NULL attribute and size 0 this flag only queries the version.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    (r > 0).then_some(r as u32)
}

/// Install a seccomp BPF program on the calling thread (`SECCOMP_SET_MODE_FILTER`).
pub(crate) fn seccomp_install(prog: &[libc::sock_filter]) -> Result<(), Errno> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: fprog points to a valid BPF program that outlives the call; the kernel
    // copies it.
    check(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0 as c_uint,
            &fprog as *const libc::sock_fprog,
        )
    })
    .map(drop)
}

/// Bring the loopback interface of the current network namespace up.
pub(crate) fn loopback_up() -> Result<(), Errno> {
    // SAFETY: socket(2) with integer arguments.
    let fd = check_int(unsafe {
        libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
    })?;
    // SAFETY: an all-zero ifreq is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as c_char;
    }
    // SAFETY: ifr is a valid ifreq; SIOCGIFFLAGS fills ifru_flags.
    let got = check_int(unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr) });
    let r = got.and_then(|_| {
        // SAFETY: the flags member of the union was just written by the kernel.
        unsafe { ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
        // SAFETY: ifr is a valid ifreq with the name and new flags set.
        check_int(unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &ifr) })
    });
    close(fd);
    r.map(drop)
}

/// `pidfd_send_signal(2)`.
pub(crate) fn pidfd_kill(pidfd: RawFd, sig: c_int) -> Result<(), Errno> {
    // SAFETY: plain syscall; NULL siginfo.
    check(unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd,
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0 as c_uint,
        )
    })
    .map(drop)
}

/// A listening TCP socket on `127.0.0.1:port` of the calling process's network
/// namespace, close-on-exec. Used by the sandbox's init for the egress bridge.
pub(crate) fn tcp_listen_loopback(port: u16) -> Result<RawFd, Errno> {
    // SAFETY: socket(2) with integer arguments.
    let fd = check_int(unsafe {
        libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)
    })?;
    // SAFETY: an all-zero sockaddr_in is a valid value.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    addr.sin_family = libc::AF_INET as libc::sa_family_t;
    addr.sin_port = port.to_be();
    addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
    let one: c_int = 1;
    // SAFETY: setsockopt with a valid pointer to an int of the given size.
    let r = check_int(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const c_int).cast(),
            std::mem::size_of::<c_int>() as libc::socklen_t,
        )
    })
    .and_then(|_| {
        // SAFETY: addr is a valid sockaddr_in of the given size.
        check_int(unsafe {
            libc::bind(
                fd,
                (&addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        })
    })
    // SAFETY: listen(2) on the socket just bound.
    .and_then(|_| check_int(unsafe { libc::listen(fd, 128) }));
    match r {
        Ok(_) => Ok(fd),
        Err(e) => {
            close(fd);
            Err(e)
        }
    }
}

/// Room for one `SCM_RIGHTS` control message carrying one fd, suitably aligned.
#[repr(C, align(8))]
struct CmsgBuf([u8; 32]);

/// Send `fd` over the unix socket `sock` (`SCM_RIGHTS`, one byte of data).
pub(crate) fn send_fd(sock: RawFd, fd: RawFd) -> Result<(), Errno> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut buf = CmsgBuf([0; 32]);
    // SAFETY: an all-zero msghdr is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = buf.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is arithmetic on its argument.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<c_int>() as u32) } as _;
    // SAFETY: msg_control points at a buffer of at least msg_controllen bytes, so the
    // first header and its data lie inside it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<c_int>(), fd);
    }
    loop {
        // SAFETY: msg and everything it points to are valid for the call.
        let r = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
        match check(r as c_long) {
            Err(libc::EINTR) => continue,
            r => return r.map(drop),
        }
    }
}

/// Receive one fd sent with [`send_fd`], without blocking (the sender has already
/// sent it when this is called). The fd is close-on-exec.
pub(crate) fn recv_fd(sock: RawFd) -> Result<RawFd, Errno> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut buf = CmsgBuf([0; 32]);
    // SAFETY: an all-zero msghdr is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = buf.0.as_mut_ptr().cast();
    msg.msg_controllen = buf.0.len() as _;
    let n = loop {
        // SAFETY: msg and everything it points to are valid for the call.
        let r =
            unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) };
        match check(r as c_long) {
            Err(libc::EINTR) => continue,
            r => break r?,
        }
    };
    if n == 0 {
        return Err(libc::ECONNRESET);
    }
    // SAFETY: the kernel filled msg_control; CMSG_FIRSTHDR checks msg_controllen.
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    if cmsg.is_null() {
        return Err(libc::EBADMSG);
    }
    // SAFETY: cmsg points at a header inside buf, written by the kernel.
    let (level, kind) = unsafe { ((*cmsg).cmsg_level, (*cmsg).cmsg_type) };
    if level != libc::SOL_SOCKET || kind != libc::SCM_RIGHTS {
        return Err(libc::EBADMSG);
    }
    // SAFETY: an SCM_RIGHTS message carries at least one int after the header.
    Ok(unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<c_int>()) })
}
