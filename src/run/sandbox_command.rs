//! One command outside any run (`io-harness sandbox -- CMD`), isolated exactly as a
//! run's command would be: the sandbox a run of the contract would choose, the
//! contract's `[sandbox]` settings, the policy's masks over the working directory
//! (what `read_file` would refuse is unreadable inside), the store and the audit log
//! hidden, and the policy's `exec` decision on the program. Without a contract the
//! policy is the built-in layer (with the directory's project file, which can only
//! narrow it) and the settings are the defaults.
//!
//! Nothing is recorded here: the caller runs the spec and writes its audit line.

use std::path::Path;
use std::sync::Arc;

use super::{RunError, setup};
use crate::audit::AuditLog;
use crate::contract::{SandboxSettings, TaskContract};
use crate::exec::standalone;
use crate::policy::{Act, Action, Policy, PolicyDecision, PolicyGate};
use crate::sandbox::{RunSpec, Sandbox};

/// A command ready to run outside any run.
#[non_exhaustive]
pub struct StandaloneCommand {
    /// The spec: settings and masks applied.
    pub spec: RunSpec,
    /// The sandbox a run would choose (`settings.require`, else the strongest here).
    pub sandbox: Arc<dyn Sandbox>,
    /// The policy's decision on running the program: a `deny` means a run's agent
    /// could not run it, and the caller should not either.
    pub decision: PolicyDecision,
}

/// Prepares `argv` in `workdir` under `settings` and the policy of `contract` (the
/// built-in layer without one). `store` is the store file a run would record into
/// and `audit` its audit log: the view does not show them, and where they lie under
/// `workdir` they are masked.
pub fn standalone_command(
    contract: Option<&TaskContract>,
    settings: &SandboxSettings,
    workdir: &Path,
    argv: Vec<String>,
    store: Option<&Path>,
    audit: Option<&AuditLog>,
) -> Result<StandaloneCommand, RunError> {
    let sandbox = setup::choose_for(settings)?;
    let policy = match contract {
        Some(c) => setup::build_policy(c, sandbox.backend(), workdir)?,
        None => setup::finish_policy(Policy::builtin(), sandbox.backend(), workdir)?,
    };
    // The gate a run's tools get: registry settings judged on their content too.
    let gate = crate::policy::CredentialContent::new(std::sync::Arc::new(policy), workdir);
    let line = crate::policy::command_line::quote(&argv);
    let decision = gate.decide(&Action::new(Act::Exec, line));
    let mut spec = standalone::command_spec(settings, workdir, argv);
    (spec.masked_paths, spec.protected_paths) =
        setup::view_paths(workdir, &settings.read_only_paths, &gate);
    // The view shows nothing of the host but what is listed; the records can only be
    // seen where they lie under the working directory, and are masked there.
    for record in standalone::record_paths(store, audit) {
        if record.starts_with(workdir) && record.exists() {
            spec.masked_paths.push(record);
        }
    }
    Ok(StandaloneCommand {
        spec,
        sandbox,
        decision,
    })
}
