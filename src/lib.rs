//! io-harness runs an AI coding agent from a typed task contract to a verified result,
//! and leaves a record that says what ran, where, how it was isolated, what it cost and
//! whether the result was really checked.
//!
//! # A run in one call
//!
//! ```
//! use io_harness::provider::{ScriptTurn, Scripted};
//! use io_harness::{RunOutcome, Store, TaskContract, Verification, run};
//! use serde_json::json;
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let workspace = tempfile::tempdir().unwrap();
//! let contract = TaskContract::workspace(
//!     "write hello.txt",
//!     workspace.path(),
//!     Verification::file_contains("hello.txt", "hello"),
//! )
//! .max_steps(5);
//! // A real model would be `OpenAi`, `Anthropic` or `OpenRouter`; a script answers here.
//! let model = Scripted::new(vec![
//!     ScriptTurn::tool("write_file", json!({"path": "hello.txt", "content": "hello\n"})),
//!     ScriptTurn::text("done"),
//! ]);
//! let store = Store::memory().unwrap();
//! let result = run(&contract, &model, &store).await.unwrap();
//! assert_eq!(result.outcome, RunOutcome::Success);
//! // The record: every step, tool call and policy decision.
//! assert_eq!(store.steps(result.run_id).unwrap().len(), 2);
//! # });
//! ```
//!
//! # What an embedder needs
//!
//! The items at the crate root are the whole of a run: a [`TaskContract`] (built in
//! code, or [`TaskContract::from_file`]), a [`Provider`], a [`Store`], then [`run()`],
//! [`resume`] or [`run_with`] with [`RunOptions`] (an [`Observer`] of [`RunEvent`]s that
//! can cancel, an [`Approver`] for `ask` decisions, a [`Policy`] of your own). The
//! outcome is a [`RunResult`] whose [`RunOutcome`] maps to the CLI's exit codes; a run
//! that cannot start is a [`RunError`] (a [`ContractError`] for a bad contract). The
//! modules below hold the rest, for programs that go deeper.
//!
//! # The parts, in the order a run meets them
//!
//! - [`contract`]: the [`TaskContract`] as plain data — goal, workspace,
//!   [`Verification`], budgets, providers, sandbox, policy — with a `check()` per
//!   section; task files are loaded into it, every error naming file, line and key.
//! - [`provider`]: the object-safe [`Provider`] trait, the OpenAI, OpenRouter and
//!   Anthropic clients over HTTP+SSE, `Scripted` and `Record`, retry and fallback.
//! - [`policy`]: layered rules deciding `read`, `write`, `exec` and `net`, and the
//!   approval gate.
//! - [`exec`]: runs a run's commands in its sandbox and records each one.
//! - [`tools`]: the workspace tools, confined to the root race-free
//!   (`io-harness-confine`), and the registry that passes every call through the policy.
//! - [`verify`]: checks the criteria against the workspace the agent produced.
//! - [`context`]: the request each turn sends, assembled from the full history under a
//!   token budget (stubs for superseded observations, re-reads of stale ones).
//! - [`mcp`]: tools served by MCP servers (stdio through the sandbox, or streamable
//!   HTTP), offered as `mcp__<server>__<tool>` under the same policy and record
//!   (feature `mcp`).
//! - [`halt`]: the run's cancel token and deadline as one value every wait observes
//!   (model call, command, gate, MCP call, approval prompt).
//! - [`untrusted`]: the per-run frame around text the operator did not write
//!   (instructions, memory notes, MCP results, sub-agent summaries, gate output).
//! - [`mod@run`]: the engine ([`run()`], [`resume`], [`run_with`]), its outcomes,
//!   observers, budgets, stall detection and sub-agents.
//! - [`store`]: the SQLite record (runs, steps, events, journal, memory) that resume and
//!   `io-harness show` read.
//! - [`audit`]: the JSONL log of sandbox sessions beside the store.
//! - [`env_vars`]: every environment variable the harness reads, with its meaning.
//! - [`conceal`]: the opt-in hardening of the harness's own process (environment
//!   block blanked, non-dumpable) that `io-harness` applies and the library never does.
//! - [`redact`]: the credentials every record and terminal line is cleaned of, in
//!   whatever disguise (invisible characters, JSON escapes, base64).
//! - [`sandbox`] (crate `io-harness-sandbox`): the per-command isolation — native Linux
//!   namespaces with Landlock and seccomp, or the portable floor — reporting the layers
//!   it really applied.
//! - [`egress`] (crate `io-harness-egress`): the allowlisting proxy that is a sandbox's
//!   only way out under `network = "allowlist"`.
//!
//! # Features
//!
//! `cli` (the `io-harness` binary), `mcp` (the MCP client and `rmcp`) and `exact-tokens`
//! (exact OpenAI token counts with `tiktoken-rs`) are on by default. Without one, a
//! contract that needs it is refused before anything runs, naming the key and the
//! feature.
#![forbid(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]

pub mod audit;
pub mod conceal;
pub mod config;
pub mod context;
pub mod contract;
mod digest;
pub use io_harness_egress as egress;
pub mod env_vars;
pub mod exec;
mod failpoint;
#[cfg(test)]
mod fuzz;
pub mod halt;
pub mod mcp;
#[cfg(feature = "otel")]
pub mod otel;
pub mod policy;
pub mod provider;
pub mod redact;
pub mod report;
pub mod run;
pub use io_harness_sandbox as sandbox;
pub mod store;
mod taskfile;
pub mod tools;
pub mod untrusted;
pub mod verify;

pub use contract::{ContractError, TaskContract, Verification};
pub use policy::{Approver, Decision, Policy};
pub use provider::{Provider, ProviderErrorKind, RetryPolicy};
pub use run::{
    CancelToken, Observer, RunError, RunEvent, RunOptions, RunOutcome, RunResult, StallPolicy,
    resume, run, run_with,
};
pub use sandbox::{Backend, Cap, RunSpec, Sandbox, SandboxLimits, SandboxOutcome};
pub use store::{McpEvent, SandboxEvent, Store, StoreError};
