//! The MCP client (C14): servers declared in the contract (`[[mcp]]`), connected at
//! run start, their tools offered to the model as `mcp__<server>__<tool>`.
//!
//! # Why this shape
//!
//! - **The protocol is the official SDK's** (`rmcp`): the handshake, JSON-RPC
//!   correlation, cancellation and the streamable-HTTP session are its job. This
//!   module owns what the harness adds around it: where a server runs, what the
//!   policy says, what is recorded, and what the model sees.
//! - **A stdio server is a sandboxed process like any command.** It is started through
//!   [`crate::sandbox::Sandbox::spawn`] (same backend, network posture, hidden paths
//!   and masks as the run's commands) and rmcp speaks over the handle's pipes. Only an
//!   explicit `sandbox = false` runs it as a plain child, and the `connected` event
//!   then says `"sandbox": "none"`. Its stderr is drained into a bounded tail that
//!   failure records quote.
//! - **Every door is a policy decision.** Starting a stdio server is an `exec` decision
//!   on its program; connecting over HTTP a `net` decision on `host:port` (checked
//!   before dialing, C15); each call an `exec` decision on the qualified tool name,
//!   taken by the ordinary tool dispatcher. A server the contract declares is allowed
//!   by layer `mcp` where only the defaults would refuse it; an operator rule that
//!   denies (or asks about) it wins, and the server is not started.
//! - **Failures are observations, not crashes.** A failed call, a timeout or a dead
//!   server comes back to the model as an error result; a server that died is
//!   recorded once and its tools answer "not running" from then on. Only a server the
//!   contract marks `required` ends the run (`McpRequiredServerFailed`).
//! - **Secrets stay out.** A bearer token is read from the variable the contract
//!   names, registered with the store's redactor, and never written anywhere.
//!
//! What is recorded is described on [`crate::store::McpEvent`].

//!
//! # The `mcp` feature
//!
//! Everything that starts or talks to a server (and the `rmcp` dependency) is behind
//! the crate's `mcp` feature, on by default. Without it the contract's description of
//! servers ([`McpServerSpec`], [`McpTransport`], the default timeouts) still exists,
//! so a task file declaring `[[mcp]]` still parses, but [`AVAILABLE`] is `false` and a
//! run whose contract declares servers is refused at start.

#[cfg(feature = "mcp")]
mod client;
#[cfg(feature = "mcp")]
mod paths;
#[cfg(feature = "mcp")]
mod tool;

pub use crate::contract::mcp::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, McpServerSpec, McpTransport,
};
#[cfg(feature = "mcp")]
pub use client::{McpEnv, McpServers, ServerListing, ToolListing};
#[cfg(feature = "mcp")]
pub use tool::{McpTool, adapt_schema, qualified_name};

/// Whether this build can start MCP servers (the crate's `mcp` feature). A caller
/// holding a contract that declares `[[mcp]]` servers refuses it when this is `false`.
pub const AVAILABLE: bool = cfg!(feature = "mcp");

/// The name of the crate feature that starting MCP servers needs.
pub const FEATURE: &str = "mcp";

/// Connects `specs` under `env` the way a run would, lists what each offers, and
/// closes them. Nothing is recorded when `env` has no store. `io-harness mcp list`
/// gets here through `run::list_servers`, which builds `env` from a contract.
#[cfg(feature = "mcp")]
pub async fn list(specs: &[McpServerSpec], env: McpEnv) -> Vec<ServerListing> {
    let servers = McpServers::connect(specs, env).await;
    let listing = servers.listing();
    servers.close();
    listing
}

/// Stands in for the servers of a run in a build without the `mcp` feature: it cannot
/// be made (a run that declares servers is refused before any would start), so a run
/// holds `None` of it.
#[cfg(not(feature = "mcp"))]
#[derive(Debug, Clone)]
pub struct McpServers {
    never: std::convert::Infallible,
}

#[cfg(not(feature = "mcp"))]
impl McpServers {
    /// Never called: no value exists.
    pub fn set_step(&self, _step: u32) {
        match self.never {}
    }

    /// Never called: no value exists.
    pub fn required_failed(&self) -> Option<String> {
        match self.never {}
    }

    /// Never called: no value exists.
    pub fn close(&self) {
        match self.never {}
    }
}
