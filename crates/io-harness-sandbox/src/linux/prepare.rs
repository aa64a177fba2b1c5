//! Turn a [`RunSpec`] into a [`ChildPlan`] for the native backend or the floor.
//!
//! Everything that touches the host filesystem to decide (canonical paths, which
//! toolchain directories exist, which host sockets listen, the `PATH` search) is
//! done here, in the parent, so the child has no decision left to make.

use std::ffi::CString;
use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::caps::WatchPlan;
use super::cgroup::{self, SandboxCgroup};
use super::disk::DiskWatch;
use super::host::{HostFacts, cap_last, host_facts, ignored_signals, mount_inputs};
use super::landlock::{self as ll, Rules, Shape};
use super::mounts::{DEVICES, MountPlan};
use super::plan::{ChildPlan, ExecPlan, IdMaps, LandlockChild, bit};
use super::seccomp;
use crate::env::{DEFAULT_PATH, EnvBase, build_env};
use crate::{
    Cap, CpuAccounting, LandlockReport, LayerReport, LimitReport, Namespace, NetworkPosture,
    ProxyBridge, RunSpec, SandboxError, Teardown,
};

/// Test-only layer switches, as bits. Always zero outside the
/// `sandbox-test-disable-layers` feature.
pub(crate) mod off {
    pub const SECCOMP: u32 = 1 << 0;
    pub const LANDLOCK: u32 = 1 << 1;
    pub const NETNS: u32 = 1 << 2;
    pub const PIDNS: u32 = 1 << 3;
    pub const MOUNTNS: u32 = 1 << 4;
    pub const CGROUP: u32 = 1 << 5;
    pub const SETSID: u32 = 1 << 6;
    pub const CAPS: u32 = 1 << 7;
    pub const IPCNS: u32 = 1 << 8;
    pub const UTSNS: u32 = 1 << 9;
    pub const RLIMITS: u32 = 1 << 10;
    pub const TMPFS: u32 = 1 << 11;
    pub const DISK_WATCH: u32 = 1 << 12;
    pub const CPU_TREE: u32 = 1 << 13;
    pub const UIDMAP: u32 = 1 << 14;
    pub const SETUID_CLEAR: u32 = 1 << 15;
}

/// Which backend is being prepared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Native,
    Floor,
}

/// A plan plus what the parent needs to supervise and report.
pub(crate) struct Prepared {
    pub plan: ChildPlan,
    /// Parent-side layer facts; the child's `applied` bits complete it.
    pub base: LayerReport,
    pub landlock: LandlockReport,
    pub cgroup: Option<SandboxCgroup>,
    /// The floor's private directory, removed at teardown.
    pub private_dir: Option<PathBuf>,
    /// The caps the parent enforces by watching (memory without a memory cgroup,
    /// the CPU of the whole tree, the disk).
    pub watch: WatchPlan,
    /// The egress proxy's unix socket, when the child sets up a bridge to it.
    pub bridge_to: Option<PathBuf>,
    /// Where setuid and setgid bits are cleared after the session (the workspace and
    /// the extra writable directories); empty when the test switch turns it off.
    pub setuid_roots: Vec<PathBuf>,
}

fn cstring(p: &Path) -> Result<CString, SandboxError> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| SandboxError::invalid("a NUL byte in a path"))
}

/// The extra writable directories, canonical; each must be an existing directory
/// other than `/`.
fn writable(spec: &RunSpec) -> Result<Vec<PathBuf>, SandboxError> {
    spec.writable_paths
        .iter()
        .map(|p| {
            let c = fs::canonicalize(p)
                .map_err(|e| SandboxError::invalid(format!("writable {}: {e}", p.display())))?;
            if !c.is_dir() || c == Path::new("/") {
                return Err(SandboxError::invalid(format!(
                    "writable {} must be a directory other than /",
                    p.display()
                )));
            }
            Ok(c)
        })
        .collect()
}

