//! The integration suite: one binary, a module per topic.

mod cli;
mod context;
#[cfg(feature = "failpoints")]
mod crash;
mod egress;
mod gates;
mod gates_workspace;
mod lock;
#[cfg(feature = "mcp")]
mod mcp;
mod memory;
mod policy;
mod providers;
mod run;
mod sandboxed;
mod store;
mod store_truth;
mod subagents;
mod timing;
mod tools;
