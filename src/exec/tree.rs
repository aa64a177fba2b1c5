//! An index of the workspace's directory tree, kept for one run and refreshed before
//! and after every sandbox session.
//!
//! Why an index: what a session may read depends on where files are *now* — a command
//! that renames `config/` to `cfg2/` moves `.env` out from under a mask computed by
//! path, and one that writes a new `.env` creates a secret no earlier scan saw. So the
//! masks are recomputed before every session, and the tree is looked at again after
//! every session for repositories a command created. Walking a large workspace twice
//! per command would cost more than the command, so each directory's listing is kept
//! and read again only when the directory changed.
//!
//! A directory changed when its identity (device, inode) or its *ctime* differs from
//! the kept listing. Not its mtime: the owner of a directory can set that back with
//! `utimensat`, but the kernel sets ctime itself on every change, entries added,
//! removed or renamed included. A change in the same clock tick as the read that
//! produced a listing could leave ctime equal, so a listing whose ctime is within
//! [`RACY`] of the moment it was read is read again next time whatever it says (git's
//! "racy" rule). Every directory is still `lstat`ed on every refresh: that is the
//! incremental cost, against a `readdir` of each and a policy decision per entry.
//!
//! Links are never followed: a symlink is an entry, not a directory to enter. Every
//! entry counts against the run's limit; a tree larger than it is an error, never a
//! silently partial answer (a secret beyond the limit would go unmasked).

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How close to the moment it was read a directory's ctime may be before its
/// listing is distrusted (far wider than any filesystem's timestamp tick).
const RACY: Duration = Duration::from_secs(2);

/// The default of `[sandbox] scan_limit`: most entries the index holds.
pub const DEFAULT_SCAN_LIMIT: usize = 200_000;

/// Why the workspace could not be indexed. Either way no session runs on a guess.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScanError {
    /// The tree holds more entries than the limit.
    #[error(
        "the workspace holds more than {limit} entries, so the harness cannot check it for \
         files to mask or repositories a command created; no sandbox session runs \
         (raise [sandbox] scan_limit, or remove what the workspace does not need)"
    )]
    TooManyEntries {
        /// The limit in force.
        limit: usize,
    },
    /// A directory could not be listed or looked at.
    #[error("cannot index the workspace at {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// What an entry is, as its directory lists it (links not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Link,
    Other,
}

/// One entry of a directory listing.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub name: OsString,
    pub kind: Kind,
    pub ino: u64,
    /// Whether the policy denies reading it at its path (decided when listed).
    pub denied: bool,
}

#[derive(Debug, Clone)]
struct Listing {
    dev: u64,
    ino: u64,
    ctime: (i64, i64),
    racy: bool,
    entries: Vec<Entry>,
}

/// What one refresh did, for the bench and the tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RefreshStats {
    /// Directories looked at.
    pub dirs: usize,
    /// Directories whose listing was read again.
    pub read: usize,
    /// Entries in the tree.
    pub entries: usize,
}

/// The kept listings of one workspace, by directory path relative to its root.
#[derive(Debug)]
pub struct TreeIndex {
    root: PathBuf,
    limit: usize,
    dirs: HashMap<PathBuf, Listing>,
}

impl TreeIndex {
    /// An empty index of `root` holding at most `limit` entries.
    pub fn new(root: &Path, limit: usize) -> Self {
        Self {
            root: root.to_path_buf(),
            limit,
            dirs: HashMap::new(),
        }
    }

    /// Brings the index up to date with the tree; `denies` decides, for an entry
    /// listed anew, whether reading it (its relative `/`-separated path) is denied.
    /// With `redecide`, entries of kept listings are decided again too (for a policy
    /// whose denials can change).
    pub fn refresh(
        &mut self,
        denies: &dyn Fn(&str) -> bool,
        redecide: bool,
    ) -> Result<RefreshStats, ScanError> {
        let mut old = std::mem::take(&mut self.dirs);
        let mut stats = RefreshStats::default();
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            let listing = match self.look(&rel, old.remove(&rel), denies, &mut stats) {
                Ok(Some(mut l)) => {
                    if redecide {
                        for e in &mut l.entries {
                            e.denied = denies(&slashed(&rel.join(&e.name)));
                        }
                    }
                    l
                }
                Ok(None) => continue,
                Err(e) => {
                    self.dirs.clear();
                    return Err(e);
                }
            };
            stats.entries += listing.entries.len();
            if stats.entries > self.limit {
                self.dirs.clear();
                return Err(ScanError::TooManyEntries { limit: self.limit });
            }
            for e in listing.entries.iter().filter(|e| e.kind == Kind::Dir) {
                stack.push(rel.join(&e.name));
            }
            self.dirs.insert(rel, listing);
        }
        Ok(stats)
    }

    /// The listing of `rel`: the kept one when the directory did not change, else a
    /// fresh read. `None` when it is gone or no longer a directory (it changed under
    /// the walk; its parent's next read sees that).
    fn look(
        &self,
        rel: &Path,
        kept: Option<Listing>,
        denies: &dyn Fn(&str) -> bool,
        stats: &mut RefreshStats,
    ) -> Result<Option<Listing>, ScanError> {
        let path = self.root.join(rel);
        let io_err = |source| ScanError::Io {
            path: path.clone(),
            source,
        };
        stats.dirs += 1;
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => m,
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound && !rel.as_os_str().is_empty() => {
                return Ok(None);
            }
            Err(e) => return Err(io_err(e)),
        };
        let ctime = (meta.ctime(), meta.ctime_nsec());
        if let Some(k) = kept
            && !k.racy
            && (k.dev, k.ino, k.ctime) == (meta.dev(), meta.ino(), ctime)
        {
            return Ok(Some(k));
        }
        // Read after the stat: a change during the read moves ctime past the one kept.
        let started = SystemTime::now();
        stats.read += 1;
        let mut entries = Vec::new();
        for item in std::fs::read_dir(&path).map_err(io_err)? {
            let item = item.map_err(io_err)?;
            let ft = item.file_type().map_err(io_err)?;
            let kind = if ft.is_symlink() {
                Kind::Link
            } else if ft.is_dir() {
                Kind::Dir
            } else if ft.is_file() {
                Kind::File
            } else {
                Kind::Other
            };
            let name = item.file_name();
            entries.push(Entry {
                denied: denies(&slashed(&rel.join(&name))),
                ino: item.ino(),
                kind,
                name,
            });
        }
        Ok(Some(Listing {
            dev: meta.dev(),
            ino: meta.ino(),
            ctime,
            racy: is_racy(ctime, started),
            entries,
        }))
    }

    /// The directory indexed.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Every entry with its path relative to the root.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (PathBuf, &Entry)> {
        self.dirs
            .iter()
            .flat_map(|(dir, l)| l.entries.iter().map(move |e| (dir.join(&e.name), e)))
    }

    /// The entries the policy denies reading, relative to the root, sorted.
    pub fn denied(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .dirs
            .iter()
            .flat_map(|(dir, l)| {
                l.entries
                    .iter()
                    .filter(|e| e.denied)
                    .map(move |e| dir.join(&e.name))
            })
            .collect();
        out.sort();
        out
    }
}