/// Validate and canonicalize the workdir.
fn workdir(spec: &RunSpec) -> Result<PathBuf, SandboxError> {
    if spec.argv.is_empty() || spec.argv[0].is_empty() {
        return Err(SandboxError::invalid("argv is empty"));
    }
    let wd = fs::canonicalize(&spec.workdir)
        .map_err(|e| SandboxError::invalid(format!("workdir {}: {e}", spec.workdir.display())))?;
    if !wd.is_dir() {
        return Err(SandboxError::invalid(format!(
            "workdir {} is not a directory",
            wd.display()
        )));
    }
    if wd == Path::new("/") {
        return Err(SandboxError::invalid("the workdir cannot be /"));
    }
    Ok(wd)
}

/// `execve` candidates for `argv[0]`, searched in the child's `PATH`.
fn candidates(argv0: &str, env: &[(String, String)]) -> Result<Vec<CString>, SandboxError> {
    let to_c =
        |s: &str| CString::new(s).map_err(|_| SandboxError::invalid("a NUL byte in argv[0]"));
    if argv0.contains('/') {
        return Ok(vec![to_c(argv0)?]);
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or(DEFAULT_PATH, |(_, v)| v.as_str());
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| to_c(&format!("{}/{argv0}", d.trim_end_matches('/'))))
        .collect()
}

fn rlimits(spec: &RunSpec, nproc: bool) -> (Vec<(libc::c_int, u64, u64)>, Vec<&'static str>) {
    let mut out = vec![(libc::RLIMIT_CORE as libc::c_int, 0, 0)];
    let mut names = vec!["core"];
    if let Some(cpu) = spec.limits.cpu_secs {
        // Soft at the cap (SIGXCPU), hard one second later (SIGKILL).
        out.push((libc::RLIMIT_CPU as libc::c_int, cpu, cpu.saturating_add(1)));
        names.push("cpu");
    }
    if let Some(n) = spec.limits.open_files {
        out.push((libc::RLIMIT_NOFILE as libc::c_int, n, n));
        names.push("nofile");
    }
    if let Some(n) = spec.limits.disk_bytes {
        // No single file grows past the disk cap; the watcher sees the rest.
        out.push((libc::RLIMIT_FSIZE as libc::c_int, n, n));
        names.push("fsize");
    }
    if nproc && let Some(n) = spec.limits.processes {
        out.push((libc::RLIMIT_NPROC as libc::c_int, n, n));
        names.push("nproc");
    }
    (out, names)
}

/// The namespaces a child gets, and the network arrangement that follows from them.
struct Namespaces {
    clone_flags: u64,
    list: Vec<Namespace>,
    /// A pooled network namespace (loopback already up), joined instead of a new one.
    pooled_net: Option<OwnedFd>,
    /// Bring loopback up in a fresh network namespace.
    loopback: bool,
    /// The egress proxy bridge, when the child has a private network to run it in.
    bridge: Option<ProxyBridge>,
    /// No private network and not `Open`: seccomp and Landlock refuse inet sockets.
    deny_inet: bool,
}

impl Namespaces {
    fn has(&self, ns: Namespace) -> bool {
        self.list.contains(&ns)
    }
}

