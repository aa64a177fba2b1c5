//! The seccomp filter: compiled with seccompiler in the parent, installed by the
//! child with one raw `seccomp(2)` call per program.
//!
//! Denied (EPERM): io_uring, ptrace, process_vm_readv/writev, the whole mount family
//! (old and new API), setns, namespace flags on unshare/clone, keyctl and friends,
//! bpf, perf_event_open, kexec, module loading, userfaultfd, `memfd_create`,
//! `memfd_secret` and SysV `shmget` (memory no cap could count without a memory
//! cgroup: a memfd can outlive every fd and mapping in flight in a unix socket),
//! `AF_VSOCK` sockets, and
//! the TIOCSTI/TIOCLINUX ioctls — compared on the low 32 bits only, because the
//! kernel truncates the request number to an `unsigned int` and a 64-bit comparison
//! is bypassed by setting a high bit. Without a private network namespace, IPv4 and
//! IPv6 sockets are denied as well.
//!
//! No file gets a setuid or setgid bit from inside: `chmod`, `fchmod`, `fchmodat`,
//! `fchmodat2`, and `open`/`openat`/`creat`/`mknod`/`mknodat` with such a bit in their
//! mode are refused (EPERM). A root harness's workspace is idmapped, so what a
//! command creates is owned by host root on disk: a setuid bit set there would be a
//! setuid-root binary on the host for as long as the session runs, before the sweep
//! after it could clear it. (`openat2` passes its mode in memory: ENOSYS, and libc
//! falls back to `openat`.)
//!
//! `clone3` passes its flags in memory, where a filter cannot read them, so it fails
//! with ENOSYS: libc then falls back to `clone`, whose flags are checked.
//!
//! Every program begins with seccompiler's architecture check: a syscall made through
//! another ABI (i386 `int 0x80` from a 64-bit process) kills the process. x32 system
//! call numbers are refused by a small extra program.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::SandboxError;

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;
#[cfg(target_arch = "riscv64")]
const ARCH: TargetArch = TargetArch::riscv64;

/// `AF_VSOCK`.
const AF_VSOCK: u64 = 40;
/// `TIOCSTI`: push a byte into a terminal's input queue.
pub(crate) const TIOCSTI: u64 = 0x5412;
/// `TIOCLINUX`: console tricks, including selection paste.
pub(crate) const TIOCLINUX: u64 = 0x541C;

const NAMESPACE_FLAGS: [u64; 8] = [
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
    0x80, // CLONE_NEWTIME
];

/// System calls denied outright.
const DENIED: &[libc::c_long] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_setns,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_userfaultfd,
    // Anonymous memory outside every mount: the memory monitor, which counts the
    // tree's resident memory and its tmpfs mounts, could not see it (see tmpfs.rs).
    libc::SYS_memfd_create,
    libc::SYS_memfd_secret,
    libc::SYS_shmget,
];

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    Ok(SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        op,
        value,
    )?)
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    Ok(SeccompRule::new(conds)?)
}

/// `fchmodat2(2)` (Linux 6.6), the same number on every architecture of the generic
/// table.
const SYS_FCHMODAT2: libc::c_long = 452;

/// A rule per bit: the mode argument `arg` carries `S_ISUID` or `S_ISGID`.
fn set_id_rules(arg: u8) -> Result<Vec<SeccompRule>, SandboxError> {
    [libc::S_ISUID as u64, libc::S_ISGID as u64]
        .iter()
        .map(|&bit| rule(vec![cond(arg, SeccompCmpOp::MaskedEq(bit), bit)?]))
        .collect()
}

/// The system calls that set a file's mode, each with the index of its mode argument.
fn mode_setting_calls() -> Vec<(libc::c_long, u8)> {
    let mut calls = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (SYS_FCHMODAT2, 2),
        (libc::SYS_openat, 3),
        (libc::SYS_mknodat, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_chmod, 1),
        (libc::SYS_open, 2),
        (libc::SYS_creat, 1),
        (libc::SYS_mknod, 1),
    ]);
    calls
}

fn flag_rules(arg: u8) -> Result<Vec<SeccompRule>, SandboxError> {
    NAMESPACE_FLAGS
        .iter()
        .map(|&f| rule(vec![cond(arg, SeccompCmpOp::MaskedEq(f), f)?]))
        .collect()
}

/// The programs, compiled once per variant. `deny_inet` also refuses IPv4/IPv6
/// sockets.
pub(crate) fn programs(deny_inet: bool) -> Result<Vec<Vec<libc::sock_filter>>, SandboxError> {
    type Compiled = Result<Vec<Vec<libc::sock_filter>>, String>;
    static CACHE: [OnceLock<Compiled>; 2] = [OnceLock::new(), OnceLock::new()];
    CACHE[usize::from(deny_inet)]
        .get_or_init(|| compile(deny_inet).map_err(|e| e.to_string()))
        .clone()
        .map_err(|e| SandboxError::Spawn {
            stage: "seccomp filter",
            source: std::io::Error::other(e),
        })
}

