//! Whether the record this handle writes is still the record: the file it opened is
//! still the one at its path, and no write it was asked to make has been lost.
//!
//! # Why
//!
//! SQLite keeps writing happily into a file that was deleted (or renamed over) while it
//! was open: the unlinked inode lives on until the connection closes, every commit
//! "succeeds", and the run ends `success` with nothing anyone can ever read. So before
//! each write transaction (under the write lock, at `BEGIN IMMEDIATE`) the path is
//! compared with the file the store opened — same device and inode — and a mismatch is
//! [`StoreError::Replaced`](super::StoreError::Replaced), never a commit.
//!
//! Some writes happen where nothing can stop the run at once: a sandbox event written
//! by the executor, an MCP server's event, a policy decision made deep in a tool call.
//! Such a failure is *noted* here, per run ([`Store::note_lost`]), and the run's next
//! step commit refuses ([`StoreError::RecordsLost`](super::StoreError::RecordsLost)),
//! so the engine ends the run at the next point it can stop cleanly, with the failure
//! named, instead of committing a step whose record is incomplete. The uncommitted step
//! is replayed by `resume` (its writes are kept from applying twice by the journal),
//! which writes its records again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{Store, StoreError};

/// The file a store opened, as `(device, inode)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileId {
    /// The path as opened, made absolute, so a later `chdir` does not move it.
    pub(super) path: PathBuf,
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of the file at `path` now.
    pub(super) fn of(path: &Path) -> std::io::Result<FileId> {
        let path = std::path::absolute(path)?;
        let (dev, ino) = dev_ino(&path)?;
        Ok(FileId { path, dev, ino })
    }

    /// Whether `path` still names this file (not deleted, not renamed over).
    fn still_there(&self) -> bool {
        dev_ino(&self.path).is_ok_and(|now| now == (self.dev, self.ino))
    }
}

#[cfg(unix)]
fn dev_ino(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// Elsewhere there is no inode to compare: only a deleted file is seen.
#[cfg(not(unix))]
fn dev_ino(path: &Path) -> std::io::Result<(u64, u64)> {
    std::fs::metadata(path).map(|_| (0, 0))
}

/// The first record write of a run that failed, and how many did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostRecord {
    /// What was being written (`policy event`, `sandbox event`…).
    pub what: &'static str,
    /// Why the first one failed.
    pub error: String,
    /// Writes lost so far.
    pub count: u64,
}

/// Lost writes of this handle, by run; writes that belong to no known run are kept
/// under `None` and count against every run.
#[derive(Debug, Default)]
pub(super) struct Health {
    lost: Mutex<BTreeMap<Option<i64>, LostRecord>>,
}

impl Health {
    fn lost(&self) -> std::sync::MutexGuard<'_, BTreeMap<Option<i64>, LostRecord>> {
        // A map of plain values cannot be left half-updated by a panic.
        self.lost.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Store {
    /// Fails with [`StoreError::Replaced`] when the path no longer names the file this
    /// handle opened. In-memory stores have no path and are always still there.
    pub(super) fn check_file(&self) -> super::Result<()> {
        match &self.file {
            Some(id) if !id.still_there() => Err(StoreError::Replaced {
                path: id.path.display().to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// Whether the path still names the file this handle writes (see [`Store::open`]).
    /// A run checks it once more after its last write, so a store deleted after the
    /// last commit is not reported as a recorded run.
    pub fn verify_file(&self) -> super::Result<()> {
        self.check_file()
    }

    /// Notes that a record write of `run_id` failed where the caller could not stop the
    /// run; the run's next step commit then fails with [`StoreError::RecordsLost`].
    /// Only failures of the store count (SQLite, I/O, a replaced file), not refusals
    /// such as an unknown run. The first failure of a run is warned about; later ones
    /// are counted.
    pub fn note_lost(&self, run_id: Option<i64>, what: &'static str, err: &StoreError) {
        if !err.is_failure() {
            return;
        }
        let mut lost = self.health.lost();
        let entry = lost.entry(run_id).or_insert_with(|| {
            tracing::warn!(?run_id, what, error = %err, "a record write failed; the run stops at its next commit");
            LostRecord {
                what,
                error: err.to_string(),
                count: 0,
            }
        });
        entry.count += 1;
    }

    /// The writes of `run_id` (or of no known run) this handle lost, if any.
    pub fn lost_records(&self, run_id: i64) -> Option<LostRecord> {
        let lost = self.health.lost();
        lost.get(&Some(run_id)).or_else(|| lost.get(&None)).cloned()
    }

    /// Forgets the lost writes of `run_id`: a session resuming it replays the step they
    /// belonged to (it never committed), writing them again.
    pub(super) fn forget_lost(&self, run_id: i64) {
        self.health.lost().remove(&Some(run_id));
    }

    /// [`StoreError::Replaced`] if the file is gone (whatever was lost then, that is
    /// the cause, and nothing is left to resume), else [`StoreError::RecordsLost`] if
    /// `run_id` lost a write.
    pub(super) fn ensure_nothing_lost(&self, run_id: i64) -> super::Result<()> {
        self.check_file()?;
        match self.lost_records(run_id) {
            None => Ok(()),
            Some(l) => Err(StoreError::RecordsLost {
                run_id,
                count: l.count,
                what: l.what,
                first: l.error,
            }),
        }
    }
}