/// Phase 1: which namespaces to unshare, and the network that follows.
fn namespaces(spec: &RunSpec, native: bool, on: impl Fn(u32) -> bool) -> Namespaces {
    let mut flags = 0u64;
    let mut list = Vec::new();
    if native {
        flags |= libc::CLONE_NEWUSER as u64;
        list.push(Namespace::User);
        for (b, f, ns) in [
            (off::MOUNTNS, libc::CLONE_NEWNS, Namespace::Mount),
            (off::PIDNS, libc::CLONE_NEWPID, Namespace::Pid),
            (off::NETNS, libc::CLONE_NEWNET, Namespace::Net),
            (off::IPCNS, libc::CLONE_NEWIPC, Namespace::Ipc),
            (off::UTSNS, libc::CLONE_NEWUTS, Namespace::Uts),
        ] {
            if on(b) && (ns != Namespace::Net || spec.network != NetworkPosture::Open) {
                flags |= f as u64;
                list.push(ns);
            }
        }
    }
    let private_net = list.contains(&Namespace::Net);
    // Root: a pooled namespace (loopback already up) instead of a new one.
    let pooled_net = if private_net {
        super::netns::take()
    } else {
        None
    };
    if pooled_net.is_some() {
        flags &= !(libc::CLONE_NEWNET as u64);
    }
    let loopback = private_net && pooled_net.is_none();
    // An allowlist without a private namespace (the floor, or the layer switched off
    // in a test) has no bridge: it is held to no network at all, like `None`.
    let bridge = match (&spec.network, &spec.proxy) {
        (NetworkPosture::Allowlist, Some(p)) if private_net => Some(p.clone()),
        _ => None,
    };
    let deny_inet = spec.network != NetworkPosture::Open && !private_net;
    Namespaces {
        clone_flags: flags,
        list,
        pooled_net,
        loopback,
        bridge,
        deny_inet,
    }
}

/// Where the child's `HOME` and `TMPDIR` are, and what it execs with.
struct Environment {
    inside_home: PathBuf,
    /// The floor's private directory, removed at teardown.
    private_dir: Option<PathBuf>,
    exec: ExecPlan,
}

/// Phase 2: private directories (the floor's, or the mount namespace's own) and the
/// environment, with `argv[0]` resolved in the child's `PATH`.
fn environment(
    spec: &RunSpec,
    private_mounts: bool,
    facts: &HostFacts,
) -> Result<Environment, SandboxError> {
    let home = facts.home.as_deref();
    let (inside_home, inside_tmp, private_dir) = if private_mounts {
        (
            home.map_or_else(|| PathBuf::from("/tmp"), Path::to_path_buf),
            PathBuf::from("/tmp"),
            None,
        )
    } else {
        let base = floor_dir()?;
        (base.join("home"), base.join("tmp"), Some(base))
    };
    let mut default_path = DEFAULT_PATH.to_owned();
    if let Some(c) = &facts.cargo_home {
        let cargo_bin = c.join("bin");
        if cargo_bin.is_dir() {
            default_path = format!("{}:{default_path}", cargo_bin.display());
        }
    }
    let env = build_env(
        &spec.env,
        spec.network,
        &EnvBase {
            home: &inside_home,
            tmpdir: &inside_tmp,
            default_path,
        },
    )?;
    let exec = ExecPlan::new(&spec.argv, &env, candidates(&spec.argv[0], &env)?)?;
    Ok(Environment {
        inside_home,
        private_dir,
        exec,
    })
}

/// Phase 4: the Landlock ruleset (none when switched off or unsupported), and its
/// report.
fn landlock(
    enabled: bool,
    deny_inet: bool,
    with_mounts: bool,
    (wd, extra): (&Path, &[PathBuf]),
    env: &Environment,
) -> Result<(Option<LandlockChild>, LandlockReport), SandboxError> {
    let shape = Shape {
        deny_net: deny_inet,
        scoped: true,
    };
    let devices: Vec<PathBuf> = DEVICES.iter().map(|d| Path::new("/dev").join(d)).collect();
    // With the fresh root, reads are allowed from its root down (the host root's
    // inode is not above any path of the view).
    let (child_writable, child_ttys, writable): (Vec<PathBuf>, Vec<PathBuf>, Vec<&Path>) =
        if with_mounts {
            let mut w = vec![PathBuf::from("/tmp"), PathBuf::from("/dev/shm")];
            w.push(env.inside_home.clone());
            let mut host = vec![wd];
            host.extend(extra.iter().map(PathBuf::as_path));
            (w, vec![PathBuf::from("/dev/pts")], host)
        } else {
            let base = env.private_dir.as_deref().unwrap_or(wd);
            let mut host = vec![wd, base];
            host.extend(extra.iter().map(PathBuf::as_path));
            (Vec::new(), Vec::new(), host)
        };
    let child_readable = if with_mounts {
        vec![PathBuf::from("/")]
    } else {
        Vec::new()
    };
    let prepared = if enabled {
        ll::prepare(&Rules {
            shape,
            writable,
            devices,
            child_writable,
            child_ttys,
            child_readable,
        })?
    } else {
        None
    };
    Ok(match prepared {
        Some((c, r)) => (Some(c), r),
        None => (
            None,
            LandlockReport {
                abi: ll::abi(),
                ..LandlockReport::default()
            },
        ),
    })
}

