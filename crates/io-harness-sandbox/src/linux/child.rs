//! The code that runs in the child between `clone` and `execve`.
//!
//! Only async-signal-safe raw system calls happen here (see [`super::sys`]); the
//! plan was built before the clone. With a pid namespace the first child is the
//! namespace's init: it sets up the mounts, forks the command, reaps every orphan
//! and exits with the command's status — which makes the kernel kill whatever is
//! left in the namespace. Without one (the portable floor) the child is the command.
//!
//! The child talks to the parent over two pipes with fixed-size [`Report`] records:
//! the *exec pipe* (layers applied, or the stage that failed; it closes on a
//! successful `execve`) and the *status pipe* (init's report of the command's wait
//! status and CPU time).

use std::os::fd::RawFd;

use super::plan::{ChildPlan, IdMaps, bit};
use super::sys::{self, Errno};

/// A setup stage, for error reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Stage {
    Fds = 1,
    IdMap,
    Mount,
    Hostname,
    Loopback,
    Fork,
    Setsid,
    Rlimit,
    Chdir,
    Caps,
    NoNewPrivs,
    Landlock,
    Seccomp,
    Cgroup,
    Bridge,
}

impl Stage {
    pub(crate) fn from_u32(v: u32) -> Option<Stage> {
        use Stage::*;
        [
            Fds, IdMap, Mount, Hostname, Loopback, Fork, Setsid, Rlimit, Chdir, Caps, NoNewPrivs,
            Landlock, Seccomp, Cgroup, Bridge,
        ]
        .into_iter()
        .find(|s| *s as u32 == v)
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Stage::Fds => "close fds",
            Stage::IdMap => "uid/gid map",
            Stage::Mount => "mount",
            Stage::Hostname => "hostname",
            Stage::Loopback => "loopback",
            Stage::Fork => "fork command",
            Stage::Setsid => "setsid",
            Stage::Rlimit => "rlimit",
            Stage::Chdir => "chdir workdir",
            Stage::Caps => "drop capabilities",
            Stage::NoNewPrivs => "no_new_privs",
            Stage::Landlock => "landlock",
            Stage::Seccomp => "seccomp",
            Stage::Cgroup => "join cgroup",
            Stage::Bridge => "egress bridge listener",
        }
    }
}

/// Record kinds.
pub(crate) const KIND_LAYERS: u32 = 1;
pub(crate) const KIND_FAILED: u32 = 2;
pub(crate) const KIND_EXEC_FAILED: u32 = 3;
pub(crate) const KIND_STATUS: u32 = 4;

/// One fixed-size record on a report pipe (well under `PIPE_BUF`, so each write is
/// atomic).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Report {
    pub kind: u32,
    pub stage: u32,
    pub op: u32,
    pub errno: i32,
    pub applied: u32,
    pub status: i32,
    pub cpu_ms: u64,
}

/// Size of one record on the wire.
pub(crate) const REPORT_LEN: usize = std::mem::size_of::<Report>();

impl Report {
    fn send(&self, fd: RawFd) {
        // SAFETY: Report is repr(C) plain data without padding bytes that matter;
        // viewing it as bytes for the pipe is sound.
        let bytes =
            unsafe { std::slice::from_raw_parts((self as *const Report).cast::<u8>(), REPORT_LEN) };
        let _ = sys::write_all(fd, bytes);
    }

    /// Decode one record.
    pub(crate) fn decode(buf: &[u8; REPORT_LEN]) -> Report {
        let u = |i: usize| u32::from_ne_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let mut cpu = [0u8; 8];
        cpu.copy_from_slice(&buf[24..32]);
        Report {
            kind: u(0),
            stage: u(4),
            op: u(8),
            errno: u(12) as i32,
            applied: u(16),
            status: u(20) as i32,
            cpu_ms: u64::from_ne_bytes(cpu),
        }
    }
}

/// The fds the child starts with (all numbered 3 or above, all close-on-exec).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChildFds {
    pub stdin: RawFd,
    pub stdout: RawFd,
    pub stderr: RawFd,
    pub exec_w: RawFd,
    pub status_w: RawFd,
    /// The child's end of the socket pair the bridge listener is sent over, or -1.
    pub bridge: RawFd,
    /// Read end of the pipe the parent releases the child on once it has written the
    /// id maps ([`IdMaps::ByParent`]), or -1.
    pub release: RawFd,
}

