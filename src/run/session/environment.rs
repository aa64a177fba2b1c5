//! The parts of a session's setup that every kind of session shares: its policy, the
//! provider endpoints that policy must allow, the tools' context, and the price check
//! a cost budget needs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{RunPolicy, Session};
use crate::contract::TaskContract;
use crate::policy::{Policy, PolicyDecision, PolicyGate, PolicyLayers};
use crate::provider::{Provider, ProviderIdentity};
use crate::run::setup;
use crate::run::{RunError, RunOptions};
use crate::store::{PolicyEvent, Store};
use crate::tools::{ToolContext, ToolLimits, Workspace};

impl RunPolicy {
    /// The run's policy: the caller's, or the stored layers of a resumed run, or the
    /// contract's. The harness keeps the layers on record when it built the policy.
    /// `saved` is what the store already holds of them.
    pub(super) fn resolve(
        opts: &RunOptions,
        contract: &TaskContract,
        backend: crate::sandbox::Backend,
        work: &Path,
        stored: Option<&str>,
    ) -> Result<Self, RunError> {
        let saved = stored.unwrap_or_default().to_string();
        if let Some(p) = &opts.policy {
            return Ok(Self {
                gate: p.clone(),
                owned: None,
                saved,
            });
        }
        let policy = match stored {
            Some(json) => policy_from_layers(json)?,
            None => setup::build_policy(contract, backend, work)?,
        };
        let p = Arc::new(policy);
        let gate = setup::run_gate(p.clone(), contract, work);
        Ok(Self {
            gate,
            owned: Some(p),
            saved,
        })
    }
}

/// A policy rebuilt from the layers a run keeps on record.
pub(in crate::run) fn policy_from_layers(json: &str) -> Result<Policy, RunError> {
    let layers: PolicyLayers =
        serde_json::from_str(json).map_err(|e| RunError::Policy(e.into()))?;
    Policy::from_layers(layers).map_err(|e| RunError::Policy(e.into()))
}

/// [`setup::check_endpoints`] over the primary provider and the fallbacks.
pub(super) fn check_chain_endpoints(
    provider: &dyn Provider,
    opts: &RunOptions,
    gate: &dyn PolicyGate,
) -> Result<Vec<PolicyDecision>, RunError> {
    let chain: Vec<&dyn Provider> = std::iter::once(provider)
        .chain(opts.fallbacks.iter().map(|p| p.as_ref() as &dyn Provider))
        .collect();
    setup::check_endpoints(&chain, gate)
}

/// The store and the audit log must lie outside the workspace: inside it, a command or
/// a tool could read other runs' records or destroy this one's, and a `copy` workspace
/// would carry a copy of them. Checked before anything is copied or written.
pub(super) fn check_record_outside(
    contract: &TaskContract,
    store: &Store,
    audit: Option<&crate::audit::AuditLog>,
) -> Result<(), RunError> {
    let root = std::fs::canonicalize(&contract.root).unwrap_or_else(|_| contract.root.clone());
    let canon = |p: &Path| {
        // The file may not exist yet: its directory decides where it lies.
        match (p.parent(), p.file_name()) {
            (Some(dir), Some(name)) => std::fs::canonicalize(dir)
                .map(|d| d.join(name))
                .unwrap_or_else(|_| p.to_path_buf()),
            _ => p.to_path_buf(),
        }
    };
    // The cache holds what the workspace must not see either: the run's baseline
    // snapshot (with the denied files), the gates' directories, the quarantine of a
    // store in memory.
    let records = store
        .path()
        .map(|p| ("store", canon(&p)))
        .into_iter()
        .chain(audit.map(|a| ("audit log", canon(a.dir()))))
        .chain(std::iter::once((
            "cache directory",
            canon(&crate::run::workdir::cache_dir()),
        )));
    for (what, path) in records {
        if path.starts_with(&root) {
            return Err(RunError::RecordInsideWorkspace {
                what,
                path: path.display().to_string(),
                workspace: root.display().to_string(),
            });
        }
    }
    // Another name for a record's file could lie in the workspace, where no path
    // comparison finds it: a record file with more than one link is refused.
    let files = store
        .path()
        .into_iter()
        .flat_map(|p| {
            let wal = PathBuf::from(format!("{}-wal", p.display()));
            [p, wal]
        })
        .chain(audit.map(|a| a.path()));
    for file in files {
        use std::os::unix::fs::MetadataExt;
        if let Ok(meta) = std::fs::symlink_metadata(&file)
            && meta.nlink() > 1
        {
            return Err(RunError::RecordInsideWorkspace {
                what: "hard-linked record file",
                path: format!("{} ({} links)", file.display(), meta.nlink()),
                workspace: root.display().to_string(),
            });
        }
    }
    Ok(())
}