/// The resource limits: rlimits for the child, the cgroup, what the parent watches,
/// and what they enforce.
struct Limits {
    rlimits: Vec<(libc::c_int, u64, u64)>,
    cgroup: Option<SandboxCgroup>,
    watch: WatchPlan,
    report: LimitReport,
}

/// Phase 6: rlimits, the cgroup and the parent's watches, and the caps and teardown
/// they make good. `writable` are the host directories the command may write (the
/// disk cap's roots).
fn limits(
    spec: &RunSpec,
    on: impl Fn(u32) -> bool,
    ns: &Namespaces,
    writable: Vec<PathBuf>,
) -> Result<Limits, SandboxError> {
    // RLIMIT_NPROC counts per (user namespace, uid), so in a fresh user namespace it
    // is a per-sandbox cap — except for uid 0, which the kernel never holds to it.
    // SAFETY: geteuid has no preconditions.
    let nproc = ns.has(Namespace::User) && unsafe { libc::geteuid() } != 0;
    let (rlimits, rlimit_names) = if on(off::RLIMITS) {
        rlimits(spec, nproc)
    } else {
        (Vec::new(), Vec::new())
    };
    let support = cgroup::support();
    let cgroup = if on(off::CGROUP) {
        SandboxCgroup::create(support, spec.limits.processes, spec.limits.memory_bytes)?
    } else {
        None
    };
    let controllers = cgroup
        .as_ref()
        .map(SandboxCgroup::controllers)
        .unwrap_or_default();
    use crate::CgroupController as C;
    let cg_memory = controllers
        .iter()
        .any(|c| matches!(c, C::V1Memory | C::V2Memory));
    let cg_pids = controllers
        .iter()
        .any(|c| matches!(c, C::V1Pids | C::V2Pids));
    let memory_monitor = spec.limits.memory_bytes.is_some() && !cg_memory;
    let nproc_only = rlimit_names.contains(&"nproc") && !cg_pids;
    let cpu_stat = cgroup.as_ref().and_then(SandboxCgroup::cpu_stat);
    let cpu_tree = spec.limits.cpu_secs.filter(|_| on(off::CPU_TREE)).map(|_| {
        if cpu_stat.is_some() {
            CpuAccounting::CgroupCpuStat
        } else {
            CpuAccounting::ProcTree
        }
    });
    let watch = WatchPlan {
        memory: spec.limits.memory_bytes.filter(|_| memory_monitor),
        tmpfs: memory_monitor && ns.has(Namespace::Mount) && on(off::TMPFS),
        cpu_ms: cpu_tree
            .and(spec.limits.cpu_secs)
            .map(|s| s.saturating_mul(1000)),
        cpu_stat,
        nproc: spec.limits.processes.filter(|_| nproc_only),
        disk: spec
            .limits
            .disk_bytes
            .filter(|_| on(off::DISK_WATCH))
            .map(|cap| DiskWatch::new(cap, writable)),
        init_root: ns.has(Namespace::Pid),
    };
    let enforced = enforced(spec, &rlimit_names, cg_pids, &watch);
    let mut unobservable = Vec::new();
    if enforced.contains(&Cap::OpenFiles) {
        unobservable.push(Cap::OpenFiles);
    }
    if enforced.contains(&Cap::Processes) && nproc_only {
        unobservable.push(Cap::Processes);
    }
    let mut teardown = Vec::new();
    if ns.has(Namespace::Pid) {
        teardown.push(Teardown::PidNamespace);
    }
    if cgroup.is_some() {
        teardown.push(Teardown::Cgroup);
    }
    if !ns.has(Namespace::Pid) {
        teardown.push(Teardown::ProcessGroup);
    }
    let report = LimitReport {
        cgroup: controllers,
        rlimits: rlimit_names,
        memory_monitor,
        cpu_tree,
        disk_watch: watch.disk.is_some(),
        enforced,
        unobservable,
        teardown,
    };
    Ok(Limits {
        rlimits,
        cgroup,
        watch,
        report,
    })
}

