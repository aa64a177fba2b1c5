//! The tools' view of the confined workspace: [`io_harness_confine`] with its errors
//! as [`ToolError`], worded exactly as the tools have always reported them.
//!
//! [`Workspace`] wraps the crate's handle so its methods keep returning
//! [`ToolError`] (callers match on [`ToolError::NotFound`]); everything else is the
//! crate's own type, re-exported.

use std::fs::File;
use std::io;
use std::path::Path;

pub use io_harness_confine::{
    ConfineError, DirEntry, EntryKind, Follow, Metadata, Resolver, WorkspaceDir,
};

use crate::tools::ToolError;

impl From<io_harness_confine::Error> for ToolError {
    fn from(e: io_harness_confine::Error) -> Self {
        use io_harness_confine::Error as E;
        match e {
            E::Refused(c) => Self::Confinement(c),
            E::NotFound(path) => Self::NotFound(path),
            E::IsADirectory(path) => Self::BadInput(format!("{path} is a directory")),
            E::NotAFile(path) => Self::BadInput(format!("{path} is not a regular file")),
            E::NotADirectory(path) => Self::BadInput(format!("{path} is not a directory")),
            E::RootNotAFile => Self::BadInput("the workspace root is not a file".into()),
            E::TooLarge { path, size, limit } => Self::TooLarge { path, size, limit },
            E::Io { path, source } => Self::Io { path, source },
            other => Self::Failed(other.to_string()),
        }
    }
}

/// Maps an I/O error on `rel`: not-found is its own variant, the rest keep the cause.
pub(crate) fn io_error(rel: &str, e: io::Error) -> ToolError {
    io_harness_confine::Error::io(rel, e).into()
}

/// The workspace root, opened once; every access resolves beneath it (see
/// [`io_harness_confine::Workspace`], which this wraps).
#[derive(Debug)]
pub struct Workspace {
    inner: io_harness_confine::Workspace,
}

impl Workspace {
    /// Opens the root directory and finds out whether `openat2(2)` works here.
    pub fn open(root: &Path) -> io::Result<Self> {
        io_harness_confine::Workspace::open(root).map(|inner| Self { inner })
    }

    /// The confinement crate's handle, for code that wants its typed errors.
    pub fn confined(&self) -> &io_harness_confine::Workspace {
        &self.inner
    }

    /// The root path, as given to [`Workspace::open`]. For display: never use it to
    /// open files, that is what the methods here are for.
    pub fn root(&self) -> &Path {
        self.inner.root()
    }

    /// How paths are resolved here.
    pub fn resolver(&self) -> Resolver {
        self.inner.resolver()
    }

    /// Lexically checks and normalizes a relative path (`a/./b//c/../d` → `a/b/d`;
    /// the root itself is `.`). Refuses absolute paths, `..` that climbs above the
    /// root, and NUL bytes.
    pub fn normalize(&self, rel: &str) -> Result<String, ConfineError> {
        self.inner.normalize(rel)
    }

    /// Reads a whole file beneath the root (following only symlinks that stay
    /// inside).
    pub fn read(&self, rel: &str) -> Result<Vec<u8>, ToolError> {
        Ok(self.inner.read(rel)?)
    }

    /// Reads a file of at most `max` bytes; a larger one is [`ToolError::TooLarge`].
    pub fn read_bounded(&self, rel: &str, max: u64) -> Result<Vec<u8>, ToolError> {
        Ok(self.inner.read_bounded(rel, max)?)
    }

    /// [`Workspace::read_bounded`] with a choice of symlink handling: `Never` reads
    /// exactly the file a write to `rel` would replace.
    pub(crate) fn read_with(
        &self,
        rel: &str,
        max: u64,
        follow: Follow,
    ) -> Result<Vec<u8>, ToolError> {
        Ok(self.inner.read_with(rel, max, follow)?)
    }

    /// Writes `bytes` to a file beneath the root, creating missing parent directories
    /// and replacing an existing file atomically (its permission bits kept). Refuses
    /// if any component of the path is a symlink.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> Result<(), ToolError> {
        Ok(self.inner.write(rel, bytes)?)
    }

    /// Size and kind of what `rel` resolves to.
    pub fn metadata(&self, rel: &str) -> Result<Metadata, ToolError> {
        Ok(self.inner.metadata(rel)?)
    }

    /// The entries of a directory, sorted by name.
    pub fn list_dir(&self, rel: &str) -> Result<Vec<DirEntry>, ToolError> {
        Ok(self.inner.list_dir(rel)?)
    }

    /// Opens a directory beneath the root, for walking it without re-resolving paths.
    pub fn open_dir(&self, rel: &str) -> Result<WorkspaceDir, ToolError> {
        Ok(self.inner.open_dir(rel)?)
    }

    /// The path a read of `rel` really reaches, relative to the root, when it differs
    /// from `rel` (a symlink inside the workspace); see
    /// [`io_harness_confine::Workspace::resolved_target`].
    pub fn resolved_target(&self, rel: &str) -> Option<String> {
        self.inner.resolved_target(rel)
    }

    /// Opens a regular file for reading, with its metadata.
    pub(crate) fn open_file(
        &self,
        rel: &str,
        follow: Follow,
    ) -> Result<(File, Metadata), ToolError> {
        Ok(self.inner.open_file(rel, follow)?)
    }
}

#[cfg(test)]
mod tests {
    use io_harness_confine::Error as E;

    use super::*;

    /// The tools report confinement failures in the words they always used.
    #[test]
    fn confine_errors_keep_the_tools_wording() {
        let cases: [(E, &str); 7] = [
            (E::NotFound("a".into()), "a: not found"),
            (E::IsADirectory("a".into()), "bad input: a is a directory"),
            (
                E::NotAFile("a".into()),
                "bad input: a is not a regular file",
            ),
            (
                E::NotADirectory("a".into()),
                "bad input: a is not a directory",
            ),
            (
                E::RootNotAFile,
                "bad input: the workspace root is not a file",
            ),
            (
                E::TooLarge {
                    path: "a".into(),
                    size: 6,
                    limit: 3,
                },
                "a: 6 bytes is more than the 3-byte limit",
            ),
            (
                E::io("a", io::Error::from_raw_os_error(13)),
                "a: Permission denied (os error 13)",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(ToolError::from(e).to_string(), want);
        }
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::open(tmp.path()).unwrap();
        let e = ws.read("../x").unwrap_err();
        assert!(e.is_confinement(), "{e:?}");
        assert_eq!(e.to_string(), "../x: `..` climbs out of the workspace root");
        assert!(matches!(ws.read("nope"), Err(ToolError::NotFound(_))));
    }
}
