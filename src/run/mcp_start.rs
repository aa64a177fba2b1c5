//! The run's MCP servers: connected once the run exists (so every event has a run to
//! belong to), their tools added to the registry before the first request.

use std::sync::Arc;

use super::{RunError, RunOptions};
use crate::contract::TaskContract;
#[cfg(feature = "mcp")]
use crate::mcp::McpEnv;
use crate::mcp::McpServers;
use crate::policy::PolicyGate;
use crate::store::Store;
use crate::tools::ToolContext;

/// Refuses a contract that declares `[[mcp]]` servers in a build without the `mcp`
/// feature, before anything is started or recorded.
pub(in crate::run) fn require_available(contract: &TaskContract) -> Result<(), RunError> {
    if contract.mcp.is_empty() || crate::mcp::AVAILABLE {
        return Ok(());
    }
    Err(RunError::FeatureMissing {
        key: "mcp",
        feature: crate::mcp::FEATURE,
    })
}

/// Connects the contract's servers (none: `None`, nothing started) and registers
/// their tools in `opts.tools`. `step` is the step events are recorded under (0 at a
/// fresh start, the last committed step on resume).
#[cfg(feature = "mcp")]
#[allow(clippy::too_many_arguments)]
pub(super) async fn connect(
    contract: &TaskContract,
    store: &Store,
    run_id: i64,
    step: u32,
    sandbox: Arc<dyn crate::sandbox::Sandbox>,
    ctx: &ToolContext,
    policy: &Arc<dyn PolicyGate>,
    opts: &mut RunOptions,
) -> Option<McpServers> {
    if contract.mcp.is_empty() {
        return None;
    }
    let (masked, protected) = start_paths(ctx, contract, policy.as_ref()).await;
    let env = McpEnv {
        store: Some(store.clone()),
        run_id,
        gate: policy.clone(),
        sandbox: Some(sandbox),
        workdir: ctx.workspace.root().to_path_buf(),
        settings: contract.sandbox.clone(),
        masked,
        protected,
        step,
        audit: opts.audit.clone(),
    };
    let servers = McpServers::connect(&contract.mcp, env).await;
    let mut tools = opts.tools.clone();
    for t in servers.tools() {
        tools = tools.with(t);
    }
    opts.tools = tools;
    Some(servers)
}

/// The masks and read-only paths of the servers' sessions, from the workspace as it is
/// when they start: the executor's look (a tree it cannot look at whole masks its top
/// instead of nothing), or without one a full scan.
#[cfg(feature = "mcp")]
async fn start_paths(
    ctx: &ToolContext,
    contract: &TaskContract,
    policy: &dyn PolicyGate,
) -> (Vec<std::path::PathBuf>, Vec<std::path::PathBuf>) {
    let (root, visible) = (&contract.root, &contract.sandbox.read_only_paths);
    match &ctx.exec {
        Some(e) => match e.view_paths().await {
            Ok(paths) => paths,
            Err(err) => {
                tracing::warn!(error = %err, "workspace scan failed; the MCP servers see none of it");
                (vec![e.workdir().to_path_buf()], Vec::new())
            }
        },
        None => super::setup::view_paths(root, visible, policy),
    }
}

/// Without the `mcp` feature nothing is connected ([`require_available`] has refused
/// a contract that declares servers).
#[cfg(not(feature = "mcp"))]
#[allow(clippy::too_many_arguments)]
pub(super) async fn connect(
    _contract: &TaskContract,
    _store: &Store,
    _run_id: i64,
    _step: u32,
    _sandbox: Arc<dyn crate::sandbox::Sandbox>,
    _ctx: &ToolContext,
    _policy: &Arc<dyn PolicyGate>,
    _opts: &mut RunOptions,
) -> Option<McpServers> {
    None
}

/// Connects the servers of `contract` the way a run would — same sandbox choice, same
/// policy (project file included), workspace as the working directory — lists what
/// each offers, and closes them. Nothing is recorded. For `io-harness mcp list`.
#[cfg(feature = "mcp")]
pub async fn list_servers(
    contract: &TaskContract,
) -> Result<Vec<crate::mcp::ServerListing>, RunError> {
    let mut contract = contract.clone();
    contract.validate()?;
    contract.resolve_root()?;
    let sandbox = super::setup::choose_sandbox(&contract)?;
    let policy: Arc<dyn PolicyGate> = Arc::new(super::setup::build_policy(
        &contract,
        sandbox.backend(),
        &contract.root,
    )?);
    let (masked, protected) = super::setup::view_paths(
        &contract.root,
        &contract.sandbox.read_only_paths,
        policy.as_ref(),
    );
    let env = McpEnv {
        store: None,
        run_id: 0,
        gate: policy.clone(),
        sandbox: Some(sandbox),
        workdir: contract.root.clone(),
        settings: contract.sandbox.clone(),
        masked,
        protected,
        step: 0,
        audit: None,
    };
    Ok(crate::mcp::list(&contract.mcp, env).await)
}
