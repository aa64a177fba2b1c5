//! Which store file a command uses: `--store`, then `IO_HARNESS_STORE` (both through
//! clap), then `$XDG_DATA_HOME/io-harness/store.db`, then
//! `~/.local/share/io-harness/store.db`.

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

pub fn open(arg: &StoreArg) -> Result<io_harness::Store, CliError> {
    let path = resolve(arg)?;
    io_harness::Store::open(&path).map_err(|e| CliError::Failed(format!("{}: {e}", path.display())))
}
