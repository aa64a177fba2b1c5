//! A run's scratch directory, removed without following a symlink: the copy after a
//! success, the whole directory when `runs prune` says so.
//!
//! Only a real directory under this cache's `runs/` is ever removed — a path on
//! record that now leads elsewhere (a symlink planted in its place, a store that came
//! from another machine) is left alone — and the removal itself is
//! `std::fs::remove_dir_all`, which unlinks a symlink inside the tree and never enters
//! it, so a link in a copy to a file outside leaves that file as it was.

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::store::RunRecord;

use super::super::workdir::{COPY_DIR, cache_dir};

/// Where a run's workspace copy stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyState {
    /// The run worked in place: there is no copy.
    InPlace,
    /// The copy is on disk, at this path.
    Kept(PathBuf),
    /// The copy was removed (after a success, or by `runs prune`).
    Removed(PathBuf),
}

/// Whether `run` worked on a copy, and whether the copy is still there.
pub fn copy_state(run: &RunRecord) -> CopyState {
    let (Some(work), Some(scratch)) = (&run.work_dir, &run.scratch_dir) else {
        return CopyState::InPlace;
    };
    let work = PathBuf::from(work);
    if work != Path::new(scratch).join(COPY_DIR) {
        return CopyState::InPlace;
    }
    if std::fs::symlink_metadata(&work).is_ok_and(|m| m.is_dir()) {
        CopyState::Kept(work)
    } else {
        CopyState::Removed(work)
    }
}

/// What a removal freed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneFreed {
    /// Bytes of the regular files removed.
    pub bytes: u64,
}

/// Removes the workspace copy of `run` (its baseline snapshot stays). `Ok(None)` when
/// there is none to remove.
pub fn discard_copy(run: &RunRecord) -> io::Result<Option<(PathBuf, PruneFreed)>> {
    match copy_state(run) {
        CopyState::Kept(work) => {
            let freed = remove_tree(&work)?;
            Ok(Some((work, freed)))
        }
        _ => Ok(None),
    }
}

/// Removes a run's whole scratch directory (copy, snapshot, lock file); `Ok(None)`
/// when it is gone already. Refuses a path that is not a real directory directly
/// under this cache's `runs/`.
pub fn remove_scratch(scratch: &Path) -> io::Result<Option<PruneFreed>> {
    match std::fs::symlink_metadata(scratch) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
        Ok(_) => remove_tree(scratch).map(Some),
    }
}

/// `dir` removed whole, after checking it lies in a scratch directory of this cache.
fn remove_tree(dir: &Path) -> io::Result<PruneFreed> {
    let runs = cache_dir().join("runs").canonicalize()?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory (a symlink is never followed)",
            dir.display()
        )));
    }
    let parent = dir
        .parent()
        .ok_or_else(|| io::Error::other("no parent"))?
        .canonicalize()?;
    // `dir` is a scratch directory (`runs/run-…`) or the copy inside one.
    let inside = parent == runs || parent.parent() == Some(runs.as_path());
    if !inside {
        return Err(io::Error::other(format!(
            "{} is not under {}: left alone",
            dir.display(),
            runs.display()
        )));
    }
    let bytes = tree_bytes(dir);
    make_writable(dir);
    std::fs::remove_dir_all(dir)?;
    Ok(PruneFreed { bytes })
}

/// The bytes of the regular files under `dir`, counted without following a link.
fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                total += m.size();
            }
        }
    }
    total
}

/// An agent may leave a directory without write permission, which would stop its
/// removal halfway: every real directory of the tree is made writable by its owner
/// first (links are not followed, so nothing outside is touched).
fn make_writable(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(m) = d.symlink_metadata() else {
            continue;
        };
        if !m.is_dir() {
            continue;
        }
        if m.permissions().mode() & 0o700 != 0o700 {
            let _ = std::fs::set_permissions(
                &d,
                std::fs::Permissions::from_mode(m.permissions().mode() | 0o700),
            );
        }
        if let Ok(entries) = std::fs::read_dir(&d) {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
}