/// The caps that something really enforces, given the rlimits set and whether the
/// cgroup has a pids controller (memory is always enforced: by cgroup or sampling;
/// CPU and disk by the parent's watches, whatever the rlimits).
fn enforced(spec: &RunSpec, rlimit_names: &[&str], cg_pids: bool, watch: &WatchPlan) -> Vec<Cap> {
    let mut enforced = Vec::new();
    if spec.limits.cpu_secs.is_some() && (watch.cpu_ms.is_some() || rlimit_names.contains(&"cpu")) {
        enforced.push(Cap::Cpu);
    }
    if spec.limits.memory_bytes.is_some() {
        enforced.push(Cap::Memory);
    }
    if spec.limits.wall_secs.is_some() {
        enforced.push(Cap::Wall);
    }
    if spec.limits.processes.is_some() && (cg_pids || rlimit_names.contains(&"nproc")) {
        enforced.push(Cap::Processes);
    }
    if spec.limits.open_files.is_some() && rlimit_names.contains(&"nofile") {
        enforced.push(Cap::OpenFiles);
    }
    if spec.limits.output_bytes.is_some() {
        enforced.push(Cap::Output);
    }
    if spec.limits.disk_bytes.is_some() && (watch.disk.is_some() || rlimit_names.contains(&"fsize"))
    {
        enforced.push(Cap::Disk);
    }
    enforced
}

/// The seccomp programs of a command (none with the layer off): the common filter,
/// and for a [`RunSpec::single_process`] command the program refusing other
/// processes and programs, allowing only an `execve` of the addresses of the paths
/// the command process itself will exec (a later image cannot know them).
fn filters(
    spec: &RunSpec,
    on: bool,
    deny_inet: bool,
    exec: &super::plan::ExecPlan,
) -> Result<Vec<Vec<libc::sock_filter>>, SandboxError> {
    if !on {
        return Ok(Vec::new());
    }
    let mut programs = seccomp::programs(deny_inet)?;
    if spec.single_process {
        let allowed: Vec<u64> = exec.candidates.iter().map(|c| c.as_ptr() as u64).collect();
        programs.push(seccomp::single_process(&allowed)?);
    }
    Ok(programs)
}