/// A relative path as the policy names it (`/`-separated).
fn slashed(p: &Path) -> String {
    p.to_string_lossy().replace('\\', "/")
}

/// Whether a directory with `ctime` read at `started` may have changed again within
/// the same timestamp tick (or the clock is behind the filesystem's).
fn is_racy(ctime: (i64, i64), started: SystemTime) -> bool {
    let Ok(now) = started.duration_since(UNIX_EPOCH) else {
        return true;
    };
    let Ok(secs) = u64::try_from(ctime.0) else {
        return true;
    };
    let nanos = u32::try_from(ctime.1).unwrap_or(0);
    let changed = Duration::new(secs, nanos);
    changed + RACY >= now
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_denied(p: &str) -> bool {
        p.rsplit('/').next() == Some(".env")
    }

    /// Makes every directory of the tree look old, so its listing is trusted.
    fn age(index: &mut TreeIndex) {
        for l in index.dirs.values_mut() {
            l.racy = false;
        }
    }

    #[test]
    fn a_rename_is_seen_and_an_untouched_tree_is_not_read_again() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("config/deep")).unwrap();
        std::fs::write(d.path().join("config/.env"), "S=1").unwrap();
        std::fs::write(d.path().join("config/deep/a.rs"), "").unwrap();
        let mut ix = TreeIndex::new(d.path(), 100);
        let first = ix.refresh(&env_denied, false).unwrap();
        assert_eq!((first.dirs, first.read, first.entries), (3, 3, 4));
        assert_eq!(ix.denied(), [PathBuf::from("config/.env")]);
        age(&mut ix);
        // Past the filesystem's timestamp tick, so a change gets a new ctime.
        std::thread::sleep(Duration::from_millis(20));
        let again = ix.refresh(&env_denied, false).unwrap();
        assert_eq!((again.dirs, again.read), (3, 0), "nothing changed");

        std::fs::rename(d.path().join("config"), d.path().join("cfg2")).unwrap();
        ix.refresh(&env_denied, false).unwrap();
        assert_eq!(ix.denied(), [PathBuf::from("cfg2/.env")]);
    }

    #[test]
    fn a_directory_whose_mtime_was_set_back_is_still_read_again() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("a")).unwrap();
        let mut ix = TreeIndex::new(d.path(), 100);
        ix.refresh(&env_denied, false).unwrap();
        age(&mut ix);
        std::thread::sleep(Duration::from_millis(20));
        let before = std::fs::metadata(d.path().join("a"))
            .unwrap()
            .modified()
            .unwrap();
        std::fs::write(d.path().join("a/.env"), "S=1").unwrap();
        let f = std::fs::File::open(d.path().join("a")).unwrap();
        f.set_modified(before).unwrap();
        ix.refresh(&env_denied, false).unwrap();
        assert_eq!(ix.denied(), [PathBuf::from("a/.env")]);
    }

    #[test]
    fn more_entries_than_the_limit_fail_instead_of_stopping() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::write(d.path().join(format!("f{i}")), "").unwrap();
        }
        let err = TreeIndex::new(d.path(), 4)
            .refresh(&env_denied, false)
            .unwrap_err();
        assert!(
            matches!(err, ScanError::TooManyEntries { limit: 4 }),
            "{err}"
        );
        assert!(
            TreeIndex::new(d.path(), 5)
                .refresh(&env_denied, false)
                .is_ok()
        );
    }

    #[test]
    fn links_are_entries_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join(".env"), "S=1").unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("out")).unwrap();
        let mut ix = TreeIndex::new(d.path(), 100);
        ix.refresh(&env_denied, false).unwrap();
        let all: Vec<_> = ix.entries().map(|(p, e)| (p, e.kind)).collect();
        assert_eq!(all, [(PathBuf::from("out"), Kind::Link)]);
    }
}
