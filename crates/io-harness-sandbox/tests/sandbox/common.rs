//! Fixtures shared by the containment suite: sandboxes, workspaces beside host
//! canaries, host listeners that count hits, victim processes, helper processes.

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use io_harness_sandbox::{
    FloorSandbox, NativeSandbox, RunSpec, Sandbox, SandboxLimits, SandboxOutcome,
};

/// Python on a stock Debian 12 machine.
pub const PY: &str = "/usr/bin/python3";

pub fn native() -> NativeSandbox {
    NativeSandbox::new().expect("the native backend works on this machine")
}

pub fn floor() -> FloorSandbox {
    FloorSandbox::new()
}

/// A directory visible inside the sandbox (not under a hidden path): the cargo
/// target tmp dir — unless the checkout itself lies under a directory the sandbox
/// hides (a clone in `/tmp`, in `$HOME`), where a host canary would be invisible rather
/// than protected and the tests could not tell the two apart. Then a directory under
/// `/var/lib` is used when it can be created (CI runs as root).
pub fn visible_root() -> PathBuf {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let mut hidden: Vec<PathBuf> = ["/tmp", "/var/tmp", "/dev/shm", "/run", "/var/run"]
            .iter()
            .map(PathBuf::from)
            .collect();
        hidden.extend(
            ["HOME", "XDG_RUNTIME_DIR"]
                .iter()
                .filter_map(|v| std::env::var_os(v).map(PathBuf::from)),
        );
        let canonical = std::fs::canonicalize(&target).unwrap_or(target.clone());
        if !hidden.iter().any(|h| canonical.starts_with(h)) {
            return target;
        }
        let alt = PathBuf::from("/var/lib/io-harness-sandbox-tests");
        match std::fs::create_dir_all(&alt) {
            Ok(()) => alt,
            Err(_) => target,
        }
    })
    .clone()
}

/// A workspace and, beside it, a host directory with a canary file, both in a place
/// the sandbox can see (so a failed write is the sandbox's doing, not a hidden path).
pub struct Fixture {
    pub work: tempfile::TempDir,
    pub host: tempfile::TempDir,
}

pub const CANARY_TEXT: &str = "canary-untouched";

impl Fixture {
    pub fn new() -> Fixture {
        let root = visible_root();
        std::fs::create_dir_all(&root).unwrap();
        let work = tempfile::Builder::new()
            .prefix("work-")
            .tempdir_in(&root)
            .unwrap();
        let host = tempfile::Builder::new()
            .prefix("host-")
            .tempdir_in(&root)
            .unwrap();
        std::fs::write(host.path().join("canary"), CANARY_TEXT).unwrap();
        Fixture { work, host }
    }

    pub fn workdir(&self) -> &Path {
        self.work.path()
    }

    pub fn canary(&self) -> PathBuf {
        self.host.path().join("canary")
    }

    pub fn host_path(&self, name: &str) -> PathBuf {
        self.host.path().join(name)
    }

    /// The canary is intact.
    pub fn assert_canary(&self) {
        assert_eq!(std::fs::read_to_string(self.canary()).unwrap(), CANARY_TEXT);
    }

    pub fn spec(&self, argv: Vec<String>) -> RunSpec {
        let mut spec = RunSpec::new(argv, self.workdir());
        spec.limits = test_limits();
        spec
    }
}

/// Limits for tests: generous, but a stuck adversary cannot hang the suite.
pub fn test_limits() -> SandboxLimits {
    SandboxLimits {
        wall_secs: Some(60),
        ..SandboxLimits::default()
    }
}

pub fn py(code: &str) -> Vec<String> {
    vec![PY.into(), "-c".into(), code.into()]
}

pub fn sh(code: &str) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), code.into()]
}

pub fn run(sb: &dyn Sandbox, spec: &RunSpec) -> SandboxOutcome {
    sb.run(spec)
        .unwrap_or_else(|e| panic!("sandbox run failed: {e}"))
}

/// Run and return (exit code, stdout, stderr).
pub fn run_text(sb: &dyn Sandbox, spec: &RunSpec) -> (Option<i32>, String, String) {
    let out = run(sb, spec);
    (out.exit_code, out.stdout.text(), out.stderr.text())
}