/// Prepare a child for `mode`. `disabled` holds test-only switches; `required`
/// false makes every layer best-effort (used by the probe).
///
/// The phases run in this order, each deciding from the host what the child will do:
/// namespaces, environment, mounts, Landlock, seccomp, limits.
pub(crate) fn prepare(
    mode: Mode,
    spec: &RunSpec,
    disabled: u32,
    required: bool,
) -> Result<Prepared, SandboxError> {
    let wd = workdir(spec)?;
    let native = mode == Mode::Native;
    let on = |b: u32| disabled & b == 0;
    let facts = host_facts();

    let ns = namespaces(spec, native, on);
    let ids = ns
        .has(Namespace::User)
        .then(|| id_maps(spec.uid, on(off::UIDMAP)))
        .transpose()?;
    let idmapped = matches!(ids, Some(IdMaps::ByParent { .. })) && ns.has(Namespace::Mount);
    let env = environment(spec, native && ns.has(Namespace::Mount), facts)?;
    // Phase 3: the mount plan, when the child gets a mount namespace.
    let mounts = if ns.has(Namespace::Mount) {
        let mut inputs = mount_inputs(spec, &wd, facts, idmapped);
        inputs.fresh_proc = ns.has(Namespace::Pid);
        Some(MountPlan::build(&inputs))
    } else {
        None
    };
    let extra = writable(spec)?;
    let (landlock_child, landlock_report) = landlock(
        on(off::LANDLOCK),
        ns.deny_inet,
        mounts.is_some(),
        (&wd, &extra),
        &env,
    )?;
    // Phase 5: the seccomp filters.
    let seccomp = filters(spec, on(off::SECCOMP), ns.deny_inet, &env.exec)?;
    let mut roots = vec![wd.clone()];
    roots.extend(extra.iter().cloned());
    roots.extend(env.private_dir.iter().cloned());
    let limits = limits(spec, on, &ns, roots)?;

    let mut slots = vec![-1; mounts.as_ref().map_or(0, |m| m.slots)];
    let premounted = premount(mounts.as_ref(), &mut slots, spec.uid)?;
    let keep = vec![-1; super::plan::KEEP_FIXED + premounted.len()];
    let base = LayerReport {
        namespaces: ns.list.clone(),
        host_uid: ids.as_ref().map(IdMaps::host_uid),
        limits: limits.report,
        ..LayerReport::default()
    };
    let mut setuid_roots = vec![wd.clone()];
    setuid_roots.extend(extra.iter().cloned());
    if !on(off::SETUID_CLEAR) {
        setuid_roots.clear();
    }
    let plan = ChildPlan {
        clone_flags: ns.clone_flags,
        netns: ns.pooled_net,
        pid_ns: ns.list.contains(&Namespace::Pid),
        id_maps: ids,
        hostname: ns
            .list
            .contains(&Namespace::Uts)
            .then_some(&b"io-harness"[..]),
        loopback: ns.loopback,
        bridge_port: ns.bridge.as_ref().map(|b| b.port),
        setsid: on(off::SETSID),
        rlimits: limits.rlimits,
        workdir: cstring(&wd)?,
        drop_caps: on(off::CAPS).then(cap_last),
        landlock: landlock_child,
        seccomp,
        exec: env.exec,
        required: if required { u32::MAX } else { 0 },
        slots,
        premounted,
        keep,
        ignored_signals: ignored_signals(),
        cgroup_procs: cgroup_procs(limits.cgroup.as_ref())?,
        vfork_stack: vec![0; super::plan::VFORK_STACK],
        mounts,
    };
    Ok(Prepared {
        plan,
        base,
        landlock: landlock_report,
        cgroup: limits.cgroup,
        private_dir: env.private_dir,
        watch: limits.watch,
        bridge_to: ns.bridge.map(|b| b.to_unix),
        setuid_roots,
    })
}

/// The user namespace maps. A root harness maps the command to `uid` (never 0),
/// which only the parent may write; anyone else maps its own uid and gid to
/// themselves, which the child may do itself. `change` false (a test switch) keeps a
/// root harness's own identity.
fn id_maps(uid: u32, change: bool) -> Result<IdMaps, SandboxError> {
    // SAFETY: geteuid/getegid have no preconditions.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if euid == 0 && change {
        if uid == 0 {
            return Err(SandboxError::invalid(
                "the sandbox uid cannot be 0: a command never runs as host root",
            ));
        }
        return Ok(IdMaps::ByParent {
            uid,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{uid} {uid} 1\n").into_bytes(),
        });
    }
    Ok(IdMaps::Own {
        uid: euid,
        uid_map: format!("{euid} {euid} 1\n").into_bytes(),
        gid_map: format!("{egid} {egid} 1\n").into_bytes(),
    })
}

/// The idmapped clones the plan wants from the parent, stored in their slots.
fn premount(
    mounts: Option<&MountPlan>,
    slots: &mut [libc::c_int],
    uid: u32,
) -> Result<Vec<OwnedFd>, SandboxError> {
    let Some(m) = mounts else {
        return Ok(Vec::new());
    };
    let mut fds = Vec::new();
    for (slot, path) in &m.premade {
        let fd = super::idmap::clone(path, uid)?;
        slots[*slot] = std::os::fd::AsRawFd::as_raw_fd(&fd);
        fds.push(fd);
    }
    Ok(fds)
}

