//! The integration suite: one binary, a module per topic.

mod cli;
mod context;
#[cfg(feature = "failpoints")]
mod crash;
mod egress;
mod gates;
mod gates_workspace;
mod halt;
mod kill;
#[cfg(feature = "mcp")]
mod mcp;
mod memory;
mod policy;
mod providers;
mod resume_anywhere;
mod run;
mod sandboxed;
mod store;
mod subagents;
mod timing;
mod tokens;
mod tools;