/// Where the child is: failures are reported on `exec_w`.
#[derive(Clone, Copy)]
struct Ctx {
    required: u32,
    exec_w: RawFd,
    applied: u32,
}

impl Ctx {
    /// A layer step: record success in `applied`; on failure abort if the layer is
    /// required, otherwise go on without it.
    fn layer(&mut self, bit: u32, stage: Stage, op: u32, r: Result<(), Errno>) {
        match r {
            Ok(()) => self.applied |= bit,
            Err(e) if self.required & bit != 0 => self.fail(stage, op, e),
            Err(_) => {}
        }
    }

    fn fail(&self, stage: Stage, op: u32, errno: Errno) -> ! {
        Report {
            kind: KIND_FAILED,
            stage: stage as u32,
            op,
            errno,
            applied: self.applied,
            ..Report::default()
        }
        .send(self.exec_w);
        sys::exit(126)
    }
}

/// Close every fd except 0, 1, 2 and those in `keep`.
fn close_all_but(keep: &mut [RawFd]) -> Result<(), Errno> {
    // Insertion sort: no allocation, a handful of elements.
    for i in 1..keep.len() {
        let mut j = i;
        while j > 0 && keep[j - 1] > keep[j] {
            keep.swap(j - 1, j);
            j -= 1;
        }
    }
    let mut next: u32 = 3;
    for &fd in keep.iter() {
        if fd < 3 {
            continue;
        }
        let fd = fd as u32;
        if fd > next {
            sys::close_range(next, fd - 1, 0)?;
        }
        next = next.max(fd + 1);
    }
    sys::close_range(next, u32::MAX, 0)
}

/// Close every fd but stdio, the child's pipes, the Landlock ruleset and the
/// parent's idmapped clones; the list lives in the plan (no allocation here).
fn keep_only(plan: &mut ChildPlan, fds: ChildFds, ruleset: RawFd) -> Result<(), Errno> {
    for (slot, fd) in
        plan.keep
            .iter_mut()
            .zip([fds.exec_w, fds.status_w, ruleset, fds.bridge, fds.release])
    {
        *slot = fd;
    }
    for (slot, fd) in plan.keep[super::plan::KEEP_FIXED..]
        .iter_mut()
        .zip(&plan.premounted)
    {
        *slot = std::os::fd::AsRawFd::as_raw_fd(fd);
    }
    close_all_but(&mut plan.keep)
}

