//! The criterion set of a command gate (#14 class 4): the workspace files a gate's
//! runner reads that would let the agent redirect what the gate executes — cargo's
//! config and toolchain files, pytest's `conftest.py` and ini sections, `sitecustomize`,
//! bytecode, modules shadowing the runner, npm rc files and `package.json` scripts,
//! `node_modules/.bin` shims, Makefiles, `go.mod` `replace` and `go.work` — plus the
//! operator's `criterion_paths`, minus `criterion_exclude`.
//!
//! The set is chosen from the gate's argv after unwrapping launchers
//! ([`crate::verify::ecosystem::classify`]); an unknown program gets only the
//! operator's paths. Its baseline is kept in the stored contract when the run starts
//! ([`keep_baselines`]); before every run of the gate the set is restored from that
//! copy in the live workspace, never from the live files (see `restore`).

mod baseline;
mod restore;
mod rules;
mod sections;
mod walk;

pub use baseline::{MAX_BASELINE_BYTES, adopt_baselines, keep_baselines};
pub(crate) use restore::{Restored, changed_pins, restore};
