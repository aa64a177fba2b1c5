//! Runs commands for a run: the agent's `run_command` and the verification gates, each
//! in the run's sandbox, each recorded.
//!
//! This is the seam between the sandbox (which knows nothing of runs) and the rest of
//! the harness. For every command it records, after the fact and from the sandbox's own
//! report, the `create` / `exec` / `cap_hit` / `destroy` sandbox events under the
//! backend that really ran, a `sandbox_sessions` row with the layers applied, and one
//! audit-log line. A launch that failed records none of these: nothing ran.
//!
//! # Stopping
//! Every command observes the run's [`Halt`] (set with [`Executor::set_halt`]): when
//! the run is cancelled or its time budget runs out, the sandbox is killed at once and
//! the command is recorded as `stopped` with the reason (`cancelled`, `time_budget`),
//! never as a cap it did not hit. A caller that drops the future waiting on a command
//! stops it too: the sandbox never outlives its waiter.
//!
//! # Egress (`network = "allowlist"`)
//! Each command gets its own [`EgressProxy`] admitting the contract's `allow_hosts`
//! (names in `[sandbox] resolve` pinned), reached from inside through the sandbox's
//! bridge port ([`ProxyBridge`]), with `HTTP(S)_PROXY` pointing at it. After the command
//! the proxy's counts are recorded as *reported* (`egress_refusals_reported`…): the host
//! saw them, but not what the client did inside an admitted TLS tunnel. The posture
//! recorded is the one in force: `allowlist` only when the bridge was really set up
//! (the outcome's `proxy_bridge`); an allowlist the backend could only hold to no
//! network at all (the floor) is recorded as `none`, with its counts not observed.

mod checks;
mod guard;
mod outside;
pub(crate) use guard::denied_programs;
pub(crate) use outside::masks_or_whole as visible_tree_masks;
pub(crate) mod output;
mod report;
mod repos;
pub mod standalone;
pub mod tree;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::audit::AuditLog;
use crate::contract::SandboxSettings;
use crate::egress::{EgressProxy, EgressReport, bridge};
use crate::halt::{Halt, HaltReason};
use crate::policy::PolicyGate;
use crate::sandbox::{
    Backend, NetworkPosture, ProxyBridge, RunSpec, Sandbox, SandboxError, SandboxOutcome,
    StopSignal,
};
use crate::store::{SandboxEvent, Store};
use guard::WorkspaceGuard;
pub use tree::ScanError;

pub use output::BoundedOutput;
pub(crate) use report::SessionFacts;
pub use report::{layers_json, limits_json};

/// How long the proxy may finish serving a session's last connections before its
/// counts are read.
const EGRESS_SETTLE: Duration = Duration::from_secs(2);

/// What a session's egress looked like, for the records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressRecord {
    /// The posture in force: `none`, `allowlist` or `open`.
    pub posture: &'static str,
    /// The resolved allowlist in force (empty unless `allowlist`).
    pub allow_hosts: Vec<String>,
    /// What the proxy reported; all `None` when no proxy watched.
    pub report: EgressReport,
}

impl EgressRecord {
    /// The record of a session run under `spec` whose outcome is `out`, with the proxy
    /// that served it, if any. An allowlist whose bridge was not set up had no route
    /// at all: it is recorded as `none`, not observed.
    pub fn of(spec: &RunSpec, out: &SandboxOutcome, proxy: Option<&EgressProxy>) -> EgressRecord {
        match (spec.network, proxy) {
            (NetworkPosture::Allowlist, Some(p)) if out.layers.proxy_bridge => EgressRecord {
                posture: NetworkPosture::Allowlist.label(),
                allow_hosts: p.rules().iter().map(ToString::to_string).collect(),
                report: p.report(),
            },
            (NetworkPosture::Allowlist, _) => EgressRecord {
                posture: NetworkPosture::None.label(),
                ..EgressRecord::default()
            },
            (posture, _) => EgressRecord {
                posture: posture.label(),
                ..EgressRecord::default()
            },
        }
    }
}