/// A decision as the policy log records it.
pub(super) fn policy_event(run_id: i64, step: u32, d: &PolicyDecision) -> PolicyEvent {
    PolicyEvent {
        run_id,
        step,
        act: d.action.act.as_str().into(),
        target: d.action.target.clone(),
        decision: d.decision.as_str().into(),
        rule: d.rule.clone(),
        layer: d.layer.clone(),
    }
}

/// The tools' context: the confined workspace and an executor for commands, which
/// masks what the policy denies for reading.
#[allow(clippy::too_many_arguments)]
pub(super) fn tool_context(
    ws: Workspace,
    sandbox: Arc<dyn crate::sandbox::Sandbox>,
    contract: &TaskContract,
    dirs: &crate::run::workdir::WorkDirs,
    store: &Store,
    run_id: i64,
    opts: &RunOptions,
    policy: &Arc<dyn PolicyGate>,
) -> ToolContext {
    let work = &dirs.work;
    let exec = crate::exec::Executor::new(
        sandbox,
        contract.sandbox.clone(),
        work,
        store.clone(),
        run_id,
        opts.audit.clone(),
        Vec::new(),
    )
    .with_policy(policy.clone())
    .with_state_dir(&dirs.scratch)
    .with_dep_cache_max(contract.verify.dep_cache_max);
    // The first look at the tree: it fixes which repositories are the operator's.
    // A tree too large to look at is no error here: every session fails closed on it.
    let denied_files = match exec.refresh_masks_blocking() {
        Ok(m) => m.iter().map(|m| work.join(m)).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "the workspace cannot be indexed; its sessions will fail");
            Vec::new()
        }
    };
    let exec = Arc::new(exec);
    let memory = crate::tools::MemoryContext {
        store: store.clone(),
        workspace: contract.root.display().to_string(),
        run_id,
        denied_files,
        exec: Some(exec.clone()),
    };
    ToolContext {
        workspace: Arc::new(ws),
        limits: ToolLimits::default(),
        exec: Some(exec),
        read_gate: Some(policy.clone()),
        memory: Some(Arc::new(memory)),
    }
}

pub(super) fn workspace_err(path: &Path, source: std::io::Error) -> RunError {
    RunError::Workspace {
        path: path.display().to_string(),
        source,
    }
}

/// A cost budget needs a known price for the model that actually answers.
pub(super) fn check_price(contract: &TaskContract, id: &ProviderIdentity) -> Result<(), RunError> {
    let mut spec = crate::contract::ProviderSpec::new(match id.kind.as_str() {
        "openai" => crate::contract::ProviderKind::Openai,
        "anthropic" => crate::contract::ProviderKind::Anthropic,
        _ => return Ok(()),
    });
    spec.model = Some(id.model.clone());
    crate::contract::check_cost_price(contract, &spec, &contract.price_table()).map_err(Into::into)
}

impl Session<'_> {
    /// Keeps the policy's layers with the run whenever they changed (an approval
    /// remembered), so a resume applies exactly them.
    pub(super) async fn save_policy(&mut self) {
        let Some(p) = &self.tools.policy.owned else {
            return;
        };
        let Ok(json) = serde_json::to_string(&p.layers()) else {
            return;
        };
        if json != self.tools.policy.saved {
            if let Err(e) = self.store.set_run_policy(self.run.id, json.clone()).await {
                tracing::warn!(error = %e, "could not store the policy layers");
            }
            self.tools.policy.saved = json;
        }
    }
}
