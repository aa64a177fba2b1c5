//! Which store file a command uses: `--store`, then `IO_HARNESS_STORE` (both through
//! clap), then `$XDG_DATA_HOME/io-harness/store.db`, then
//! `~/.local/share/io-harness/store.db`. Only `run` creates the file; every other
//! command opens an existing one.

use std::path::PathBuf;

use super::{CliError, StoreArg};

pub fn resolve(arg: &StoreArg) -> Result<PathBuf, CliError> {
    if let Some(p) = &arg.store {
        return Ok(p.clone());
    }
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(x).join("io-harness").join("store.db"));
    }
    if let Some(h) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(h).join(".local/share/io-harness/store.db"));
    }
    Err(CliError::Usage(
        "no store location: pass --store or set IO_HARNESS_STORE, XDG_DATA_HOME or HOME".into(),
    ))
}

/// The store a run records into, created on first use.
pub fn open(arg: &StoreArg) -> Result<io_harness::Store, CliError> {
    let path = resolve(arg)?;
    let store = io_harness::Store::open(&path)
        .map_err(|e| CliError::Internal(format!("{}: {e}", path.display())))?;
    super::output::hold_secrets(store.secrets());
    Ok(store)
}

/// The store a command reads or answers (`runs`, `show`, `approve`, `memory`,
/// `resume`): it must exist. A mistyped path is a usage error (exit 2) naming it, and
/// nothing is created there.
pub fn open_existing(arg: &StoreArg) -> Result<io_harness::Store, CliError> {
    let path = resolve(arg)?;
    let store = io_harness::Store::open_existing(&path).map_err(|e| match e {
        io_harness::store::StoreError::Missing { .. } => CliError::Usage(e.to_string()),
        e => CliError::Internal(format!("{}: {e}", path.display())),
    })?;
    super::output::hold_secrets(store.secrets());
    Ok(store)
}