fn compile(deny_inet: bool) -> Result<Vec<Vec<libc::sock_filter>>, SandboxError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in DENIED {
        rules.insert(nr, Vec::new());
    }
    for (nr, arg) in mode_setting_calls() {
        rules.insert(nr, set_id_rules(arg)?);
    }
    rules.insert(libc::SYS_unshare, flag_rules(0)?);
    rules.insert(libc::SYS_clone, flag_rules(0)?);
    let mut sockets = vec![rule(vec![cond(0, SeccompCmpOp::Eq, AF_VSOCK)?])?];
    if deny_inet {
        for family in [libc::AF_INET, libc::AF_INET6] {
            sockets.push(rule(vec![cond(0, SeccompCmpOp::Eq, family as u64)?])?);
        }
    }
    rules.insert(libc::SYS_socket, sockets);
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, SeccompCmpOp::Eq, TIOCSTI)?])?,
            rule(vec![cond(1, SeccompCmpOp::Eq, TIOCLINUX)?])?,
        ],
    );
    let deny = SeccompFilter::new(
        rules.clone(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        ARCH,
    )?;
    let denied: Vec<u32> = rules.keys().map(|&nr| nr as u32).collect();
    let deny: BpfProgram = deny.try_into()?;
    Ok(merge(to_libc(deny), nosys(), &denied))
}

/// The extra program of a [`crate::RunSpec::single_process`] command: `fork`,
/// `vfork`, `execveat`, a `clone` without `CLONE_THREAD` (a new process, not a
/// thread) and an `execve` whose path is not at one of `allowed` — the addresses of
/// the command's own exec candidates, in the memory of the process that installs the
/// filter and execs once — are refused (EPERM). A later image cannot name those
/// addresses: they are not in its memory and guessing one byte-exact address of a
/// randomized heap is out of reach. `clone3` is left to the main program's ENOSYS,
/// so glibc's threads fall back to `clone`, which this program checks.
pub(crate) fn single_process(allowed: &[u64]) -> Result<Vec<libc::sock_filter>, SandboxError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    #[cfg(target_arch = "x86_64")]
    for nr in [libc::SYS_fork, libc::SYS_vfork] {
        rules.insert(nr, Vec::new());
    }
    rules.insert(libc::SYS_execveat, Vec::new());
    let thread = libc::CLONE_THREAD as u64;
    rules.insert(
        libc::SYS_clone,
        vec![rule(vec![cond(0, SeccompCmpOp::MaskedEq(thread), 0)?])?],
    );
    let exec = if allowed.is_empty() {
        Vec::new()
    } else {
        let conds = allowed
            .iter()
            .map(|&a| {
                Ok(SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::Ne,
                    a,
                )?)
            })
            .collect::<Result<Vec<_>, SandboxError>>()?;
        vec![rule(conds)?]
    };
    rules.insert(libc::SYS_execve, exec);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        ARCH,
    )?;
    let prog: BpfProgram = filter.try_into()?;
    Ok(to_libc(prog))
}

/// One program instead of two (each installed filter is JIT-compiled and evaluated
/// on every system call): the ENOSYS checks are spliced in right after
/// seccompiler's three-instruction architecture check, which jumps over its `kill`
/// straight to them. BPF jumps are relative and forward, so seccompiler's own jumps,
/// all after the splice point, are unaffected. If the prefix is not the expected
/// one, the two programs are kept separate.
fn merge(
    main: Vec<libc::sock_filter>,
    nosys: Vec<libc::sock_filter>,
    denied: &[u32],
) -> Vec<Vec<libc::sock_filter>> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    let arch_check = main.len() > 3
        && main[0].code == LD_W_ABS
        && main[0].k == 4
        && main[1].code == JEQ_K
        && main[1].k == AUDIT_ARCH
        && (main[1].jt, main[1].jf) == (1, 0);
    if !arch_check {
        return vec![main, nosys];
    }
    // nosys = [ld arch, jeq arch, ret allow, <checks...>, ret enosys, ret allow]:
    // keep the checks and the ENOSYS return; fall through to `main` instead of
    // allowing.
    let body = &nosys[3..nosys.len() - 1];
    let mut out = Vec::with_capacity(main.len() + body.len());
    out.extend_from_slice(&main[..3]);
    out.extend_from_slice(body);
    out.extend(dispatch(denied).unwrap_or_default());
    out.extend_from_slice(&main[3..]);
    vec![out]
}

