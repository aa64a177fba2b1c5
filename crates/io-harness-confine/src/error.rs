//! What a confined access returns when it does not succeed.

use std::io;

use crate::ConfineError;

/// Why a confined access failed. Every variant names the path (relative to the root)
/// it was about, except [`Error::RootNotAFile`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path would leave the workspace or cross a symlink it may not.
    #[error(transparent)]
    Refused(#[from] ConfineError),
    /// Nothing is there.
    #[error("{0}: not found")]
    NotFound(String),
    /// A file was wanted and this is a directory.
    #[error("{0} is a directory")]
    IsADirectory(String),
    /// A file was wanted and this is a FIFO, socket or device.
    #[error("{0} is not a regular file")]
    NotAFile(String),
    /// A directory was wanted and this is something else.
    #[error("{0} is not a directory")]
    NotADirectory(String),
    /// A write to the root itself (`.`).
    #[error("the workspace root is not a file")]
    RootNotAFile,
    /// The file is larger than the caller accepts.
    #[error("{path}: {size} bytes is more than the {limit}-byte limit")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size (or what was read of it before the limit was passed).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Any other I/O failure.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: io::Error,
    },
}

impl Error {
    /// An I/O error on `rel`: not-found is its own variant, the rest keep the cause.
    pub fn io(rel: &str, e: impl Into<io::Error>) -> Self {
        let e = e.into();
        if e.kind() == io::ErrorKind::NotFound {
            Self::NotFound(rel.to_string())
        } else {
            Self::Io {
                path: rel.to_string(),
                source: e,
            }
        }
    }

    pub(crate) fn refused(rel: &str, why: &str) -> Self {
        Self::Refused(ConfineError::new(rel, why))
    }
}