/// With `network = "allowlist"` in `spec`: starts an egress proxy for `settings`'
/// allowlist and points `spec` at it (the bridge into its network namespace and the
/// proxy variables first in its environment). Any other posture needs none. The proxy
/// must outlive the process it serves; its report is what the session records.
pub(crate) async fn start_egress(
    settings: &SandboxSettings,
    spec: &mut RunSpec,
) -> Result<Option<EgressProxy>, SandboxError> {
    if spec.network != NetworkPosture::Allowlist {
        return Ok(None);
    }
    let rules = settings
        .host_rules()
        .map_err(|e| SandboxError::invalid(format!("[sandbox] allow_hosts: {e}")))?;
    let pins = settings.resolve.iter().map(|(k, v)| (k.clone(), *v));
    let proxy = EgressProxy::builder(rules)
        .with_pins(pins)
        .start()
        .await
        .map_err(SandboxError::spawn("egress proxy"))?;
    let port = bridge::DEFAULT_BRIDGE_PORT;
    spec.proxy = Some(ProxyBridge {
        port,
        to_unix: proxy.unix_path().to_path_buf(),
    });
    let mut env = bridge::proxy_env(port);
    env.append(&mut spec.env);
    spec.env = env;
    Ok(Some(proxy))
}

/// `ETXTBSY` on `execve`: the file is still open for writing somewhere. A gate runs a
/// binary it has just copied; while the copy's descriptor was open, another thread of
/// this process may have forked, and that child holds the descriptor until its own
/// `exec` closes it. The window is short, so such a spawn is retried a few times
/// ([`TEXT_BUSY_RETRIES`], doubling from 10 ms) before it counts as failed.
pub(crate) fn text_busy(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ETXTBSY)
}

/// Spawn attempts after the first that meet [`text_busy`].
pub(crate) const TEXT_BUSY_RETRIES: u32 = 5;

/// The pause before retry `attempt` (1-based) of a [`text_busy`] spawn.
pub(crate) fn text_busy_pause(attempt: u32) -> Duration {
    Duration::from_millis(10 << attempt.min(6))
}

/// The dependency cache shared across runs (`$XDG_CACHE_HOME/io-harness/deps`, else
/// `~/.cache/io-harness/deps`): beside the gates' directories, outside every
/// sandbox's view (the view is an allowlist: a gate gets a copy, never the cache).
pub(crate) fn dep_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("io-harness")
        .join("deps")
}

/// Why a command was run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The agent's `run_command`.
    Tool,
    /// A verification command of the contract.
    Gate,
}

impl Purpose {
    fn label(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Gate => "gate",
        }
    }
}

/// Runs a run's commands in its sandbox and records each one.
pub struct Executor {
    sandbox: Arc<dyn Sandbox>,
    settings: SandboxSettings,
    workdir: PathBuf,
    store: Store,
    run_id: i64,
    step: AtomicU32,
    audit: Option<AuditLog>,
    /// The masks and repository checks around every session (see [`guard`]).
    guard: Arc<Mutex<WorkspaceGuard>>,
    /// The run's cancel token and deadline (none until the session sets it).
    halt: Mutex<Halt>,
    /// The shared dependency cache's bound (`[verify] dep_cache_max`); `None` is the
    /// default.
    dep_cache_max: Option<u64>,
}