/// A binary search over the denied system call numbers that allows every other
/// number in a handful of instructions, before seccompiler's linear chain. The
/// kernel evaluates a new filter for every system call number when it is installed
/// (to cache the always-allowed ones), so the chain's length was paid about 450
/// times per sandbox. Denied numbers fall through to the chain, which decides on
/// their arguments. `None` if a jump would not fit BPF's 8-bit offsets.
fn dispatch(denied: &[u32]) -> Option<Vec<libc::sock_filter>> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGT_K: u16 = 0x25;
    const RET_K: u16 = 0x06;
    fn emit(out: &mut Vec<libc::sock_filter>, leaves: &mut Vec<usize>, nrs: &[u32]) {
        let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
        if let [nr] = nrs {
            leaves.push(out.len());
            out.push(op(JEQ_K, 0, 0, *nr)); // jt patched to the chain below
            out.push(op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW));
            return;
        }
        let mid = nrs.len() / 2;
        let at = out.len();
        out.push(op(JGT_K, 0, 0, nrs[mid - 1]));
        emit(out, leaves, &nrs[..mid]);
        let right = out.len() - at - 1;
        out[at].jt = u8::try_from(right).unwrap_or(u8::MAX);
        emit(out, leaves, &nrs[mid..]);
    }
    let mut nrs = denied.to_vec();
    nrs.sort_unstable();
    nrs.dedup();
    if nrs.is_empty() {
        return Some(Vec::new());
    }
    let mut out = vec![libc::sock_filter {
        code: LD_W_ABS,
        jt: 0,
        jf: 0,
        k: 0, // seccomp_data.nr
    }];
    let mut leaves = Vec::new();
    emit(&mut out, &mut leaves, &nrs);
    let end = out.len();
    for leaf in leaves {
        out[leaf].jt = u8::try_from(end - leaf - 1).ok()?;
    }
    let fits = out.iter().all(|f| f.jt < u8::MAX);
    fits.then_some(out)
}

fn to_libc(p: BpfProgram) -> Vec<libc::sock_filter> {
    p.into_iter()
        .map(|f| libc::sock_filter {
            code: f.code,
            jt: f.jt,
            jf: f.jf,
            k: f.k,
        })
        .collect()
}

/// `AUDIT_ARCH_*` of this build.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(target_arch = "riscv64")]
const AUDIT_ARCH: u32 = 0xC000_00F3;

/// `openat2(2)`, the same number on every architecture of the generic table.
const SYS_OPENAT2: u32 = 437;

/// The ENOSYS program, written by hand because seccompiler has one action per
/// filter: `clone3` (so libc falls back to `clone`), `openat2` (whose mode a filter
/// cannot read; libc falls back to `openat`) and, on x86_64, x32 system call
/// numbers (bit 30) look unimplemented. A foreign architecture is left to the main
/// program, which kills it.
fn nosys() -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let allow = libc::SECCOMP_RET_ALLOW;
    let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    // x32 numbers only exist on x86_64; elsewhere the comparison never matches.
    let x32 = if cfg!(target_arch = "x86_64") {
        0x4000_0000
    } else {
        u32::MAX
    };
    vec![
        op(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        op(JEQ_K, 1, 0, AUDIT_ARCH),
        op(RET_K, 0, 0, allow),
        op(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        op(JGE_K, 2, 0, x32),
        op(JEQ_K, 1, 0, libc::SYS_clone3 as u32),
        op(JEQ_K, 0, 1, SYS_OPENAT2),
        op(RET_K, 0, 0, enosys),
        op(RET_K, 0, 0, allow),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Evaluate a classic BPF program (the subset we emit) on a system call number.
    fn eval(prog: &[libc::sock_filter], nr: u32) -> u32 {
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let f = prog[pc];
            match f.code {
                0x20 => acc = if f.k == 0 { nr } else { AUDIT_ARCH },
                0x15 | 0x25 | 0x35 => {
                    let hit = match f.code {
                        0x15 => acc == f.k,
                        0x25 => acc > f.k,
                        _ => acc >= f.k,
                    };
                    pc += usize::from(if hit { f.jt } else { f.jf });
                }
                0x06 => return f.k,
                other => panic!("unexpected opcode {other:#x} at {pc}"),
            }
            pc += 1;
        }
    }

    #[test]
    fn dispatch_allows_the_rest_and_falls_through_for_denied() {
        let denied = [16u32, 41, 56, 101, 272, 425, 426, 427, 435];
        let mut prog = dispatch(&denied).unwrap();
        let marker = 0xDEAD;
        prog.push(libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: marker,
        });
        for nr in 0..500u32 {
            let want = if denied.contains(&nr) {
                marker
            } else {
                libc::SECCOMP_RET_ALLOW
            };
            assert_eq!(eval(&prog, nr), want, "syscall {nr}");
        }
        assert!(prog.len() < 4 * denied.len());
    }

    #[test]
    fn programs_compile_and_start_with_the_arch_check() {
        for deny_inet in [false, true] {
            let progs = programs(deny_inet).unwrap();
            assert_eq!(progs.len(), 1, "the ENOSYS checks were not spliced in");
            // seccompiler's arch check: load seccomp_data.arch (offset 4).
            assert_eq!(progs[0][0].k, 4);
            assert!(progs.iter().all(|p| p.len() < 4096));
        }
    }
}
