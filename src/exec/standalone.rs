//! The pieces of a run's sandbox session that a command outside any run needs too
//! (`io-harness sandbox -- CMD`): the spec a contract's `[sandbox]` settings give a
//! command, the host paths every session hides, and the audit line of a session no
//! run owns. The executor builds its sessions from the same functions, so the one-off
//! command is isolated exactly as a run's command would be.

use std::path::{Path, PathBuf};

use crate::audit::{AuditLog, SessionRecord};
use crate::contract::{NetworkSetting, OverflowSetting, SandboxSettings};
use crate::egress::EgressProxy;
use crate::sandbox::{
    NetworkPosture, OutputOverflow, RunSpec, SandboxError, SandboxLimits, SandboxOutcome,
};

use super::EgressRecord;
use super::report::SessionFacts;

/// The caps `settings` ask for, each unset one at its default.
pub fn limits(settings: &SandboxSettings) -> SandboxLimits {
    let d = SandboxLimits::default();
    let l = &settings.limits;
    SandboxLimits {
        cpu_secs: l.cpu_secs.or(d.cpu_secs),
        wall_secs: l.wall_secs.or(d.wall_secs),
        memory_bytes: l.memory.or(d.memory_bytes),
        processes: l.processes.or(d.processes),
        open_files: l.open_files.or(d.open_files),
        output_bytes: l.output.or(d.output_bytes),
        disk_bytes: l.disk.or(d.disk_bytes),
    }
}

/// The host variables `settings` pass in by name, with their values now.
pub fn passed_env(settings: &SandboxSettings) -> Vec<(String, String)> {
    settings
        .env
        .iter()
        .filter_map(|name| std::env::var(name).ok().map(|v| (name.clone(), v)))
        .collect()
}

/// `argv` in `workdir` under `settings`: caps, network posture, passed variables,
/// extra read-only paths, the uid and the fallback rule. Masks are the
/// caller's (they depend on the policy and on where the records are).
pub fn command_spec(settings: &SandboxSettings, workdir: &Path, argv: Vec<String>) -> RunSpec {
    let mut spec = RunSpec::new(argv, workdir);
    spec.limits = limits(settings);
    spec.output_overflow = match settings.limits.output_overflow.unwrap_or_default() {
        OverflowSetting::Tail => OutputOverflow::Tail,
        OverflowSetting::Kill => OutputOverflow::Kill,
    };
    spec.network = match settings.network {
        NetworkSetting::None => NetworkPosture::None,
        NetworkSetting::Allowlist => NetworkPosture::Allowlist,
        NetworkSetting::Open => NetworkPosture::Open,
    };
    spec.env = passed_env(settings);
    spec.read_only_paths = settings.read_only_paths.clone();
    spec.allow_weaker = settings.allow_weaker;
    spec.uid = settings.sandbox_uid();
    spec
}

/// The files of the records, given where the store file is (if any) and the audit
/// log: the store with its WAL and shared-memory files, and the log's directory.
pub fn record_paths(store: Option<&Path>, audit: Option<&AuditLog>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(db) = store {
        for suffix in ["", "-wal", "-shm"] {
            let mut p = db.as_os_str().to_os_string();
            p.push(suffix);
            out.push(PathBuf::from(p));
        }
    }
    if let Some(a) = audit {
        out.push(a.dir().to_path_buf());
    }
    out
}

/// With `network = "allowlist"` in `spec`: an egress proxy admitting `settings`'
/// hosts, and `spec` pointed at it, as a run's command gets.
pub async fn start_egress(
    settings: &SandboxSettings,
    spec: &mut RunSpec,
) -> Result<Option<EgressProxy>, SandboxError> {
    super::start_egress(settings, spec).await
}

/// The audit line of a session no run owns, built like a run's (a cap counts as hit
/// only where the backend enforced it).
pub fn session_line(
    spec: &RunSpec,
    workdir: &Path,
    out: &SandboxOutcome,
    egress: &EgressRecord,
) -> SessionRecord {
    SessionFacts {
        run_id: 0,
        step: 0,
        purpose: "sandbox",
        workdir,
        spec,
        out,
        egress,
    }
    .audit_line(None)
}
