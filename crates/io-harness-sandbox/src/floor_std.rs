//! The floor on systems other than Linux (macOS, the BSDs, Windows), on
//! `std::process::Command`.
//!
//! Unix: a new session, `RLIMIT_CORE` 0, `RLIMIT_CPU` and `RLIMIT_NOFILE` set in
//! `pre_exec` (async-signal-safe calls only), the process group killed at the end.
//! Windows: the wall clock and a tree kill with `taskkill /T /F`. Memory and process
//! caps are not enforced here and therefore never reported.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::env::{DEFAULT_PATH, EnvBase, build_env};
use super::handle::{ChildControl, SandboxChild};
use super::{
    Backend, Cap, Captured, LayerReport, LimitReport, RunSpec, SandboxError, SandboxOutcome,
    StopSignal, Teardown,
};

/// Builds the final argv from the private directory and the spec's argv (the
/// macOS runner wraps it in `sandbox-exec`).
pub(crate) type Wrap<'a> = &'a dyn Fn(&Path, &[String]) -> Vec<String>;

/// The argv unchanged.
pub(crate) fn unwrapped(_private: &Path, argv: &[String]) -> Vec<String> {
    argv.to_vec()
}

fn layers() -> LayerReport {
    let mut limits = LimitReport {
        enforced: vec![Cap::Wall, Cap::Output],
        ..LimitReport::default()
    };
    if cfg!(unix) {
        limits.rlimits = vec!["core", "cpu", "nofile"];
        limits.enforced.extend([Cap::Cpu, Cap::OpenFiles]);
        limits.teardown = vec![Teardown::ProcessGroup];
    } else {
        limits.teardown = vec![Teardown::ProcessTree];
    }
    LayerReport {
        new_session: cfg!(unix),
        limits,
        ..LayerReport::default()
    }
}

struct Started {
    child: Child,
    private: tempfile::TempDir,
    started: Instant,
    deadline: Option<Instant>,
}

fn start(spec: &RunSpec, wrap: Wrap<'_>, stdin: Stdio) -> Result<Started, SandboxError> {
    if spec.argv.is_empty() {
        return Err(SandboxError::invalid("argv is empty"));
    }
    let private = tempfile::Builder::new()
        .prefix("io-harness-floor-")
        .tempdir()
        .map_err(SandboxError::spawn("private dir"))?;
    let (home, tmp) = (private.path().join("home"), private.path().join("tmp"));
    for d in [&home, &tmp] {
        std::fs::create_dir(d).map_err(SandboxError::spawn("private dir"))?;
    }
    let env = build_env(
        &spec.env,
        spec.network,
        &EnvBase {
            home: &home,
            tmpdir: &tmp,
            default_path: DEFAULT_PATH.to_owned(),
        },
    )?;
    let argv = wrap(private.path(), &spec.argv);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("TEMP", &tmp)
        .current_dir(&spec.workdir)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let cpu = spec.limits.cpu_secs;
        let files = spec.limits.open_files;
        let setup = move || {
            let set = |res, soft: u64, hard: u64| {
                let lim = libc::rlimit {
                    rlim_cur: soft as libc::rlim_t,
                    rlim_max: hard as libc::rlim_t,
                };
                // SAFETY: lim is a valid rlimit.
                if unsafe { libc::setrlimit(res, &lim) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            };
            // SAFETY: setsid has no preconditions.
            if unsafe { libc::setsid() } < 0 {
                return Err(std::io::Error::last_os_error());
            }
            set(libc::RLIMIT_CORE, 0, 0)?;
            if let Some(c) = cpu {
                set(libc::RLIMIT_CPU, c, c.saturating_add(1))?;
            }
            if let Some(n) = files {
                set(libc::RLIMIT_NOFILE, n, n)?;
            }
            Ok(())
        };
        // SAFETY: the closure only calls setsid and setrlimit, which are
        // async-signal-safe, and allocates nothing.
        unsafe { cmd.pre_exec(setup) };
    }
    let child = cmd.spawn().map_err(|source| SandboxError::Exec {
        program: spec.argv[0].clone(),
        source,
    })?;
    let started = Instant::now();
    Ok(Started {
        child,
        private,
        started,
        deadline: spec
            .limits
            .wall_secs
            .map(|s| started + Duration::from_secs(s)),
    })
}

