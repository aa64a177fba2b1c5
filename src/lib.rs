//! io-harness: runs an AI coding agent from a typed task contract to a verified result.
#![forbid(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]

pub mod audit;
pub mod contract;
pub mod egress;
pub mod exec;
mod failpoint;
pub mod policy;
pub mod provider;
pub mod sandbox;
pub mod store;
pub mod tools;

pub use contract::{TaskContract, Verification};
pub use provider::{Provider, ProviderErrorKind};
pub use sandbox::{Backend, Cap, RunSpec, Sandbox, SandboxLimits, SandboxOutcome};
pub use store::{SandboxEvent, Store};
pub mod run;
pub mod verify;

pub use run::{RunOptions, RunOutcome, RunResult, resume, run, run_with};
