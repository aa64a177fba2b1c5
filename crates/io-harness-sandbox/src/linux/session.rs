//! One live sandbox seen from the parent: release the child, learn which layers it
//! applied, supervise it (output, wall clock, memory monitor), reap it, attribute a
//! cap, and tear everything down.
//!
//! Teardown order: the top process is reaped first (with a pid namespace its exit
//! has already killed everything inside), then the cgroup is killed and verified
//! empty, then the floor's private directory is removed (`remove_dir_all` does not
//! follow symlinks the sandbox may have planted), then setuid/setgid bits are cleared
//! from the writable trees (`suid.rs`).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::bridge::Forwarder;
use super::caps::CapWatch;
use super::cgroup::SandboxCgroup;
use super::child::{
    KIND_EXEC_FAILED, KIND_FAILED, KIND_LAYERS, KIND_STATUS, REPORT_LEN, Report, Stage,
};
use super::pipes::{self, Sink, pfd, poll, set_nonblocking};
use super::plan::bit;
use super::prepare::{Prepared, complete};
use super::spawn::{self, Launched, Stdin};
use super::sys;
use super::watchdog::Watchdog;
use crate::{
    Backend, Cap, CapState, Captured, LayerReport, OutputOverflow, SandboxError, SandboxLimits,
    SandboxOutcome, StopSignal,
};

/// How long to keep draining output after the top process is gone.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// The command's end state.
#[derive(Debug, Clone, Copy)]
struct Exit {
    /// Raw wait status of the command, when known.
    status: Option<i32>,
    cpu_ms: Option<u64>,
}

/// A started sandbox.
#[derive(Debug)]
pub(crate) struct Session {
    backend: Backend,
    pid: i32,
    pidfd: OwnedFd,
    status_r: OwnedFd,
    pid_ns: bool,
    cgroup: Option<SandboxCgroup>,
    limits: SandboxLimits,
    started: Instant,
    deadline: Option<Instant>,
    layers: LayerReport,
    private_dir: Option<PathBuf>,
    /// The parent's watches, while this thread runs them (the watchdog holds them
    /// while it runs).
    watch: Option<CapWatch>,
    /// Where setuid/setgid bits are cleared at teardown, and what was cleared.
    setuid_roots: Vec<PathBuf>,
    setuid_cleared: Vec<PathBuf>,
    setuid_incomplete: Vec<PathBuf>,
    killed_for: Option<Cap>,
    /// The caller's stop signal killed it (see [`crate::StopSignal`]).
    stopped: bool,
    exit: Option<Exit>,
    done: bool,
    /// Enforces wall clock and the watches for a spawn handle nobody waits on.
    watchdog: Option<Watchdog>,
    /// What the watchdog killed for.
    fired: Arc<Mutex<Option<Cap>>>,
    /// The pooled network namespace, given back once the sandbox is verified gone.
    netns: Option<OwnedFd>,
    /// The egress bridge's host side, stopped before the namespace is given back.
    bridge: Option<Forwarder>,
}

/// Parent ends of the child's stdio.
pub(crate) struct Pipes {
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

impl Session {
    /// Launch `prepared`, release the child and wait until it has executed the
    /// command (or failed to).
    pub(crate) fn start(
        backend: Backend,
        prepared: Prepared,
        limits: SandboxLimits,
        stdin: Stdin,
    ) -> Result<(Session, Pipes), SandboxError> {
        let Prepared {
            plan,
            base,
            landlock,
            cgroup,
            private_dir,
            watch,
            bridge_to,
            setuid_roots,
        } = prepared;
        let pid_ns = plan.pid_ns;
        let started = Instant::now();
        let (launched, mut plan) = spawn::launch(plan, stdin)?;
        let netns = plan.netns.take();
        let Launched {
            pid,
            pidfd,
            stdin,
            stdout,
            stderr,
            exec_r,
            status_r,
            bridge: bridge_fd,
        } = launched;
        let mut session = Session {
            backend,
            pid,
            pidfd,
            status_r,
            pid_ns,
            cgroup,
            limits,
            started,
            deadline: limits.wall_secs.map(|s| started + Duration::from_secs(s)),
            layers: base,
            private_dir,
            watch: Some(CapWatch::new(watch)),
            setuid_roots,
            setuid_cleared: Vec::new(),
            setuid_incomplete: Vec::new(),
            killed_for: None,
            stopped: false,
            exit: None,
            done: false,
            watchdog: None,
            fired: Arc::new(Mutex::new(None)),
            netns,
            bridge: None,
        };
        let report = session
            .read_exec_report(&exec_r, &plan)
            .and_then(|applied| {
                if applied & bit::BRIDGE != 0 {
                    session.bridge = Some(start_bridge(bridge_fd, bridge_to)?);
                }
                Ok(applied)
            });
        match report {
            Ok(applied) => {
                let layers = std::mem::take(&mut session.layers);
                session.layers = complete(layers, landlock, plan.mounts.as_ref(), applied);
                if applied & bit::CGROUP == 0
                    && let Some(w) = session.watch.as_mut()
                {
                    w.without_cgroup();
                }
                Ok((
                    session,
                    Pipes {
                        stdin,
                        stdout,
                        stderr,
                    },
                ))
            }
            Err(e) => {
                session.abort();
                Err(e)
            }
        }
    }