fn kill_tree(child: &mut Child) {
    #[cfg(unix)]
    {
        // SAFETY: kill(2) on the process group of our unreaped child.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    }
    #[cfg(windows)]
    {
        let _ = Command::new("taskkill")
            .args(["/T", "/F", "/PID", &child.id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.kill();
}

/// Drains one stream, keeping its head and true tail. The floor does not kill at
/// the overflow limit (its reader thread cannot tell a live child from a reaped one's
/// reused pid); its wall clock still ends a writer without end.
fn bounded(
    mut r: impl Read + Send + 'static,
    cap: usize,
    mut echo: Option<Box<dyn Write + Send>>,
) -> std::thread::JoinHandle<Captured> {
    std::thread::spawn(move || {
        let mut out = crate::capture::Keeper::new(cap, crate::OutputOverflow::Tail);
        let mut buf = [0u8; 64 * 1024];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            let head = out.push(&buf[..n]);
            if let Some(w) = echo.as_mut() {
                let _ = w.write_all(&buf[..head]).and_then(|()| w.flush());
            }
        }
        out.finish()
    })
}

fn outcome(
    backend: Backend,
    status: std::process::ExitStatus,
    started: Instant,
    end: End,
    stdout: Captured,
    stderr: Captured,
) -> SandboxOutcome {
    let wall = end == End::Wall;
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let signal = None;
    let cap_hit = if wall {
        Some(Cap::Wall)
    } else if end == End::Stopped {
        None
    } else if cfg!(unix) && signal == Some(24) {
        Some(Cap::Cpu) // SIGXCPU
    } else if stdout.truncated || stderr.truncated {
        Some(Cap::Output)
    } else {
        None
    };
    SandboxOutcome {
        backend,
        exit_code: status.code(),
        signal,
        stdout,
        stderr,
        cap_hit,
        duration: started.elapsed(),
        layers: layers(),
        setuid_cleared: Vec::new(),
        setuid_incomplete: Vec::new(),
        stopped: end == End::Stopped,
    }
}

/// How a waited-on child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Exited,
    /// Killed at the wall-clock cap.
    Wall,
    /// Killed by the caller's stop signal.
    Stopped,
}

/// Wait for `child` until `deadline` or a stop; kill the tree at either.
fn wait_until(
    child: &mut Child,
    deadline: Option<Instant>,
    stop: Option<&StopSignal>,
) -> Result<(std::process::ExitStatus, End), SandboxError> {
    let mut end = End::Exited;
    loop {
        if let Some(s) = child.try_wait().map_err(SandboxError::io("wait"))? {
            return Ok((s, end));
        }
        if end == End::Exited && stop.is_some_and(StopSignal::is_stopped) {
            end = End::Stopped;
            kill_tree(child);
        }
        if end == End::Exited && deadline.is_some_and(|d| Instant::now() >= d) {
            end = End::Wall;
            kill_tree(child);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Run to completion.
pub(crate) fn run(
    backend: Backend,
    spec: &RunSpec,
    wrap: Wrap<'_>,
) -> Result<SandboxOutcome, SandboxError> {
    let stdin = if spec.stdin.is_empty() {
        Stdio::null()
    } else {
        Stdio::piped()
    };
    let mut s = start(spec, wrap, stdin)?;
    let cap = spec.limits.output_bytes.map_or(usize::MAX, |b| b as usize);
    let echo = |w: Box<dyn Write + Send>| spec.echo_output.then_some(w);
    let out = s
        .child
        .stdout
        .take()
        .map(|o| bounded(o, cap, echo(Box::new(std::io::stdout()))));
    let err = s
        .child
        .stderr
        .take()
        .map(|e| bounded(e, cap, echo(Box::new(std::io::stderr()))));
    if let Some(mut w) = s.child.stdin.take() {
        let data = spec.stdin.clone();
        std::thread::spawn(move || {
            let _ = w.write_all(&data);
        });
    }
    let (status, end) = wait_until(&mut s.child, s.deadline, spec.stop.as_ref())?;
    kill_tree(&mut s.child);
    let join = |h: Option<std::thread::JoinHandle<Captured>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    let (stdout, stderr) = (join(out), join(err));
    drop(s.private);
    Ok(outcome(backend, status, s.started, end, stdout, stderr))
}

struct StdControl {
    backend: Backend,
    child: Child,
    started: Instant,
    deadline: Option<Instant>,
    layers: LayerReport,
    _private: tempfile::TempDir,
    watchdog: Option<mpsc::Sender<()>>,
}

impl ChildControl for StdControl {
    fn backend(&self) -> Backend {
        self.backend
    }
    fn layers(&self) -> &LayerReport {
        &self.layers
    }
    fn id(&self) -> u32 {
        self.child.id()
    }
    fn kill(&mut self) {
        kill_tree(&mut self.child);
    }
    fn wait(&mut self) -> Result<SandboxOutcome, SandboxError> {
        let (status, mut end) = wait_until(&mut self.child, self.deadline, None)?;
        self.watchdog.take();
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            end = End::Wall;
        }
        kill_tree(&mut self.child);
        Ok(outcome(
            self.backend,
            status,
            self.started,
            end,
            Captured::default(),
            Captured::default(),
        ))
    }
    fn try_wait(&mut self) -> Result<Option<SandboxOutcome>, SandboxError> {
        match self.child.try_wait().map_err(SandboxError::io("wait"))? {
            Some(_) => self.wait().map(Some),
            None => Ok(None),
        }
    }
}

impl Drop for StdControl {
    fn drop(&mut self) {
        self.watchdog.take();
        kill_tree(&mut self.child);
        let _ = self.child.wait();
    }
}

/// Start with piped stdio.
pub(crate) fn spawn(
    backend: Backend,
    spec: &RunSpec,
    wrap: Wrap<'_>,
) -> Result<SandboxChild, SandboxError> {
    let mut s = start(spec, wrap, Stdio::piped())?;
    let (stdin, stdout, stderr) = match (
        s.child.stdin.take(),
        s.child.stdout.take(),
        s.child.stderr.take(),
    ) {
        (Some(i), Some(o), Some(e)) => (i, o, e),
        _ => {
            return Err(SandboxError::Spawn {
                stage: "stdio pipes",
                source: std::io::Error::other("missing pipe"),
            });
        }
    };
    let watchdog = s.deadline.map(|deadline| {
        let (tx, rx) = mpsc::channel::<()>();
        let pid = s.child.id();
        std::thread::spawn(move || {
            let wait = deadline.saturating_duration_since(Instant::now());
            if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(wait) {
                #[cfg(unix)]
                {
                    // SAFETY: kill(2) on the child's process group; the owner stops
                    // this thread before reaping, so the pid is still ours.
                    unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
                }
                #[cfg(windows)]
                {
                    let _ = Command::new("taskkill")
                        .args(["/T", "/F", "/PID", &pid.to_string()])
                        .status();
                }
            }
        });
        tx
    });
    let control = StdControl {
        backend,
        child: s.child,
        started: s.started,
        deadline: s.deadline,
        layers: layers(),
        _private: s.private,
        watchdog,
    };
    Ok(SandboxChild::new(stdin, stdout, stderr, Box::new(control)))
}
