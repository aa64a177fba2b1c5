//! Connecting to the contract's servers, calling their tools, noticing when they die,
//! and recording all of it. One job per module:
//!
//! - `env`: what connecting needs from the run, and the listings it reports;
//! - `stdio` / `http`: starting a stdio process (sandboxed or plain) / dialing an
//!   HTTP endpoint, each up to the handshake;
//! - `connect`: one server's connection in phases — policy, start, handshake, tool
//!   discovery;
//! - `framing` / `pipe`: JSON-RPC over a stdio server's pipes, bounded, with a
//!   reply that cannot be used answered as a fault at once;
//! - `call`: one tool call under its timeout, and what the model is told;
//! - `server`: a connected server's life (dead once, closed at the end);
//! - `servers`: the run's servers as a whole;
//! - `process`: the process behind a stdio server and its stderr tail;
//! - `record`: the events all of this leaves in the store and the audit log.

mod call;
mod connect;
mod env;
mod framing;
mod http;
mod pipe;
mod process;
mod record;
mod server;
mod servers;
mod stdio;

use std::sync::{Mutex, PoisonError};

use crate::mcp::{McpServerSpec, McpTransport};

pub use env::{McpEnv, ServerListing, ToolListing};
pub(crate) use server::Server;
pub use servers::McpServers;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn transport_label(spec: &McpServerSpec) -> &'static str {
    match spec.transport {
        McpTransport::Stdio { .. } => "stdio",
        McpTransport::Http { .. } => "http",
    }
}
