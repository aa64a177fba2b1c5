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

mod client;
mod tool;

pub(crate) use client::hidden_paths;
pub use client::{McpEnv, McpServers, ServerListing, ToolListing};
/// The server specs are contract data; `config` keeps the old path for this module.
mod config {
    pub use crate::contract::mcp::{McpServerSpec, McpTransport};
}

pub use crate::contract::mcp::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, McpServerSpec, McpTransport,
};
pub use tool::{McpTool, adapt_schema, qualified_name};

/// Connects the servers of a contract the way a run would, lists their tools, and
/// closes them (`io-harness mcp list`). See [`crate::run::list_servers`].
pub use crate::run::list_servers as list;