impl Executor {
    /// An executor for one run. `masked` are workspace paths made unreadable inside
    /// when no policy is given ([`Executor::with_policy`] computes them afresh before
    /// every session instead).
    pub fn new(
        sandbox: Arc<dyn Sandbox>,
        settings: SandboxSettings,
        workdir: &Path,
        store: Store,
        run_id: i64,
        audit: Option<AuditLog>,
        masked: Vec<PathBuf>,
    ) -> Self {
        let mut guard = WorkspaceGuard::new(
            workdir,
            settings.scan_limit.unwrap_or(tree::DEFAULT_SCAN_LIMIT),
            masked,
            settings.allow_new_repos,
            checks::quarantine_dir(&store, run_id),
        );
        guard.set_visible_trees(settings.read_only_paths.clone());
        Self {
            sandbox,
            settings,
            workdir: workdir.to_path_buf(),
            store,
            run_id,
            step: AtomicU32::new(0),
            audit,
            guard: Arc::new(Mutex::new(guard)),
            halt: Mutex::new(Halt::default()),
            dep_cache_max: None,
        }
    }

    /// Masks, before every session, each workspace file `gate` denies reading, at the
    /// path it has then.
    pub fn with_policy(self, gate: Arc<dyn PolicyGate>) -> Self {
        self.lock_guard().set_gate(gate);
        self
    }

    /// Keeps what the run's first look at the workspace found in `dir` (the run's
    /// scratch directory), so a resumed run judges new repositories against it.
    pub fn with_state_dir(self, dir: &Path) -> Self {
        self.lock_guard().set_state_dir(dir);
        self
    }

