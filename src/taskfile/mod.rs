//! Task files: TOML text into a validated [`TaskContract`], every error naming the
//! file, the line and the key, because the person fixing it is looking at that file.
//!
//! The contract itself is plain data with checks of its own (`contract`); this layer
//! sits above it and above the policy, since loading reads the operator's files
//! (criteria kept by content, a gate's script pinned by hash) and validation compiles
//! the policy's globs. It runs in three stages, each in its own module: [`raw`] reads
//! the TOML keeping every value's span, [`convert`] builds the contract section by
//! section noting where each key stood, and the validation of the finished contract
//! ([`TaskContract::validate`], in `preflight`) maps a failing key back to its line.

mod convert;
mod files;
#[cfg(test)]
mod fuzz;
mod mcp;
mod preflight;
mod raw;
mod sandbox;
#[cfg(test)]
mod tests;
mod verify_program;

use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::contract::{ContractError, TaskContract, line_of, unknown_key_name};

impl TaskContract {
    /// Loads and validates a task file (SPEC §3). Relative paths resolve against the
    /// file's directory.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ContractError> {
        from_file(path.as_ref())
    }

    /// [`TaskContract::from_file`] for a run about to start here: also refuses a
    /// `[verify] command` whose program the gate would not find on this host (see
    /// `verify_program`), naming file, line and key. A plain load does not look, since
    /// a task file is also read where it will not run (`doctor --task`, `mcp list`,
    /// another machine's checkout).
    pub fn from_file_to_run(path: impl AsRef<Path>) -> Result<Self, ContractError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ContractError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let (contract, spans) = load(&text, path)?;
        verify_program::check(&contract).map_err(|e| match e {
            ContractError::Field { key, message } => ContractError::Invalid {
                file: path.to_path_buf(),
                line: spans.find(&key).map_or(1, |s| line_of(&text, s.start)),
                key,
                message,
            },
            other => other,
        })?;
        Ok(contract)
    }

    /// Whether the `[verify] command` program can be found as its gate will look for it
    /// (the check [`TaskContract::from_file_to_run`] makes), for a contract built
    /// without a task file (`run --goal … --verify …`).
    pub fn check_verify_program(&self) -> Result<(), ContractError> {
        verify_program::check(self)
    }

    /// Parses and validates task-file text; `file` names it in errors and anchors
    /// relative paths.
    pub fn from_toml_str(text: &str, file: &Path) -> Result<Self, ContractError> {
        from_str(text, file)
    }
}

fn from_file(path: &Path) -> Result<TaskContract, ContractError> {
    let text = std::fs::read_to_string(path).map_err(|source| ContractError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    from_str(&text, path)
}

fn from_str(text: &str, file: &Path) -> Result<TaskContract, ContractError> {
    load(text, file).map(|(c, _)| c)
}

/// The contract and where each key stood.
fn load(text: &str, file: &Path) -> Result<(TaskContract, convert::Spans), ContractError> {
    let invalid = |span: Option<Range<usize>>, key: &str, message: String| ContractError::Invalid {
        file: file.to_path_buf(),
        line: span.map_or(1, |s| line_of(text, s.start)),
        key: key.to_string(),
        message,
    };
    let raw: raw::RawFile = toml::from_str(text).map_err(|e| {
        let message = e.message().trim().to_string();
        let key = unknown_key_name(&message).unwrap_or_else(|| "(syntax)".into());
        invalid(e.span(), &key, message)
    })?;
    let base = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let (contract, spans) =
        convert::contract(raw, &base).map_err(|(key, span, msg)| invalid(span, &key, msg))?;
    contract.validate().map_err(|e| match e {
        ContractError::Field { key, message } => invalid(spans.find(&key), &key, message),
        other => other,
    })?;
    // The instructions file is read from the workspace when the run starts; one that
    // is not there would be told to the model only.
    if let Some(i) = &contract.instructions
        && !contract.root.join(i).is_file()
    {
        let message = format!(
            "{} is not a file in the workspace {}",
            i.display(),
            contract.root.display()
        );
        return Err(invalid(spans.find("instructions"), "instructions", message));
    }
    Ok((contract, spans))
}
