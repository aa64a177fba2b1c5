//! Who is working where: whether a run marked `running` in the store is really being
//! driven by a process, and which run holds a workspace.
//!
//! # The run's lock
//!
//! The process driving a run holds an exclusive `flock` on `<scratch>/lock` for as
//! long as it runs; the kernel drops the lock when the process dies, however it dies.
//! So a `running` run whose lock can be taken was interrupted, and a run whose lock is
//! held must not be resumed by a second process.
//!
//! # The workspace's lock
//!
//! Two runs editing one tree would each take the other's edits for their own (two
//! in-place runs once both "succeeded" and left the same edit twice). So a run holds a
//! `flock` on its workspace directory itself: exclusive for an in-place run, for the
//! whole session; shared for a copy run, only while it copies (copies may be taken
//! side by side, never of a tree an in-place run is editing). The lock is on the
//! directory's inode, not on a path: a symlink, a bind mount or a second state
//! directory (another `XDG_CACHE_HOME`) reach the same lock, and nothing is written in
//! the workspace. An exclusive holder writes who it is (pid, path, run id once it has
//! one) into a note in the harness's state directory — `<cache>/locks/<sha256 of the
//! directory's device and inode>.lock` — so a refused run can name the first (a run
//! with another state directory is refused as well, naming "another run"). A `flock`
//! is released by the kernel when its holder dies, so a crashed run never leaves a
//! workspace locked.
//!
//! A sub-agent works inside its parent's tree while its parent's session waits for it:
//! when the lock on its root is held by a run of its own tree, it goes on without a
//! lock of its own (its parent's covers it). The lock is on one directory: nested
//! workspaces of unrelated runs (one on `a`, one on `a/b`) are not detected.

use std::fs::{File, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// An exclusive hold on a run; released on drop or process death. It carries the
/// run's hold on its workspace, if it keeps one, so both end together.
#[derive(Debug)]
pub(crate) struct RunLock {
    _file: File,
    workspace: Option<WorkspaceLock>,
}

impl RunLock {
    /// Keeps `workspace` held as long as the run.
    pub(crate) fn keep(&mut self, workspace: Option<WorkspaceLock>) {
        self.workspace = workspace;
    }

    /// Names the run in its workspace lock, once the run has an id, so a run refused
    /// the workspace learns which run holds it. Best effort: the lock holds either way.
    pub(crate) fn name_run(&mut self, run_id: i64, tree: i64) {
        if let Some(w) = &mut self.workspace
            && let Err(e) = w.name_run(run_id, tree)
        {
            tracing::warn!(error = %e, "could not write the holder of a workspace lock");
        }
    }
}

/// Takes an exclusive lock without waiting (`flock(LOCK_EX | LOCK_NB)` on Unix).
fn try_flock(file: &File) -> bool {
    file.try_lock().is_ok()
}

/// Takes the run's lock; `Ok(None)` when another process holds it.
pub(crate) fn acquire(scratch: &Path) -> std::io::Result<Option<RunLock>> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(scratch.join("lock"))?;
    Ok(try_flock(&file).then_some(RunLock {
        _file: file,
        workspace: None,
    }))
}

/// Whether a process is driving the run with this scratch directory now.
pub fn is_live(scratch: &Path) -> bool {
    match File::open(scratch.join("lock")) {
        // Taking the lock and dropping it at once releases it again.
        Ok(f) => !try_flock(&f),
        Err(_) => false,
    }
}

/// How a run holds its workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// An in-place run: nobody else may edit or copy the tree.
    Exclusive,
    /// A copy run while it copies: others may copy too, nobody may edit.
    Shared,
}

/// A run's hold on a workspace; released on drop or process death.
#[derive(Debug)]
pub(crate) struct WorkspaceLock {
    /// The holder's note (who holds it), in the state directory.
    file: File,
    /// The workspace directory itself, `flock`ed: the lock is on its inode, so every
    /// path to it (a symlink, a bind mount) and every state directory meet it.
    _dir: File,
    holder: Holder,
}

/// What an exclusive holder writes into the lock file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Holder {
    pid: u32,
    path: PathBuf,
    #[serde(default)]
    run_id: Option<i64>,
    /// The root run of the holder's tree (its own id for a root run).
    #[serde(default)]
    tree: Option<i64>,
}

impl Holder {
    fn describe(&self) -> String {
        match self.run_id {
            Some(id) => format!("run {id} (pid {})", self.pid),
            None => format!("a run starting in pid {}", self.pid),
        }
    }
}

impl WorkspaceLock {
    fn name_run(&mut self, run_id: i64, tree: i64) -> io::Result<()> {
        self.holder.run_id = Some(run_id);
        self.holder.tree = Some(tree);
        write_holder(&mut self.file, &self.holder)
    }
}

/// Why a workspace could not be locked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LockError {
    /// Another run holds it.
    #[error("workspace {path} is in use by {holder}")]
    Busy {
        /// The canonical workspace.
        path: PathBuf,
        /// Who holds it, as its lock file says.
        holder: String,
    },
    /// The lock file could not be opened or written.
    #[error("workspace lock {path}: {source}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
}

/// The directory of the workspace locks, in the harness's state directory.
fn locks_dir() -> PathBuf {
    super::workdir::cache_dir().join("locks")
}

