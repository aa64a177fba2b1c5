//! Why a contract cannot be run: one error type for task files (with file, line and
//! key) and for contracts built in code (with the key).

use std::path::PathBuf;

/// A contract that cannot be run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContractError {
    /// The task file could not be read.
    #[error("cannot read task file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A key of the task file is unknown, mistyped or impossible.
    #[error("{}:{line}: {key}: {message}", file.display())]
    Invalid {
        /// The task file.
        file: PathBuf,
        /// 1-based line of the offending key or value.
        line: usize,
        /// Dotted key (`budget.max_steps`), or `(syntax)` for a parse error.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A field of a contract built in code is impossible.
    #[error("{key}: {message}")]
    Field {
        /// Dotted field name.
        key: String,
        /// What is wrong.
        message: String,
    },
}
