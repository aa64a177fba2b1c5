//! What a run needs before its first step: the sandbox its commands run in, the policy
//! its tool calls pass, and the workspace paths that policy masks inside the sandbox.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{PolicyFailure, RunError, SandboxFailure};
use crate::contract::TaskContract;
use crate::policy::{
    Act, Action, Decision, Isolation, Policy, PolicyError, PolicyGate, ProjectPolicy,
};
use crate::sandbox::{self, Backend, Sandbox};

/// The contract's required backend, or the strongest that works here. A required
/// backend that is unavailable is a configuration error: the run does not start.
pub(crate) fn choose_sandbox(contract: &TaskContract) -> Result<Arc<dyn Sandbox>, RunError> {
    choose_for(&contract.sandbox)
}

/// [`choose_sandbox`] for `[sandbox]` settings alone (a command outside any run).
pub(crate) fn choose_for(
    settings: &crate::contract::SandboxSettings,
) -> Result<Arc<dyn Sandbox>, RunError> {
    let chosen = match &settings.require {
        Some(label) => {
            let backend: Backend =
                label
                    .parse()
                    .map_err(|e: sandbox::UnknownBackend| RunError::Sandbox {
                        source: e.into(),
                        usage: true,
                    })?;
            sandbox::require(backend).map_err(|source| RunError::Sandbox {
                source: SandboxFailure::Required {
                    label: label.clone(),
                    source,
                },
                usage: true,
            })?
        }
        None => sandbox::select().map_err(|e| RunError::Sandbox {
            source: SandboxFailure::Select(e),
            usage: false,
        })?,
    };
    Ok(Arc::from(chosen))
}

/// The contract's policy, with commands allowed by default only under the native
/// backend, and the workspace's project file (which can only narrow it).
pub(crate) fn build_policy(
    contract: &TaskContract,
    backend: Backend,
    work: &Path,
) -> Result<Policy, RunError> {
    let policy = Policy::for_contract(contract).map_err(|e| RunError::Policy(e.into()))?;
    finish_policy(policy, backend, work)
}

/// The layers every policy of a run adds to its own: the `exec` default of `backend`
/// and the workspace's project file (which can only narrow).
pub(crate) fn finish_policy(
    policy: Policy,
    backend: Backend,
    work: &Path,
) -> Result<Policy, RunError> {
    let isolation = match backend {
        Backend::LinuxNamespaces | Backend::MacosSandboxExec => Isolation::Native,
        _ => Isolation::Weaker,
    };
    let policy_err = |e: PolicyError| RunError::Policy(e.into());
    let mut policy = policy.with_exec_isolation(isolation);
    let project =
        ProjectPolicy::load(work).map_err(|e| RunError::Policy(PolicyFailure::Project(e)))?;
    for ignored in &project.ignored {
        tracing::warn!(rule = ?ignored.rule, reason = %ignored.reason, "project policy rule ignored");
    }
    policy = policy.with_project(&project).map_err(policy_err)?;
    Ok(policy)
}

/// The gate a run's tool calls pass: `policy`, with registry settings files judged by
/// their content ([`crate::policy::CredentialContent`]) and every file it denies
/// reading followed through renames and links ([`crate::policy::FollowDenied`],
/// bounded by `[sandbox] scan_limit`), for every consumer alike (tools, masks, diff,
/// memory).
pub(crate) fn run_gate(
    policy: Arc<dyn PolicyGate>,
    contract: &TaskContract,
    work: &Path,
) -> Arc<dyn PolicyGate> {
    let limit = contract
        .sandbox
        .scan_limit
        .unwrap_or(crate::exec::tree::DEFAULT_SCAN_LIMIT);
    let content = Arc::new(crate::policy::CredentialContent::new(policy, work));
    Arc::new(crate::policy::FollowDenied::new(content, work, limit))
}

/// For a sandbox started outside a run's executor (`io-harness sandbox`, `mcp list`):
/// the workspace files the policy denies for reading, masked inside so a command cannot
/// read what `read_file` may not (ignored files included — `.env` is usually ignored —
/// links not followed), and the outermost paths it denies writing but not reading,
/// held read-only; both absolute. The denied files of the host trees the view shows
/// beside it (`visible`: `[sandbox] read_only_paths`) are masked too. A tree too large
/// to look at whole masks the whole tree rather than part of it.
pub(crate) fn view_paths(
    work: &Path,
    visible: &[PathBuf],
    gate: &dyn PolicyGate,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut masked, protected) = workspace_view_paths(work, gate);
    masked.extend(crate::exec::visible_tree_masks(
        visible,
        gate,
        crate::exec::tree::DEFAULT_SCAN_LIMIT,
    ));
    (masked, protected)
}

/// [`view_paths`] of the workspace alone.
fn workspace_view_paths(work: &Path, gate: &dyn PolicyGate) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut index = crate::exec::tree::TreeIndex::new(work, crate::exec::tree::DEFAULT_SCAN_LIMIT);
    let judge = |target: &str| crate::exec::tree::Access::decided_by(gate, target);
    match index.refresh(&judge, false) {
        Ok(_) => {
            let abs =
                |v: Vec<PathBuf>| -> Vec<PathBuf> { v.into_iter().map(|p| work.join(p)).collect() };
            let mut masked = abs(index.denied());
            masked.extend(crate::exec::denied_programs(gate));
            (masked, abs(index.read_only()))
        }
        Err(e) => {
            tracing::warn!(error = %e, "workspace scan failed; masking all of it");
            (vec![work.to_path_buf()], Vec::new())
        }
    }
}

/// The harness's own connections (C15): each provider endpoint of the chain is a `net`
/// action checked before anything dials it. The provider layer allows the endpoint the
/// operator configured (naming where it came from: task file, flag, environment or
/// default) where the defaults alone would deny it; a rule an operator wrote that
/// denies it wins, and the run does not start.
pub(crate) fn check_endpoints(
    providers: &[&dyn crate::provider::Provider],
    gate: &dyn PolicyGate,
) -> Result<Vec<crate::policy::PolicyDecision>, RunError> {
    let mut out = Vec::new();
    for p in providers {
        let Some(base) = p.identity().base_url else {
            continue;
        };
        let Ok(url) = reqwest::Url::parse(&base) else {
            continue;
        };
        if !matches!(url.scheme(), "http" | "https") {
            continue;
        }
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            continue;
        };
        let action = Action::new(Act::Net, format!("{host}:{port}"));
        let d = gate.decide(&action);
        let operator_rule = d.rule != "default";
        match d.decision {
            Decision::Deny if operator_rule => {
                return Err(RunError::Policy(PolicyFailure::EndpointDenied {
                    target: action.target,
                    rule: d.rule,
                    layer: d.layer,
                }));
            }
            Decision::Allow if operator_rule => out.push(d),
            _ => out.push(crate::policy::PolicyDecision {
                action,
                decision: Decision::Allow,
                rule: format!(
                    "provider endpoint ({})",
                    p.endpoint_source()
                        .unwrap_or_else(|| "given by the caller".into())
                ),
                layer: "provider".into(),
            }),
        }
    }
    Ok(out)
}

/// The decision recorded for a redirect the provider client refused to follow to
/// `target` (`host:port`): a `net` action denied, since nothing decided on that
/// destination before the server named it (C15: no redirect is followed to another
/// host without a decision).
pub(crate) fn redirect_decision(target: &str) -> crate::policy::PolicyDecision {
    crate::policy::PolicyDecision {
        action: Action::new(Act::Net, target.to_string()),
        decision: Decision::Deny,
        rule: "redirect from a provider endpoint is never followed".into(),
        layer: "provider".into(),
    }
}
