//! Platforms without descriptor-relative opens (not Unix): no confined access at all.
//!
//! The signatures match `unix.rs`; [`Root::open`] fails with `Unsupported`, so no
//! `Workspace` (and no `Dir`) can exist here and the other methods are unreachable.

use std::convert::Infallible;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::path::Path;

use super::{DirEntry, Follow, Metadata, Resolver};
use crate::tools::ToolError;

/// Never constructed.
#[derive(Debug)]
pub(super) struct Root(Infallible);

impl Root {
    pub(super) fn open(_path: &Path, _force_walk: bool) -> io::Result<Self> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "confined workspace access needs openat(2); this platform has no such call",
        ))
    }

    pub(super) fn resolver(&self) -> Resolver {
        match self.0 {}
    }

    pub(super) fn metadata(&self, _rel: &str) -> Result<Metadata, ToolError> {
        match self.0 {}
    }

    pub(super) fn open_file(
        &self,
        _rel: &str,
        _follow: Follow,
    ) -> Result<(File, Metadata), ToolError> {
        match self.0 {}
    }

    pub(super) fn open_dir(&self, _rel: &str) -> Result<Dir, ToolError> {
        match self.0 {}
    }

    pub(super) fn write(&self, _rel: &str, _bytes: &[u8]) -> Result<(), ToolError> {
        match self.0 {}
    }
}

/// Never constructed.
#[derive(Debug)]
pub(super) struct Dir(Infallible);

impl Dir {
    pub(super) fn entries(&self) -> io::Result<Vec<DirEntry>> {
        match self.0 {}
    }

    pub(super) fn open_subdir(&self, _name: &OsStr, _rel: &str) -> Result<Dir, ToolError> {
        match self.0 {}
    }

    pub(super) fn open_file(
        &self,
        _name: &OsStr,
        _rel: &str,
    ) -> Result<(File, Metadata), ToolError> {
        match self.0 {}
    }
}
