//! The dependency cache shared across runs and processes:
//! `$XDG_CACHE_HOME/io-harness/deps/<key>/` (see [`crate::exec::dep_cache_dir`]).
//!
//! - **Who can write it.** Only the harness, outside every sandbox: the store is
//!   hidden from every sandboxed command (in the executor's hidden paths, besides
//!   lying in the hidden home by default), never writable nor read-only in a gate's
//!   view; a gate gets a *copy*. An entry is filled by building the stub in a private
//!   directory (`deps-fill/<key>.<random>`, the build's only writable place), sealing
//!   it once the sandbox is gone, writing the seal beside the files and renaming the
//!   directory into place, all under an exclusive `flock` on `deps/<key>.lock`: two
//!   runs filling one key build it once, and a reader never sees half an entry. A
//!   crashed filler leaves only its fill directory, which the next filler of that key
//!   (or an eviction pass) removes.
//! - **Checked on every use.** Copying an entry into a gate's target directory reads
//!   `seal.json` (it must name this key) and checks every file's SHA-256 as it copies,
//!   under a shared lock. An entry edited on disk since it was sealed — anything with
//!   the user's rights could — fails, is removed and rebuilt; the gate never links
//!   what it found. A process that rewrites both a file and its seal consistently is
//!   beyond this check; such a process could as well replace the toolchain, which is
//!   why the shared cache is used only by gates whose sandbox confines writes.
//! - **Bounded** by [`super::evict`].

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use super::key::{LockEntry, built_entries};
use super::seal::{self, CopyError, Seal};
use super::{CacheInputs, build_stub};
use crate::exec::Executor;
use crate::verify::rust_gate::random_hex;

/// The seal's file name inside an entry.
pub(crate) const SEAL_FILE: &str = "seal.json";
/// The stamp whose modification time is the entry's last use.
pub(crate) const LAST_USED: &str = "last_used";

/// The store's directories.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    /// `deps/`: one directory and one lock file per key.
    pub(crate) root: PathBuf,
    /// `deps-fill/`: directories being filled.
    pub(crate) fill: PathBuf,
}

impl Store {
    /// The store under `root` (`…/io-harness/deps`), its fill directory beside it.
    pub(crate) fn at(root: PathBuf) -> Self {
        let fill = root.with_file_name("deps-fill");
        Self { root, fill }
    }

    pub(crate) fn entry(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    pub(crate) fn lock_path(&self, key: &str) -> PathBuf {
        self.root.join(format!("{key}.lock"))
    }
}

/// A held `flock` on a key's lock file, released when dropped (the file closes).
pub(crate) struct KeyLock(#[allow(dead_code)] File);

fn open_lock(path: &Path) -> std::io::Result<File> {
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

/// Waits for the key's lock, shared or exclusive, off the async threads.
pub(crate) async fn lock(store: &Store, key: &str, exclusive: bool) -> std::io::Result<KeyLock> {
    let path = store.lock_path(key);
    tokio::task::spawn_blocking(move || {
        let f = open_lock(&path)?;
        if exclusive {
            f.lock()?;
        } else {
            f.lock_shared()?;
        }
        Ok(KeyLock(f))
    })
    .await
    .map_err(std::io::Error::other)?
}

/// The key's exclusive lock if nobody holds it now.
pub(crate) fn try_lock(store: &Store, key: &str) -> Option<KeyLock> {
    let f = open_lock(&store.lock_path(key)).ok()?;
    f.try_lock().ok()?;
    Some(KeyLock(f))
}

/// What looking at an entry found.
pub(crate) enum Found {
    /// Verified and copied into the gate's target directory.
    Copied,
    /// No entry.
    Missing,
    /// The entry failed its seal (why).
    Broken(String),
}

/// Copies the entry `key` into `dst`, verifying it; stamps its use. The caller holds
/// the key's lock. On anything but `Copied`, `dst` is emptied again.
pub(crate) fn copy_entry(store: &Store, key: &str, dst: &Path) -> Found {
    let entry = store.entry(key);
    let found = match std::fs::read(entry.join(SEAL_FILE)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !entry.exists() => Found::Missing,
        Err(e) => Found::Broken(format!("{SEAL_FILE}: {e}")),
        Ok(json) => match seal::from_json(&json, key, &entry.join("target"))
            .and_then(|s| seal::copy_sealed(&s, dst))
        {
            Ok(()) => Found::Copied,
            Err(CopyError::Broken(why)) => Found::Broken(why),
            Err(CopyError::Write(e)) => Found::Broken(format!("copy: {e}")),
        },
    };
    if matches!(found, Found::Copied) {
        let _ = std::fs::write(entry.join(LAST_USED), b"");
    } else {
        let _ = std::fs::remove_dir_all(dst);
        let _ = std::fs::create_dir_all(dst);
    }
    found
}

/// How a fill ended.
pub(crate) enum Filled {
    /// Sealed and in place.
    Shared,
    /// Built, but what cargo resolved is not what the key says: usable by this gate
    /// (sealed in memory), never published.
    Private(Seal, String),
    /// The dependency build failed.
    Failed,
}

/// Builds the entry `key` and renames it into place. The caller holds the key's
/// exclusive lock, and has removed a broken entry.
pub(crate) async fn fill(
    store: &Store,
    key: &str,
    locked: &BTreeSet<LockEntry>,
    inputs: &CacheInputs<'_>,
    exec: Option<&Executor>,
) -> Filled {
    remove_stale_fills(store, key);
    let dir = store.fill.join(format!("{key}.{}", random_hex()));
    if std::fs::create_dir_all(&dir).is_err() {
        return Filled::Failed;
    }
    let Some(sealed) = build_stub(inputs, &dir, exec).await else {
        let _ = std::fs::remove_dir_all(&dir);
        return Filled::Failed;
    };
    // Every package the build compiled must be one the key covers.
    let resolved = std::fs::read(dir.join("stub/Cargo.lock"))
        .ok()
        .and_then(|l| built_entries(&l));
    let why = match resolved {
        Some(r) if r.is_subset(locked) => None,
        Some(_) => Some("cargo resolved packages the Cargo.lock does not pin".to_string()),
        None => Some("the dependency build left no usable Cargo.lock".to_string()),
    };
    let published = why.is_none()
        && std::fs::write(dir.join(SEAL_FILE), seal::to_json(&sealed, key)).is_ok()
        && std::fs::write(dir.join(LAST_USED), b"").is_ok()
        && std::fs::rename(&dir, store.entry(key)).is_ok();
    if published {
        return Filled::Shared;
    }
    let why = why.unwrap_or_else(|| "the entry could not be put in place".into());
    // The fill directory stays until the gate has copied from it (the caller removes
    // it through `discard_private`).
    Filled::Private(sealed, why)
}

/// Removes a private fill's directory once its files were copied.
pub(crate) fn discard_private(seal: &Seal) {
    if let Some(dir) = seal.target.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Removes fill directories of `key` left by a filler that died (the caller holds
/// the key's exclusive lock, so no live filler owns one).
fn remove_stale_fills(store: &Store, key: &str) {
    let prefix = format!("{key}.");
    for e in std::fs::read_dir(&store.fill)
        .into_iter()
        .flatten()
        .flatten()
    {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