    /// Read the exec pipe to its end: the layers applied, or why nothing ran.
    fn read_exec_report(
        &mut self,
        exec_r: &OwnedFd,
        plan: &super::plan::ChildPlan,
    ) -> Result<u32, SandboxError> {
        let mut applied = None;
        let mut buf = [0u8; REPORT_LEN];
        let mut filled = 0;
        loop {
            let mut fds = [pfd(exec_r.as_raw_fd(), libc::POLLIN)];
            let timeout = self
                .deadline
                .map(|d| d.saturating_duration_since(Instant::now()));
            if timeout == Some(Duration::ZERO) {
                return Err(SandboxError::Spawn {
                    stage: "start",
                    source: std::io::Error::from(std::io::ErrorKind::TimedOut),
                });
            }
            poll(&mut fds, timeout)?;
            if fds[0].revents == 0 {
                continue;
            }
            let n = sys::read(exec_r.as_raw_fd(), &mut buf[filled..]).map_err(|e| {
                SandboxError::Io {
                    stage: "read exec report",
                    source: std::io::Error::from_raw_os_error(e),
                }
            })?;
            if n == 0 {
                break;
            }
            filled += n;
            if filled < REPORT_LEN {
                continue;
            }
            filled = 0;
            let r = Report::decode(&buf);
            match r.kind {
                KIND_LAYERS => applied = Some(r.applied),
                KIND_FAILED => {
                    let stage = Stage::from_u32(r.stage).map_or("unknown", Stage::label);
                    let detail = match (Stage::from_u32(r.stage), &plan.mounts) {
                        (Some(Stage::Mount), Some(m)) => m.describe(r.op as usize),
                        (Some(Stage::Rlimit), _) => plan
                            .rlimits
                            .get(r.op as usize)
                            .map_or_else(String::new, |l| format!("resource {}", l.0)),
                        _ => String::new(),
                    };
                    return Err(SandboxError::Layer {
                        stage,
                        detail,
                        source: std::io::Error::from_raw_os_error(r.errno),
                    });
                }
                KIND_EXEC_FAILED => {
                    let program = plan.exec.program();
                    return Err(SandboxError::Exec {
                        program,
                        source: std::io::Error::from_raw_os_error(r.errno),
                    });
                }
                _ => {}
            }
        }
        applied.ok_or_else(|| SandboxError::Spawn {
            stage: "start",
            source: std::io::Error::other("the child exited before executing the command"),
        })
    }

    /// The layers really applied.
    pub(crate) fn layers(&self) -> &LayerReport {
        &self.layers
    }

    /// The backend.
    pub(crate) fn backend(&self) -> Backend {
        self.backend
    }

    /// Host pid of the top process.
    pub(crate) fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Kill every process of the sandbox (the top one included).
    pub(crate) fn kill(&mut self) {
        if self.exit.is_none() {
            let _ = sys::pidfd_kill(self.pidfd.as_raw_fd(), libc::SIGKILL);
        }
        self.kill_rest();
    }

    /// Kill what may survive the top process: the cgroup, and without a pid
    /// namespace the process group.
    fn kill_rest(&mut self) {
        if !self.pid_ns {
            // SAFETY: kill(2) on our child's process group (it called setsid).
            unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        }
        if let Some(cg) = &self.cgroup {
            cg.kill_all();
        }
    }

    /// Start the watchdog (for spawn handles) when there is a deadline or a watch.
    pub(crate) fn start_watchdog(&mut self) -> Result<(), SandboxError> {
        let watching = self.watch.as_ref().is_some_and(CapWatch::active);
        if self.deadline.is_none() && !watching {
            return Ok(());
        }
        let pidfd = self
            .pidfd
            .try_clone()
            .map_err(SandboxError::spawn("dup pidfd"))?;
        let fired = Arc::clone(&self.fired);
        let Some(watch) = self.watch.take() else {
            return Ok(());
        };
        self.watchdog = Some(Watchdog::start(
            pidfd,
            fired,
            self.deadline,
            watch,
            self.pid,
            self.pid_ns,
        )?);
        Ok(())
    }