/// Entry point of the cloned child. Never returns.
pub(crate) fn child_main(plan: &mut ChildPlan, fds: ChildFds) -> ! {
    // Signals stay blocked (as on the spawner thread) until the command resets them:
    // init never runs a handler it inherited from the embedder.
    let _ = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0);
    let mut ctx = Ctx {
        required: plan.required,
        exec_w: fds.exec_w,
        applied: 0,
    };
    let stdio = sys::dup2(fds.stdin, 0)
        .and_then(|()| sys::dup2(fds.stdout, 1))
        .and_then(|()| sys::dup2(fds.stderr, 2));
    if let Err(e) = stdio {
        ctx.fail(Stage::Fds, 0, e);
    }
    let ruleset = plan.landlock.as_ref().map_or(-1, |l| l.fd());
    if let Err(e) = keep_only(plan, fds, ruleset) {
        ctx.fail(Stage::Fds, 0, e);
    }

    // Join the cgroups first: everything after, the command included, is counted.
    if !plan.cgroup_procs.is_empty() {
        let mut r = Ok(());
        for procs in &plan.cgroup_procs {
            r = r.and_then(|()| write_file(procs, b"0"));
        }
        ctx.layer(bit::CGROUP, Stage::Cgroup, 0, r);
    }
    // Host trees are cloned first (a root child still has host root's identity then),
    // then the ids are mapped, then the view is assembled as the sandbox uid.
    // Taking the slots out leaves an empty Vec behind, which allocates nothing.
    let mut slots = std::mem::take(&mut plan.slots);
    let mut mounted = match &plan.mounts {
        Some(m) => m.apply(&mut slots, true),
        None => Ok(()),
    };
    ids(&mut ctx, plan, fds);
    if let (Ok(()), Some(m)) = (mounted, &plan.mounts) {
        mounted = m.apply(&mut slots, false);
    }
    plan.slots = slots;
    match mounted {
        Ok(()) if plan.mounts.is_some() => ctx.applied |= bit::MOUNTS,
        Err((op, e)) if ctx.required & bit::MOUNTS != 0 => ctx.fail(Stage::Mount, op as u32, e),
        _ => {}
    }
    if let Some(name) = plan.hostname {
        let r = sys::sethostname(name);
        ctx.layer(bit::HOSTNAME, Stage::Hostname, 0, r);
    }
    if plan.loopback {
        let r = sys::loopback_up();
        ctx.layer(bit::LOOPBACK, Stage::Loopback, 0, r);
    }
    if let Some(port) = plan.bridge_port
        && fds.bridge >= 0
    {
        // Created here, in the sandbox's network namespace, then owned by the parent
        // alone: neither init nor the command keeps it.
        let r = sys::tcp_listen_loopback(port).and_then(|l| {
            let sent = sys::send_fd(fds.bridge, l);
            sys::close(l);
            sent
        });
        sys::close(fds.bridge);
        ctx.layer(bit::BRIDGE, Stage::Bridge, 0, r);
    }

    if !plan.pid_ns {
        command(ctx, plan)
    }
    // We are pid 1 of the new namespace. Keep the command from ptracing us.
    let _ = sys::prctl(libc::PR_SET_DUMPABLE, 0, 0);
    let stack: *mut Vec<u8> = &mut plan.vfork_stack;
    let plan: &ChildPlan = plan;
    let mut args = CommandArgs { ctx, plan };
    // SAFETY: the stack Vec is not otherwise borrowed: `plan` is only read through
    // fields other than `vfork_stack` from here on.
    let stack = unsafe { &mut *stack };
    let cmd = match sys::vfork_on(stack, command_entry, (&mut args as *mut CommandArgs).cast()) {
        Ok(pid) => pid,
        Err(e) => ctx.fail(Stage::Fork, 0, e),
    };
    // init: hold nothing the command's output or exec report depends on.
    sys::close(fds.exec_w);
    if ruleset >= 0 {
        sys::close(ruleset);
    }
    for fd in 0..3 {
        sys::close(fd);
    }
    init_loop(cmd, fds.status_w)
}

/// The user namespace's maps and, for a root parent, the switch to the sandbox uid.
/// Runs between the mount plan's cloning steps and the rest (see
/// [`super::mounts::MountPlan::apply`]).
fn ids(ctx: &mut Ctx, plan: &ChildPlan, fds: ChildFds) {
    match &plan.id_maps {
        Some(IdMaps::Own {
            uid_map, gid_map, ..
        }) => {
            let r = write_file(c"/proc/self/setgroups", b"deny")
                .and_then(|()| write_file(c"/proc/self/uid_map", uid_map))
                .and_then(|()| write_file(c"/proc/self/gid_map", gid_map));
            ctx.layer(bit::ID_MAP, Stage::IdMap, 0, r);
        }
        Some(IdMaps::ByParent { uid, .. }) => {
            // The parent writes one byte once the maps are in place; end-of-file means
            // it could not. Then drop host root's identity: the uid and gid of the map
            // and no supplementary groups (group 0 would still read root:root 0640).
            let mut byte = [0u8; 1];
            let r = match sys::read(fds.release, &mut byte) {
                Ok(1) => sys::become_user(*uid, *uid).and_then(|()| rearm_death_signal(fds)),
                Ok(_) => Err(libc::EPIPE),
                Err(e) => Err(e),
            };
            sys::close(fds.release);
            ctx.layer(bit::ID_MAP, Stage::IdMap, 0, r);
        }
        None => {}
    }
}

/// A change of credentials clears `PR_SET_PDEATHSIG`: set it again, then make sure
/// the harness did not die in between (its end of the exec pipe would be closed).
fn rearm_death_signal(fds: ChildFds) -> Result<(), Errno> {
    sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0)?;
    if sys::peer_closed(fds.exec_w) {
        sys::exit(125);
    }
    Ok(())
}