/// A TCP listener on `addr`. Its hit count is read after the sandbox is gone by
/// draining the accept queue without blocking: a connection that was established
/// is already queued, so no waiting is involved.
pub struct TcpCounter {
    pub port: u16,
    listener: TcpListener,
}

impl TcpCounter {
    pub fn bind(addr: &str) -> TcpCounter {
        let listener = TcpListener::bind(addr).unwrap();
        listener.set_nonblocking(true).unwrap();
        TcpCounter {
            port: listener.local_addr().unwrap().port(),
            listener,
        }
    }
    pub fn hits(&self) -> usize {
        std::iter::from_fn(|| self.listener.accept().ok()).count()
    }
}

/// A UDP socket; datagrams sent over loopback are queued before `sendto` returns.
pub struct UdpCounter {
    pub port: u16,
    socket: UdpSocket,
}

impl UdpCounter {
    pub fn bind(addr: &str) -> UdpCounter {
        let socket = UdpSocket::bind(addr).unwrap();
        socket.set_nonblocking(true).unwrap();
        UdpCounter {
            port: socket.local_addr().unwrap().port(),
            socket,
        }
    }
    pub fn hits(&self) -> usize {
        let mut buf = [0u8; 2048];
        std::iter::from_fn(|| self.socket.recv_from(&mut buf).ok()).count()
    }
}

/// A unix stream listener (pathname or abstract), counted like [`TcpCounter`].
pub struct UnixCounter {
    listener: UnixListener,
    pub path: Option<PathBuf>,
}

impl UnixCounter {
    pub fn path(path: &Path) -> UnixCounter {
        let _ = std::fs::remove_file(path);
        let l = UnixListener::bind(path).unwrap();
        l.set_nonblocking(true).unwrap();
        UnixCounter {
            listener: l,
            path: Some(path.to_owned()),
        }
    }

    pub fn abstract_name(name: &str) -> UnixCounter {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let l = UnixListener::bind_addr(&addr).unwrap();
        l.set_nonblocking(true).unwrap();
        UnixCounter {
            listener: l,
            path: None,
        }
    }

    pub fn hits(&self) -> usize {
        std::iter::from_fn(|| self.listener.accept().ok()).count()
    }
}

impl Drop for UnixCounter {
    fn drop(&mut self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A host process the sandbox must not be able to touch.
pub struct Victim(pub Child);

impl Victim {
    pub fn start() -> Victim {
        Victim(Command::new("sleep").arg("120").spawn().unwrap())
    }
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
    /// Alive and not stopped or traced.
    pub fn assert_untouched(&mut self) {
        assert!(self.0.try_wait().unwrap().is_none(), "victim was killed");
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let state = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        assert!(state == "S" || state == "R", "victim state {state}");
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        assert!(status.contains("TracerPid:\t0"), "victim is traced");
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Host processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline"))
            && String::from_utf8_lossy(&cmd).contains(marker)
        {
            out.push(pid);
        }
    }
    out
}

/// Wait (bounded) until no host process carries `marker`.
pub fn gone_within(marker: &str, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    loop {
        if processes_with(marker).is_empty() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn unique(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "iohx-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Re-run this test binary as a helper process in `mode` (see `helper.rs`).
pub fn helper(mode: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        "helper::entry",
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .env("IO_HARNESS_SANDBOX_HELPER", mode)
    .stdin(Stdio::null());
    c
}

/// The `HELPER:key=value` lines a helper printed.
pub fn helper_lines(out: &str) -> Vec<(String, String)> {
    out.lines()
        .filter_map(|l| l.strip_prefix("HELPER:"))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Read a line from a child's stdout (for ready signals).
pub fn read_line(r: &mut impl Read) -> String {
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    while r.read(&mut b).unwrap_or(0) == 1 {
        if b[0] == b'\n' {
            break;
        }
        out.push(b[0]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[allow(dead_code)]
pub fn write_all(w: &mut impl Write, data: &[u8]) {
    w.write_all(data).unwrap();
}

/// The tests run as root (CI) or as an unprivileged user (the helper's mode).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