/// Locks the workspace `root` (made canonical here) for a run. `tree`, for a sub-agent,
/// is the root run of its tree: a lock held by a run of that tree covers it, and
/// `Ok(None)` says it goes on under that hold.
pub(crate) fn lock_workspace(
    root: &Path,
    hold: Hold,
    tree: Option<i64>,
) -> Result<Option<WorkspaceLock>, LockError> {
    let path = root.canonicalize().map_err(|source| LockError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    let dir_lock = File::open(&path).map_err(|source| LockError::Io {
        path: path.clone(),
        source,
    })?;
    let dir = locks_dir();
    let file_path = dir.join(format!("{}.lock", inode_key(&dir_lock, &path)));
    let io_err = |source| LockError::Io {
        path: file_path.clone(),
        source,
    };
    create_private_dir(&dir).map_err(io_err)?;
    let mut file = File::options()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&file_path)
        .map_err(io_err)?;
    let taken = match hold {
        Hold::Exclusive => dir_lock.try_lock(),
        Hold::Shared => dir_lock.try_lock_shared(),
    };
    let holder = Holder {
        pid: std::process::id(),
        path: path.clone(),
        run_id: None,
        tree: None,
    };
    match taken {
        Ok(()) => {
            if hold == Hold::Exclusive {
                write_holder(&mut file, &holder).map_err(io_err)?;
            }
            Ok(Some(WorkspaceLock {
                file,
                _dir: dir_lock,
                holder,
            }))
        }
        Err(TryLockError::WouldBlock) => {
            let first = who_holds(&file, &dir_lock);
            if tree.is_some() && first.as_ref().and_then(|h| h.tree) == tree {
                return Ok(None);
            }
            let holder = match first {
                Some(h) => h.describe(),
                // Only shared holders (they write nothing) block an exclusive lock
                // while a shared one can still be had.
                None if dir_lock.try_lock_shared().is_ok() => "a copy run copying it now".into(),
                None => "another run".into(),
            };
            Err(LockError::Busy { path, holder })
        }
        Err(TryLockError::Error(e)) => Err(io_err(e)),
    }
}

/// The exclusive holder of a lock we could not take, as its file says; `None` when it
/// says nothing readable (a shared holder, or a holder still writing).
fn who_holds(file: &File, dir_lock: &File) -> Option<Holder> {
    let mut text = String::new();
    let mut f = file;
    f.rewind().ok()?;
    f.read_to_string(&mut text).ok()?;
    let h: Holder = serde_json::from_str(&text).ok()?;
    // A shared holder writes nothing: a readable holder is the exclusive one only if it
    // still holds the lock, which a failed shared attempt shows.
    let held = dir_lock.try_lock_shared().is_err();
    if !held {
        let _ = dir_lock.unlock();
    }
    held.then_some(h)
}

/// Names the holder's note by the workspace's device and inode, so two paths to one
/// directory (a bind mount) share a note; by the path where there is no inode.
fn inode_key(dir: &File, path: &Path) -> String {
    #[cfg(unix)]
    if let Ok(m) = dir.metadata() {
        use std::os::unix::fs::MetadataExt;
        return crate::digest::sha256_hex(format!("{}:{}", m.dev(), m.ino()).as_bytes());
    }
    let _ = dir;
    crate::digest::sha256_hex(path.as_os_str().as_encoded_bytes())
}

fn write_holder(file: &mut File, h: &Holder) -> io::Result<()> {
    let text = serde_json::to_vec(h).map_err(io::Error::other)?;
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(&text)?;
    file.flush()
}

/// The locks directory, 0700: it says which workspaces are in use and by which pid.
fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

impl From<LockError> for super::RunError {
    fn from(e: LockError) -> Self {
        match e {
            LockError::Busy { path, holder } => Self::WorkspaceBusy {
                path: path.display().to_string(),
                holder,
            },
            LockError::Io { path, source } => Self::Workspace {
                path: path.display().to_string(),
                source,
            },
        }
    }
}

/// The hold a run of `mode` takes on its workspace before it prepares it.
pub(crate) fn hold_for(mode: crate::contract::WorkspaceMode) -> Hold {
    match mode {
        crate::contract::WorkspaceMode::InPlace => Hold::Exclusive,
        crate::contract::WorkspaceMode::Copy => Hold::Shared,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy_holder(r: Result<Option<WorkspaceLock>, LockError>) -> String {
        match r {
            Err(LockError::Busy { holder, .. }) => holder,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn copies_share_a_workspace_and_keep_an_in_place_run_out_while_they_copy() {
        let ws = tempfile::tempdir().unwrap();
        let a = lock_workspace(ws.path(), Hold::Shared, None).unwrap();
        let b = lock_workspace(ws.path(), Hold::Shared, None).unwrap();
        assert!(a.is_some() && b.is_some(), "two copies side by side");
        let holder = busy_holder(lock_workspace(ws.path(), Hold::Exclusive, None));
        assert_eq!(holder, "a copy run copying it now");
        drop((a, b));
        assert!(
            lock_workspace(ws.path(), Hold::Exclusive, None)
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn an_exclusive_holder_is_named_and_only_its_own_tree_goes_on_under_it() {
        let ws = tempfile::tempdir().unwrap();
        let mut first = lock_workspace(ws.path(), Hold::Exclusive, None)
            .unwrap()
            .unwrap();
        first.name_run(7, 7).unwrap();
        let pid = std::process::id();
        for hold in [Hold::Exclusive, Hold::Shared] {
            let holder = busy_holder(lock_workspace(ws.path(), hold, None));
            assert_eq!(holder, format!("run 7 (pid {pid})"));
        }
        // Another tree is refused; a run of tree 7 is covered by its hold.
        busy_holder(lock_workspace(ws.path(), Hold::Exclusive, Some(8)));
        assert!(
            lock_workspace(ws.path(), Hold::Exclusive, Some(7))
                .unwrap()
                .is_none()
        );
    }
}