/// The cgroup's `cgroup.procs` files the child writes itself into.
fn cgroup_procs(cgroup: Option<&SandboxCgroup>) -> Result<Vec<CString>, SandboxError> {
    let Some(c) = cgroup else {
        return Ok(Vec::new());
    };
    c.procs_files().iter().map(|p| cstring(p)).collect()
}

/// The floor's private `HOME` and `TMPDIR`, in a fresh 0700 directory.
fn floor_dir() -> Result<PathBuf, SandboxError> {
    use std::os::unix::fs::DirBuilderExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let mut b = fs::DirBuilder::new();
    b.mode(0o700);
    // A directory of the same name may be left by an earlier process with this pid
    // (killed before its teardown): take the next name, never someone else's.
    let mut attempt = 0;
    let base = loop {
        let base = std::env::temp_dir().join(format!(
            "io-harness-floor-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        match b.create(&base) {
            Ok(()) => break base,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 1000 => {
                attempt += 1;
            }
            Err(e) => return Err(SandboxError::spawn("create private dir")(e)),
        }
    };
    for sub in ["home", "tmp"] {
        b.create(base.join(sub))
            .map_err(SandboxError::spawn("create private dir"))?;
    }
    Ok(base)
}

/// The layer report, completed with what the child applied.
pub(crate) fn complete(
    mut base: LayerReport,
    landlock: LandlockReport,
    mounts: Option<&MountPlan>,
    applied: u32,
) -> LayerReport {
    if applied & bit::MOUNTS != 0 {
        base.mounts = mounts.map(|m| m.report.clone());
    }
    base.landlock = if applied & bit::LANDLOCK != 0 {
        landlock
    } else {
        LandlockReport {
            abi: landlock.abi,
            ..LandlockReport::default()
        }
    };
    base.seccomp = applied & bit::SECCOMP != 0;
    base.no_new_privs = applied & bit::NNP != 0;
    base.new_session = applied & bit::SETSID != 0;
    base.capabilities_dropped = applied & bit::CAPS != 0;
    base.fds_closed = applied & bit::FDS != 0;
    base.proxy_bridge = applied & bit::BRIDGE != 0;
    if applied & bit::ID_MAP == 0 {
        base.host_uid = None;
    }
    if applied & bit::CGROUP == 0 && !base.limits.cgroup.is_empty() {
        // Not in the cgroup after all: its caps and teardown do not apply (the
        // session stops reading its cpu.stat and samples the tree instead).
        base.limits.cgroup.clear();
        base.limits.teardown.retain(|t| *t != Teardown::Cgroup);
        let nproc = base.limits.rlimits.contains(&"nproc");
        base.limits.enforced.retain(|c| match c {
            Cap::Processes => nproc,
            Cap::Memory => base.limits.memory_monitor,
            _ => true,
        });
        if nproc && base.limits.enforced.contains(&Cap::Processes) {
            base.limits.unobservable.push(Cap::Processes);
        }
        if base.limits.cpu_tree.is_some() {
            base.limits.cpu_tree = Some(CpuAccounting::ProcTree);
        }
    }
    if applied & bit::RLIMITS == 0 {
        // CPU and disk stay enforced by the parent's watches; the process cap only
        // where a pids cgroup holds it.
        use crate::CgroupController as C;
        let cg_pids = base
            .limits
            .cgroup
            .iter()
            .any(|c| matches!(c, C::V1Pids | C::V2Pids));
        base.limits.rlimits.clear();
        let (cpu_tree, disk_watch) = (base.limits.cpu_tree.is_some(), base.limits.disk_watch);
        base.limits.enforced.retain(|c| match c {
            Cap::OpenFiles => false,
            Cap::Processes => cg_pids,
            Cap::Cpu => cpu_tree,
            Cap::Disk => disk_watch,
            _ => true,
        });
    }
    let enforced = base.limits.enforced.clone();
    base.limits.unobservable.retain(|c| enforced.contains(c));
    base
}