    fn lock_guard(&self) -> std::sync::MutexGuard<'_, WorkspaceGuard> {
        self.guard.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the bound of the shared dependency cache (`[verify] dep_cache_max`, in
    /// bytes; `Some(0)` keeps this run's gates out of it).
    pub fn with_dep_cache_max(mut self, bytes: Option<u64>) -> Self {
        self.dep_cache_max = bytes;
        self
    }

    /// The bound of the shared dependency cache, when the contract set one.
    pub(crate) fn dep_cache_max(&self) -> Option<u64> {
        self.dep_cache_max
    }

    /// Whether the commands' writes are confined to their writable directory, so no
    /// gate build can reach the harness's caches: a native backend that may not fall
    /// back to the portable floor.
    pub(crate) fn confines_writes(&self) -> bool {
        matches!(
            self.backend(),
            Backend::LinuxNamespaces | Backend::MacosSandboxExec
        ) && !self.settings.allow_weaker
    }

    /// The host variables a command receives (the names the contract passes, with
    /// their values now); the sandbox adds only fixed defaults and private `HOME` and
    /// `TMPDIR`.
    pub(crate) fn passed_env(&self) -> Vec<(String, String)> {
        standalone::passed_env(&self.settings)
    }

    /// The cancel token and deadline every later command observes.
    pub fn set_halt(&self, halt: Halt) {
        *self.halt.lock().unwrap_or_else(PoisonError::into_inner) = halt;
    }

    /// When the run's time is up, if it has a deadline: long tool work (a search)
    /// stops there too.
    pub fn deadline(&self) -> Option<std::time::Instant> {
        self.halt().deadline().map(tokio::time::Instant::into_std)
    }

    fn halt(&self) -> Halt {
        self.halt
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The backend commands would run under.
    pub fn backend(&self) -> Backend {
        self.sandbox.backend()
    }

    /// The step the next commands belong to.
    pub fn set_step(&self, step: u32) {
        self.step.store(step, Ordering::SeqCst);
    }

    /// The workspace its commands run in.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// [`Executor::refresh_masks`] on this thread (blocking file system work), for a
    /// caller outside the async runtime or at setup.
    pub fn refresh_masks_blocking(&self) -> Result<Vec<PathBuf>, ScanError> {
        Ok(self.lock_guard().before_session()?.masked)
    }

    /// Workspace paths (relative) masked in the last session started.
    pub fn masked(&self) -> Vec<PathBuf> {
        self.lock_guard().last.clone()
    }

    /// The workspace paths (relative) the policy denies reading, where they are now:
    /// what a session started now would mask. For work on the host that must leave
    /// them out (a gate's copy of the workspace, an MCP server's start).
    pub async fn refresh_masks(&self) -> Result<Vec<PathBuf>, ScanError> {
        Ok(self.session_paths().await?.masked)
    }

    /// [`Self::refresh_masks`] and the paths a session started now would hold
    /// read-only (what the policy denies writing, pre-existing nested repositories).
    pub async fn view_paths(&self) -> Result<(Vec<PathBuf>, Vec<PathBuf>), ScanError> {
        let p = self.session_paths().await?;
        Ok((p.masked, p.protected))
    }

    /// What the model has not been told yet of the checks after its sessions (an
    /// entry moved out of the workspace), once.
    pub fn take_notices(&self) -> Vec<String> {
        self.lock_guard().take_notices()
    }

    /// Where this run's quarantined entries go.
    pub fn quarantine_dir(&self) -> PathBuf {
        self.lock_guard().quarantine_dir().to_path_buf()
    }

    /// Whether `run_command` may take a shell string.
    pub fn shell_allowed(&self) -> bool {
        self.settings.shell
    }

    fn spec(&self, argv: Vec<String>, wall_secs: Option<u64>) -> RunSpec {
        let mut spec = standalone::command_spec(&self.settings, &self.workdir, argv);
        if let Some(w) = wall_secs {
            spec.limits.wall_secs = Some(spec.limits.wall_secs.map_or(w, |c| c.min(w)));
        }
        spec
    }

    /// Runs `argv` to completion in the sandbox (on a blocking thread) and records it.
    /// `wall_secs` narrows the wall-clock cap (a gate's timeout).
    pub async fn run(
        &self,
        argv: Vec<String>,
        purpose: Purpose,
        wall_secs: Option<u64>,
    ) -> Result<SandboxOutcome, SandboxError> {
        self.run_in(&self.workdir.clone(), argv, purpose, wall_secs)
            .await
    }

    /// Runs `argv` like [`Executor::run`] but with `workdir` as its one writable
    /// directory instead of the workspace: a Rust gate builds and runs its artifacts in
    /// a per-gate directory outside the agent's writable area.
    pub async fn run_in(
        &self,
        workdir: &Path,
        argv: Vec<String>,
        purpose: Purpose,
        wall_secs: Option<u64>,
    ) -> Result<SandboxOutcome, SandboxError> {
        self.run_in_viewing(workdir, &[], argv, purpose, wall_secs)
            .await
    }

    /// [`Executor::run_in`] with extra host paths made visible read-only: a
    /// workspace-form gate shows its compile the criterion files it placed, which the
    /// agent's build script must be able to read but not change.
    pub async fn run_in_viewing(
        &self,
        workdir: &Path,
        read_only: &[PathBuf],
        argv: Vec<String>,
        purpose: Purpose,
        wall_secs: Option<u64>,
    ) -> Result<SandboxOutcome, SandboxError> {
        let mut spec = self.spec(argv, wall_secs);
        spec.workdir = workdir.to_path_buf();
        spec.read_only_paths.extend(read_only.iter().cloned());
        self.launch(spec, purpose).await
    }

    /// [`Executor::run_in_viewing`] for a Rust gate's test process: it may start no
    /// other process or program (`RunSpec::single_process`), so a forked copy or a
    /// re-run of the test binary cannot learn or report the verdict.
    /// `writable` directories and `env` are added (a cargo-form test runs in its
    /// package directory and writes its verdict to its own run directory).
    pub async fn run_single_process(
        &self,
        workdir: &Path,
        read_only: &[PathBuf],
        argv: Vec<String>,
        wall_secs: Option<u64>,
        (writable, env): (&[PathBuf], &[(String, String)]),
    ) -> Result<SandboxOutcome, SandboxError> {
        let mut spec = self.spec(argv, wall_secs);
        spec.workdir = workdir.to_path_buf();
        spec.read_only_paths.extend(read_only.iter().cloned());
        spec.writable_paths.extend(writable.iter().cloned());
        spec.env.extend(env.iter().cloned());
        spec.single_process = true;
        self.launch(spec, Purpose::Gate).await
    }

    /// [`Executor::run`] in the workspace with `writable`, directories outside it,
    /// writable too and `env` added to the environment: a command gate that writes a
    /// test report gets a fresh harness-owned directory for it (`IO_HARNESS_REPORT`).
    ///
    /// `sealed` are workspace files made read-only for this command (a command gate's
    /// criterion set, restored just before), beside the session's own protected paths.
    pub async fn run_writing(
        &self,
        argv: Vec<String>,
        wall_secs: Option<u64>,
        (writable, sealed): (&[PathBuf], &[PathBuf]),
        env: &[(String, String)],
    ) -> Result<SandboxOutcome, SandboxError> {
        let mut spec = self.spec(argv, wall_secs);
        spec.writable_paths.extend(writable.iter().cloned());
        spec.env.extend(env.iter().cloned());
        spec.protected_paths = sealed.to_vec();
        self.launch(spec, Purpose::Gate).await
    }

    /// Launches a built spec: its egress proxy, the run's halt, the text-busy retry,
    /// and the record.
    async fn launch(
        &self,
        mut spec: RunSpec,
        purpose: Purpose,
    ) -> Result<SandboxOutcome, SandboxError> {
        self.place_masks(&mut spec).await?;
        let ran = self.launch_placed(spec, purpose).await;
        // Whatever the launch says (a teardown error comes after the command ran),
        // the tree is checked before anything else reads it.
        self.check_new_repos().await;
        ran
    }

    /// [`Executor::launch`] of a spec whose masks are in place.
    async fn launch_placed(
        &self,
        mut spec: RunSpec,
        purpose: Purpose,
    ) -> Result<SandboxOutcome, SandboxError> {
        let proxy = self.start_egress(&mut spec).await?;
        let halt = self.halt();
        // The run's deadline comes first (or with it): it is what ends the command,
        // so the sandbox's own wall cap is not armed to race it and be recorded as hit.
        if let (Some(left), Some(cap)) = (halt.remaining(), spec.limits.wall_secs)
            && left <= Duration::from_secs(cap)
        {
            spec.limits.wall_secs = None;
        }
        let stop = StopSignal::new().map_err(SandboxError::spawn("stop signal"))?;
        spec.stop = Some(stop.clone());
        let mut stopped_by = None;
        let mut attempt = 0;
        let outcome = loop {
            let ran = self
                .run_stoppable(&spec, &halt, &stop, &mut stopped_by)
                .await?;
            match ran {
                Err(SandboxError::Exec { ref source, .. })
                    if text_busy(source) && attempt < TEXT_BUSY_RETRIES =>
                {
                    attempt += 1;
                    tokio::time::sleep(text_busy_pause(attempt)).await;
                }
                other => break other?,
            }
        };
        if let Some(p) = &proxy {
            p.settle(EGRESS_SETTLE).await;
        }
        let egress = EgressRecord::of(&spec, &outcome, proxy.as_ref());
        drop(proxy);
        let stopped_by = stopped_by.filter(|_| outcome.stopped);
        self.record(&spec, purpose, &outcome, &egress, stopped_by)
            .await;
        Ok(outcome)
    }

    /// One launch on the blocking pool, stopped when `halt` comes first (`stopped_by`
    /// then says why) or when this future is dropped.
    async fn run_stoppable(
        &self,
        spec: &RunSpec,
        halt: &Halt,
        stop: &StopSignal,
        stopped_by: &mut Option<HaltReason>,
    ) -> Result<Result<SandboxOutcome, SandboxError>, SandboxError> {
        if let Some(why) = halt.reached_now() {
            // Launched anyway, and killed at its first poll: the record shows a
            // command that was asked for and stopped, not one that silently vanished.
            stopped_by.get_or_insert(why);
            stop.stop();
        }
        let sandbox = self.sandbox.clone();
        let spec2 = spec.clone();
        let on_drop = stop.on_drop();
        let mut job = tokio::task::spawn_blocking(move || sandbox.run(&spec2));
        let joined = tokio::select! {
            r = &mut job => r,
            why = halt.reached() => {
                stopped_by.get_or_insert(why);
                stop.stop();
                job.await
            }
        };
        on_drop.disarm();
        joined.map_err(|e| SandboxError::Spawn {
            stage: "blocking task",
            source: std::io::Error::other(e.to_string()),
        })
    }

    /// With `network = "allowlist"`: a proxy for this command, and the spec pointed
    /// at it (bridge port, proxy variables ahead of any the contract passes in).
    async fn start_egress(&self, spec: &mut RunSpec) -> Result<Option<EgressProxy>, SandboxError> {
        start_egress(&self.settings, spec).await
    }

    /// The run these commands belong to (names a gate's build directory).
    pub fn run_id(&self) -> i64 {
        self.run_id
    }

    /// Best effort: a record that cannot be written must not fail the command. The
    /// rows and the audit line are built here; the writes (SQLite, the audit file and
    /// its lock) run on the blocking pool, never on an async worker thread.
    async fn record(
        &self,
        spec: &RunSpec,
        purpose: Purpose,
        out: &SandboxOutcome,
        egress: &EgressRecord,
        stopped_by: Option<HaltReason>,
    ) {
        let step = self.step.load(Ordering::SeqCst);
        let backend = out.backend.label();
        let argv_text = spec.argv.join(" ");
        let mut events = vec![
            SandboxEvent::create(self.run_id, step, backend),
            SandboxEvent::exec(self.run_id, step, backend, &argv_text),
        ];
        // Only an enforced cap is ever reported hit.
        if let Some(cap) = out.cap_hit.filter(|c| out.layers.enforces(*c)) {
            events.push(SandboxEvent::cap_hit(self.run_id, step, cap.label()));
        }
        if let Some(why) = stopped_by {
            events.push(SandboxEvent::stopped(self.run_id, step, why.label()));
        }
        events.push(SandboxEvent::destroy(self.run_id, step));
        let facts = SessionFacts {
            run_id: self.run_id,
            step,
            purpose: purpose.label(),
            workdir: &self.workdir,
            spec,
            out,
            egress,
        };
        let row = facts.row();
        let line = self
            .audit
            .as_ref()
            .map(|log| (log.clone(), facts.audit_line(Some((self.run_id, step)))));
        let store = self.store.clone();
        let run_id = self.run_id;
        let write = move || {
            for e in &events {
                if let Err(err) = store.record_sandbox_event(e) {
                    store.note_lost(Some(run_id), "sandbox event", &err);
                }
            }
            if let Err(err) = store.record_sandbox_session(&row) {
                store.note_lost(Some(run_id), "sandbox session", &err);
            }
            if let Some((log, line)) = line {
                append_audit(&store, Some(run_id), &log, &line);
            }
        };
        if let Err(e) = tokio::task::spawn_blocking(write).await {
            let err = crate::store::StoreError::TaskCancelled(e.to_string());
            self.store.note_lost(Some(run_id), "sandbox session", &err);
        }
    }
}

/// Appends a session's line to the audit log. A failure never fails the run (SPEC C18):
/// it is warned about once per log and counted in the run's record, so the store says
/// what the log missed. A count that cannot be written is a lost record like any other.
pub(crate) fn append_audit(
    store: &Store,
    run_id: Option<i64>,
    log: &AuditLog,
    line: &crate::audit::SessionRecord,
) {
    let Err(err) = log.append(line) else {
        return;
    };
    log.warn_once(&err);
    if let Some(run_id) = run_id
        && let Err(e) = store.count_audit_failure(run_id)
    {
        store.note_lost(Some(run_id), "audit failure count", &e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_dependency_cache_lies_under_the_cache_directory() {
        assert!(dep_cache_dir().ends_with("io-harness/deps"));
    }
}
