//! The integration suite: one binary, a module per topic.

mod batch;
mod batch_cost;
mod bounded;
mod chromium;
mod cli;
mod cli_support;
mod context;
#[cfg(feature = "failpoints")]
mod crash;
mod docs_env;
mod egress;
mod gate_cache;
mod gates;
mod gates_command;
mod gates_report;
mod gates_workspace;
mod halt;
mod json_schema;
mod kill;
mod lock;
#[cfg(feature = "mcp")]
mod mcp;
mod memory;
#[cfg(feature = "otel")]
mod otel;
#[cfg(feature = "otel")]
mod otel_adversary;
#[cfg(all(feature = "otel", feature = "failpoints"))]
mod otel_sessions;
mod policy;
mod providers;
mod report;
mod resume_anywhere;
mod run;
mod sandbox_cmd;
mod sandboxed;
mod secrets;
mod start;
mod stepcost;
mod store;
mod store_truth;
mod subagents;
mod take_result;
mod timing;
mod tokens;
mod tools;
mod untrusted;
mod upfront;
mod weak_replies;
mod workspace_guard;