    /// Reap the top process (it has exited or is about to).
    fn reap(&mut self) -> Result<(), SandboxError> {
        if self.exit.is_some() {
            return Ok(());
        }
        if let Some(w) = self.watchdog.take() {
            self.watch = w.finish();
        }
        if let Some(cap) = self.fired.lock().ok().and_then(|f| *f) {
            self.killed_for.get_or_insert(cap);
        }
        // Kill the rest while the top process is at worst a zombie: its pid (and
        // process group id) cannot have been reused yet.
        self.kill_rest();
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: status and usage are valid for writes; pid is our child.
            let r = unsafe { libc::wait4(self.pid, &mut status, 0, &mut usage) };
            if r >= 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(SandboxError::Io {
                    stage: "wait",
                    source: e,
                });
            }
        }
        let exit = if self.pid_ns {
            // init's report; absent when init itself was killed.
            let mut buf = [0u8; REPORT_LEN];
            let mut filled = 0;
            while filled < REPORT_LEN {
                match sys::read(self.status_r.as_raw_fd(), &mut buf[filled..]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => filled += n,
                }
            }
            let r = Report::decode(&buf);
            if filled == REPORT_LEN && r.kind == KIND_STATUS {
                Exit {
                    status: Some(r.status),
                    cpu_ms: Some(r.cpu_ms),
                }
            } else {
                Exit {
                    status: None,
                    cpu_ms: None,
                }
            }
        } else {
            let ms = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
            Exit {
                status: Some(status),
                cpu_ms: Some(ms(usage.ru_utime) + ms(usage.ru_stime)),
            }
        };
        self.exit = Some(exit);
        Ok(())
    }

    fn pidfd_ready(&self) -> bool {
        let mut fds = [pfd(self.pidfd.as_raw_fd(), libc::POLLIN)];
        let _ = poll(&mut fds, Some(Duration::ZERO));
        fds[0].revents != 0
    }

    /// A writer without end (`yes`): killed once a stream passes the overflow
    /// limit, not left to its wall clock.
    fn enforce_output(&mut self, out: &Sink, err: &Sink) {
        if self.exit.is_none() && (out.over_kill_limit() || err.over_kill_limit()) {
            self.killed_for.get_or_insert(Cap::Output);
            self.kill();
        }
    }

    /// One supervision tick: enforce the wall clock and the watches.
    fn enforce(&mut self) {
        if self.exit.is_some() {
            return;
        }
        let now = Instant::now();
        if self.deadline.is_some_and(|d| now >= d) {
            self.killed_for.get_or_insert(Cap::Wall);
            self.kill();
            return;
        }
        let pid = self.pid;
        if let Some(cap) = self.watch.as_mut().and_then(|w| w.tick(pid)) {
            self.killed_for.get_or_insert(cap);
            self.kill();
        }
    }

    fn next_timeout(&self) -> Option<Duration> {
        let now = Instant::now();
        let watch = self
            .watch
            .as_ref()
            .filter(|_| self.exit.is_none())
            .and_then(CapWatch::next_due);
        [self.deadline, watch]
            .into_iter()
            .flatten()
            .min()
            .map(|d| d.saturating_duration_since(now))
    }

    /// Supervise to the end, capturing output and feeding stdin.
    pub(crate) fn run(
        mut self,
        pipes: Pipes,
        input: &[u8],
        stop: Option<&StopSignal>,
        overflow: OutputOverflow,
        echo: bool,
    ) -> Result<SandboxOutcome, SandboxError> {
        let cap = self.limits.output_bytes.map_or(usize::MAX, |b| b as usize);
        let sink = |fd, to| Sink::new(fd, cap, overflow, echo.then_some(to));
        let (mut out, mut err) = (
            sink(pipes.stdout, libc::STDOUT_FILENO),
            sink(pipes.stderr, libc::STDERR_FILENO),
        );
        let mut stdin = pipes.stdin;
        let mut written = 0;
        if input.is_empty() {
            stdin = None;
        }
        if let Some(fd) = &stdin {
            set_nonblocking(fd.as_raw_fd());
        }
        let mut drain_until: Option<Instant> = None;
        loop {
            if self.exit.is_some() && out.fd.is_none() && err.fd.is_none() {
                break;
            }
            if drain_until.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let mut fds: Vec<libc::pollfd> = Vec::with_capacity(5);
            let mut idx = [usize::MAX; 5];
            if let Some(fd) = &out.fd {
                idx[0] = fds.len();
                fds.push(pfd(fd.as_raw_fd(), libc::POLLIN));
            }
            if let Some(fd) = &err.fd {
                idx[1] = fds.len();
                fds.push(pfd(fd.as_raw_fd(), libc::POLLIN));
            }
            if let Some(fd) = &stdin {
                idx[2] = fds.len();
                fds.push(pfd(fd.as_raw_fd(), libc::POLLOUT));
            }
            if self.exit.is_none() {
                idx[3] = fds.len();
                fds.push(pfd(self.pidfd.as_raw_fd(), libc::POLLIN));
                if let Some(stop) = stop.filter(|_| !self.stopped) {
                    idx[4] = fds.len();
                    fds.push(pfd(stop.fd(), libc::POLLIN));
                }
            }
            let mut timeout = self.next_timeout();
            if let Some(d) = drain_until {
                let left = d.saturating_duration_since(Instant::now());
                timeout = Some(timeout.map_or(left, |t| t.min(left)));
            }
            poll(&mut fds, timeout)?;
            let ready = |i: usize| i != usize::MAX && fds[i].revents != 0;
            if ready(idx[0]) {
                out.pull();
            }
            if ready(idx[1]) {
                err.pull();
            }
            self.enforce_output(&out, &err);
            if ready(idx[2])
                && let Some(fd) = &stdin
            {
                match pipes::write_some(fd.as_raw_fd(), &input[written..]) {
                    Ok(n) => written += n,
                    Err(libc::EAGAIN) => {}
                    Err(_) => written = input.len(),
                }
                if written >= input.len() {
                    stdin = None;
                }
            }
            if ready(idx[4]) {
                // The caller stopped it: killed now, then reaped and drained like any
                // other end.
                self.stopped = true;
                self.kill();
            }
            if ready(idx[3]) {
                self.reap()?;
                drain_until = Some(Instant::now() + DRAIN_GRACE);
            }
            self.enforce();
        }
        if self.exit.is_none() {
            self.kill();
            self.reap()?;
        }
        let (stdout, stderr) = (out.finish(), err.finish());
        self.finish(stdout, stderr)
    }

    /// Wait for the end without capturing output (the spawn handle's caller owns
    /// the pipes).
    pub(crate) fn wait(&mut self) -> Result<SandboxOutcome, SandboxError> {
        while self.exit.is_none() {
            let mut fds = [pfd(self.pidfd.as_raw_fd(), libc::POLLIN)];
            poll(&mut fds, self.next_timeout())?;
            if fds[0].revents != 0 {
                self.reap()?;
            } else {
                self.enforce();
            }
        }
        self.finish(Captured::default(), Captured::default())
    }

    /// Non-blocking check.
    pub(crate) fn try_wait(&mut self) -> Result<Option<SandboxOutcome>, SandboxError> {
        self.enforce();
        if self.exit.is_none() && !self.pidfd_ready() {
            return Ok(None);
        }
        self.wait().map(Some)
    }

    /// Attribute a cap, tear down, and build the outcome.
    fn finish(
        &mut self,
        stdout: Captured,
        stderr: Captured,
    ) -> Result<SandboxOutcome, SandboxError> {
        let exit = self.exit.unwrap_or(Exit {
            status: None,
            cpu_ms: None,
        });
        let status = exit.status;
        let exit_code = status
            .filter(|s| libc::WIFEXITED(*s))
            .map(|s| libc::WEXITSTATUS(s));
        let signal = match status {
            Some(s) if libc::WIFSIGNALED(s) => Some(libc::WTERMSIG(s)),
            Some(_) => None,
            // The top process was killed before it could report (wall, monitor).
            None => Some(libc::SIGKILL),
        };
        let enforced = |c: Cap| self.layers.enforces(c);
        let oom = self
            .cgroup
            .as_ref()
            .and_then(SandboxCgroup::oom_kills)
            .unwrap_or(0);
        let forks_refused = self
            .cgroup
            .as_ref()
            .and_then(SandboxCgroup::pids_max_hits)
            .unwrap_or(0);
        let cpu_limit_ms = self.limits.cpu_secs.map(|s| s * 1000);
        // A stop's SIGKILL is the caller's doing, never a cap.
        let cpu_hit = !self.stopped
            && match signal {
                Some(libc::SIGXCPU) => true,
                Some(libc::SIGKILL) => {
                    cpu_limit_ms.is_some_and(|l| exit.cpu_ms.is_some_and(|c| c >= l))
                }
                _ => false,
            };
        let fsize_hit = !self.stopped && signal == Some(libc::SIGXFSZ);
        let disk_reached = !self.stopped && self.watch.as_mut().is_some_and(CapWatch::disk_reached);
        let nproc_reached = self.watch.as_ref().is_some_and(|w| w.nproc_reached);
        let truncated = stdout.truncated || stderr.truncated;
        // Every cap seen hit, in the order a stop is attributed: the one that killed
        // it first, then what the kernel's counters and the exit status show.
        let mut hits: Vec<Cap> = self.killed_for.into_iter().collect();
        for (seen, cap) in [
            (oom > 0, Cap::Memory),
            (cpu_hit, Cap::Cpu),
            (fsize_hit || disk_reached, Cap::Disk),
            (forks_refused > 0 || nproc_reached, Cap::Processes),
            (truncated, Cap::Output),
        ] {
            if seen && enforced(cap) && !hits.contains(&cap) {
                hits.push(cap);
            }
        }
        hits.retain(|c| enforced(*c));
        let cap_hit = hits.first().copied();
        let caps = self
            .layers
            .limits
            .enforced
            .iter()
            .map(|&c| {
                let state = if hits.contains(&c) {
                    CapState::Hit
                } else if self.layers.limits.unobservable.contains(&c) {
                    CapState::NotObservable
                } else {
                    CapState::NotHit
                };
                (c, state)
            })
            .collect();
        let duration = self.started.elapsed();
        self.teardown()?;
        Ok(SandboxOutcome {
            backend: self.backend,
            exit_code,
            signal,
            stdout,
            stderr,
            cap_hit,
            caps,
            duration,
            layers: self.layers.clone(),
            stopped: self.stopped,
            setuid_cleared: std::mem::take(&mut self.setuid_cleared),
            setuid_incomplete: std::mem::take(&mut self.setuid_incomplete),
        })
    }

    /// Remove the cgroup (verifying it is empty) and the private directory.
    fn teardown(&mut self) -> Result<(), SandboxError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        // The listener and piped sockets live in the sandbox's network namespace.
        if let Some(mut b) = self.bridge.take() {
            b.stop();
        }
        if let Some(dir) = self.private_dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }

        let verified = match self.cgroup.as_mut() {
            Some(cg) => cg.destroy(),
            None => Ok(()),
        };
        // Everything of the sandbox is gone by now (its pid namespace or cgroup); a
        // floor's daemon in its own session could still race this walk, but it holds
        // no idmap and runs as the harness's own user.
        let roots = std::mem::take(&mut self.setuid_roots);
        let sweep = super::suid::sweep(&roots);
        for (path, e) in &sweep.incomplete {
            tracing::error!(
                path = %path.display(),
                error = %e,
                "the setuid sweep could not walk this part of a writable tree; it was made mode 0"
            );
        }
        self.setuid_cleared = sweep.cleared;
        self.setuid_incomplete = sweep.incomplete.into_iter().map(|(p, _)| p).collect();
        // Reuse the network namespace only when nothing of the sandbox can be left
        // in it: its pid namespace died with init (reaped by now), and the cgroup,
        // if any, was verified empty.
        if let Some(ns) = self.netns.take()
            && self.pid_ns
            && self.exit.is_some()
            && verified.is_ok()
        {
            super::netns::give(ns);
        }
        verified
    }

    /// Kill, reap and tear down after a failed start.
    fn abort(&mut self) {
        self.kill();
        let _ = self.reap();
        let _ = self.teardown();
    }
}

/// The bridge listener the child sent, and its forwarder to the proxy's socket.
fn start_bridge(
    pair: Option<OwnedFd>,
    to_unix: Option<PathBuf>,
) -> Result<Forwarder, SandboxError> {
    let fail = |e: std::io::Error| SandboxError::Layer {
        stage: "egress bridge listener",
        detail: String::new(),
        source: e,
    };
    let (Some(pair), Some(to_unix)) = (pair, to_unix) else {
        return Err(fail(std::io::Error::other("no bridge was planned")));
    };
    let fd =
        sys::recv_fd(pair.as_raw_fd()).map_err(|e| fail(std::io::Error::from_raw_os_error(e)))?;
    // SAFETY: recv_fd returned a new fd received with SCM_RIGHTS, owned by nobody else.
    let listener = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    Forwarder::start(listener, to_unix)
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.done {
            self.abort();
        }
    }
}
