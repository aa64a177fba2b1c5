//! STUB: race-free confinement to the workspace root; being implemented.

use std::path::{Path, PathBuf};

/// A path that would leave the workspace.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct ConfineError {
    /// The path as given.
    pub path: String,
    /// Why it was refused.
    pub reason: String,
}

/// The workspace root, opened once; every access resolves beneath it.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// Opens the root directory.
    pub fn open(root: &Path) -> std::io::Result<Self> {
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    /// The root path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Lexically checks and normalizes a relative path (`a/./b` → `a/b`).
    pub fn normalize(&self, rel: &str) -> Result<String, ConfineError> {
        Ok(rel.to_string())
    }

    /// Reads a file beneath the root without following any symlink out of it.
    pub fn read(&self, _rel: &str) -> Result<Vec<u8>, crate::tools::ToolError> {
        todo!()
    }

    /// Writes (creating parents) a file beneath the root.
    pub fn write(&self, _rel: &str, _bytes: &[u8]) -> Result<(), crate::tools::ToolError> {
        todo!()
    }
}