/// Reap every child; when the command exits, report its status and exit with it.
fn init_loop(cmd: libc::pid_t, status_w: RawFd) -> ! {
    loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        match sys::wait_any(&mut status, &mut usage) {
            Ok(pid) if pid == cmd => {
                let ms = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
                Report {
                    kind: KIND_STATUS,
                    status,
                    cpu_ms: ms(usage.ru_utime) + ms(usage.ru_stime),
                    ..Report::default()
                }
                .send(status_w);
                let code = if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    128 + libc::WTERMSIG(status)
                };
                sys::exit(code)
            }
            Ok(_) => {}
            Err(_) => sys::exit(125),
        }
    }
}

/// What the vfork'ed command process gets.
struct CommandArgs<'a> {
    ctx: Ctx,
    plan: &'a ChildPlan,
}

extern "C" fn command_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the CommandArgs on init's stack; init is suspended (vfork)
    // until this process execs or exits, so it stays valid and unaliased.
    let args = unsafe { &*(arg as *const CommandArgs<'_>) };
    command(args.ctx, args.plan)
}

/// The command process: session, limits, capabilities, Landlock, seccomp, exec.
fn command(mut ctx: Ctx, plan: &ChildPlan) -> ! {
    sys::reset_signals(plan.ignored_signals);
    if plan.setsid {
        let r = sys::setsid();
        ctx.layer(bit::SETSID, Stage::Setsid, 0, r);
    }
    let mut limits = Ok(());
    for (i, &(res, soft, hard)) in plan.rlimits.iter().enumerate() {
        if let Err(e) = sys::setrlimit(res, soft, hard) {
            limits = Err(e);
            if ctx.required & bit::RLIMITS != 0 {
                ctx.fail(Stage::Rlimit, i as u32, e);
            }
        }
    }
    ctx.layer(bit::RLIMITS, Stage::Rlimit, 0, limits);
    let r = sys::chdir(&plan.workdir);
    ctx.layer(bit::CHDIR, Stage::Chdir, 0, r);
    if let Some(last) = plan.drop_caps {
        let r = sys::drop_capabilities(last);
        ctx.layer(bit::CAPS, Stage::Caps, 0, r);
    }
    let r = sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0).map(drop);
    ctx.layer(bit::NNP, Stage::NoNewPrivs, 0, r);
    if let Some(ll) = &plan.landlock {
        let mut r = Ok(());
        for (path, access) in &ll.rules {
            r = r.and_then(|()| sys::landlock_add_path(ll.fd(), path, *access));
        }
        let r = r.and_then(|()| sys::landlock_restrict_self(ll.fd()));
        sys::close(ll.fd());
        ctx.layer(bit::LANDLOCK, Stage::Landlock, 0, r);
    }
    let r = sys::close_range(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
    ctx.layer(bit::FDS, Stage::Fds, 0, r);
    if !plan.seccomp.is_empty() {
        let mut r = Ok(());
        for prog in &plan.seccomp {
            r = r.and_then(|()| sys::seccomp_install(prog));
        }
        ctx.layer(bit::SECCOMP, Stage::Seccomp, 0, r);
    }
    Report {
        kind: KIND_LAYERS,
        applied: ctx.applied,
        ..Report::default()
    }
    .send(ctx.exec_w);
    // execvp semantics: skip candidates that are missing or not executable, and
    // report EACCES if one existed but could not be executed.
    let mut last = libc::ENOENT;
    let mut denied = false;
    for path in &plan.exec.candidates {
        last = sys::execve(path, plan.exec.argv(), plan.exec.envp());
        denied |= last == libc::EACCES;
        if !matches!(last, libc::ENOENT | libc::ENOTDIR | libc::EACCES) {
            break;
        }
    }
    if denied && matches!(last, libc::ENOENT | libc::ENOTDIR) {
        last = libc::EACCES;
    }
    Report {
        kind: KIND_EXEC_FAILED,
        errno: last,
        applied: ctx.applied,
        ..Report::default()
    }
    .send(ctx.exec_w);
    sys::exit(127)
}

/// Write `data` to an existing file.
fn write_file(path: &std::ffi::CStr, data: &[u8]) -> Result<(), Errno> {
    let fd = sys::open(path, libc::O_WRONLY | libc::O_CLOEXEC, 0)?;
    let r = sys::write_all(fd, data);
    sys::close(fd);
    r
}
