//! Platforms without descriptor-relative opens (not Unix): no confined access at all.
//!
//! The signatures match `unix.rs`; [`Root::open`] fails with `Unsupported`, so no
//! `Workspace` (and no `Dir`) can exist here and the other methods are unreachable.

use std::convert::Infallible;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::path::Path;

use crate::{DirEntry, Error, FileId, Follow, Metadata, Resolver};

/// Never constructed.
#[derive(Debug)]
pub(crate) struct Root(Infallible);

impl Root {
    pub(crate) fn open(_path: &Path, _force_walk: bool) -> io::Result<Self> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "confined workspace access needs openat(2); this platform has no such call",
        ))
    }

    pub(crate) fn resolver(&self) -> Resolver {
        match self.0 {}
    }

    pub(crate) fn metadata(&self, _rel: &str) -> Result<Metadata, Error> {
        match self.0 {}
    }

    pub(crate) fn open_file(&self, _rel: &str, _follow: Follow) -> Result<(File, Metadata), Error> {
        match self.0 {}
    }

    pub(crate) fn file_id(&self, _rel: &str, _follow: Follow) -> Result<Option<FileId>, Error> {
        match self.0 {}
    }

    pub(crate) fn open_dir(&self, _rel: &str) -> Result<Dir, Error> {
        match self.0 {}
    }

    pub(crate) fn write(&self, _rel: &str, _bytes: &[u8], _temp: &str) -> Result<(), Error> {
        match self.0 {}
    }

    pub(crate) fn remove_file(&self, _rel: &str) -> Result<(), Error> {
        match self.0 {}
    }
}

/// Never constructed.
#[derive(Debug)]
pub(crate) struct Dir(Infallible);

impl Dir {
    pub(crate) fn entries(&self) -> io::Result<Vec<DirEntry>> {
        match self.0 {}
    }

    pub(crate) fn open_subdir(&self, _name: &OsStr, _rel: &str) -> Result<Dir, Error> {
        match self.0 {}
    }

    pub(crate) fn open_file(&self, _name: &OsStr, _rel: &str) -> Result<(File, Metadata), Error> {
        match self.0 {}
    }
}
