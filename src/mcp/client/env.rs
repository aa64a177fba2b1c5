//! What connecting needs from the run, and what a listing reports back.

use std::path::PathBuf;
use std::sync::Arc;

use crate::contract::SandboxSettings;
use crate::policy::PolicyGate;
use crate::sandbox::Sandbox;
use crate::store::Store;

/// What connecting needs from the run. Built by the run at start; `mcp list` builds
/// one without a store.
#[derive(Clone)]
pub struct McpEnv {
    /// Where events go; `None` records nothing (`io-harness mcp list`).
    pub store: Option<Store>,
    /// The run the events belong to.
    pub run_id: i64,
    /// Decides starting, connecting and (through the dispatcher) each call.
    pub gate: Arc<dyn PolicyGate>,
    /// The run's sandbox; a stdio server that asks for the sandbox fails to start
    /// without one.
    pub sandbox: Option<Arc<dyn Sandbox>>,
    /// The directory a stdio server runs in (the run's workspace).
    pub workdir: PathBuf,
    /// The contract's sandbox settings: network posture, env names, limits, extra
    /// read-only paths.
    pub settings: SandboxSettings,
    /// Workspace paths the policy denies for reading, masked inside the sandbox.
    pub masked: Vec<PathBuf>,
    /// Workspace paths the policy denies writing (the instructions file, a gate's
    /// files), held read-only inside the sandbox.
    pub protected: Vec<PathBuf>,
    /// The step events are recorded under until [`super::McpServers::set_step`] says
    /// otherwise.
    pub step: u32,
    /// Where a sandboxed server's session is logged when it ends (C18); `None` logs
    /// nothing.
    pub audit: Option<crate::audit::AuditLog>,
}

/// One tool as offered, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolListing {
    /// The name the model calls (`mcp__server__tool`).
    pub qualified: String,
    /// The server's own name.
    pub name: String,
    /// The server's description (bounded).
    pub description: String,
}

/// One server as connected (or not), for `io-harness mcp list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerListing {
    /// Its name in the contract.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// What the handshake said (implementation name, version, protocol version,
    /// where it runs and, for one outside the sandbox, whether it could read the
    /// harness's memory), as recorded in the `connected` event; `None` if it failed.
    pub info: Option<serde_json::Value>,
    /// Tools offered.
    pub tools: Vec<ToolListing>,
    /// Tools withheld by the allow/deny lists (or past the cap of 128 per server).
    pub hidden: Vec<String>,
    /// Tools the contract's `path_args` names that the server does not list.
    pub path_args_unmatched: Vec<String>,
    /// Why it is not available, if it is not.
    pub failure: Option<String>,
}
