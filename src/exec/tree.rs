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
//! 2 s (`RACY`) of the moment it was read is read again next time whatever it says (git's
//! "racy" rule). Every directory is still `lstat`ed on every refresh: that is the
//! incremental cost, against a `readdir` of each and a policy decision per entry.
//!
//! Links are never followed: a symlink is an entry, not a directory to enter. Every
//! entry counts against the run's limit; a tree larger than it is an error, never a
//! silently partial answer (a secret beyond the limit would go unmasked).

use crate::policy::{Act, Action, Decision, PolicyGate};
use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, MetadataExt, OpenOptionsExt, PermissionsExt};
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
    /// More files were denied reading than a run follows (see
    /// [`crate::policy::FollowDenied`]).
    #[error(transparent)]
    DeniedFiles(#[from] crate::policy::DeniedFilesFull),
}

/// What an entry is, as its directory lists it (links not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Link,
    Other,
}

/// What the policy lets a command do with an entry, at its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Access {
    /// Read and write as the sandbox allows.
    #[default]
    Open,
    /// Reading is allowed, writing denied: held read-only in the view (the
    /// instructions file, repository internals, a gate's files, an operator's
    /// `deny write`), and not to be created by a command.
    ReadOnly,
    /// Reading is denied: masked.
    Masked,
}

impl Access {
    /// What `gate` lets a command do with `target` (a workspace-relative path): a read
    /// denial masks it; otherwise a write denial holds it read-only.
    pub fn decided_by(gate: &dyn PolicyGate, target: &str) -> Access {
        let denied =
            |act| gate.decide(&Action::new(act, target.to_string())).decision == Decision::Deny;
        if denied(Act::Read) {
            Access::Masked
        } else if denied(Act::Write) {
            Access::ReadOnly
        } else {
            Access::Open
        }
    }
}

/// One entry of a directory listing.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub name: OsString,
    pub kind: Kind,
    pub ino: u64,
    /// What the policy lets a command do with it (decided when listed).
    pub access: Access,
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

    /// Brings the index up to date with the tree; `judge` decides, for an entry
    /// listed anew, what a command may do with it (its relative `/`-separated path).
    /// With `redecide`, entries of kept listings are decided again too (for a policy
    /// whose denials can change).
    pub fn refresh(
        &mut self,
        judge: &dyn Fn(&str) -> Access,
        redecide: bool,
    ) -> Result<RefreshStats, ScanError> {
        let mut old = std::mem::take(&mut self.dirs);
        let mut stats = RefreshStats::default();
        let mut dirs = HashMap::new();
        let limit = self.limit;
        let root = self.root.clone();
        walk(&root, &mut |rel, dir| {
            let mut l = look(&root, rel, dir, old.remove(rel), judge, &mut stats)?;
            if redecide {
                for e in &mut l.entries {
                    e.access = judge(&slashed(&rel.join(&e.name)));
                }
            }
            stats.entries += l.entries.len();
            if stats.entries > limit {
                return Err(ScanError::TooManyEntries { limit });
            }
            let subdirs = subdirs(&l.entries);
            dirs.insert(rel.to_path_buf(), l);
            Ok(subdirs)
        })?;
        self.dirs = dirs;
        Ok(stats)
    }

    /// The directory indexed.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Every directory listed: its path relative to the root, its inode, its entries.
    pub(crate) fn listings(&self) -> impl Iterator<Item = (&Path, u64, &[Entry])> {
        self.dirs
            .iter()
            .map(|(rel, l)| (rel.as_path(), l.ino, l.entries.as_slice()))
    }

    /// Every entry with its path relative to the root.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (PathBuf, &Entry)> {
        self.dirs
            .iter()
            .flat_map(|(dir, l)| l.entries.iter().map(move |e| (dir.join(&e.name), e)))
    }

    /// The regular files the policy denies reading, relative to the root.
    pub(crate) fn denied_files(&self) -> Vec<PathBuf> {
        self.entries()
            .filter(|(_, e)| e.access == Access::Masked && e.kind == Kind::File)
            .map(|(p, _)| p)
            .collect()
    }

    /// The entries the policy denies reading, relative to the root, sorted.
    pub fn denied(&self) -> Vec<PathBuf> {
        self.with_access(Access::Masked)
    }

    /// The outermost entries the policy denies writing but not reading (files and
    /// directories, never links: a bind would follow one), relative to the root,
    /// sorted. One inside another, or inside a masked directory, is left out: the
    /// outer one holds it.
    pub fn read_only(&self) -> Vec<PathBuf> {
        let masked = self.denied();
        let mut out: Vec<PathBuf> = Vec::new();
        for p in self.with_access(Access::ReadOnly) {
            let held = out.last().is_some_and(|last| p.starts_with(last))
                || masked.iter().any(|m| p.starts_with(m));
            if !held {
                out.push(p);
            }
        }
        out
    }

    fn with_access(&self, access: Access) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .dirs
            .iter()
            .flat_map(|(dir, l)| {
                l.entries
                    .iter()
                    .filter(move |e| {
                        e.access == access && (access == Access::Masked || e.kind != Kind::Link)
                    })
                    .map(move |e| dir.join(&e.name))
            })
            .collect();
        out.sort();
        out
    }
}

/// The names of the subdirectories among `entries`.
fn subdirs(entries: &[Entry]) -> Vec<OsString> {
    entries
        .iter()
        .filter(|e| e.kind == Kind::Dir)
        .map(|e| e.name.clone())
        .collect()
}

/// The listing of `dir` (open, at `rel`): the kept one when the directory did not
/// change, else a fresh read.
fn look(
    root: &Path,
    rel: &Path,
    dir: &File,
    kept: Option<Listing>,
    judge: &dyn Fn(&str) -> Access,
    stats: &mut RefreshStats,
) -> Result<Listing, ScanError> {
    let io_err = |source| ScanError::Io {
        path: root.join(rel),
        source,
    };
    stats.dirs += 1;
    let meta = dir.metadata().map_err(io_err)?;
    let ctime = (meta.ctime(), meta.ctime_nsec());
    if let Some(k) = kept
        && !k.racy
        && (k.dev, k.ino, k.ctime) == (meta.dev(), meta.ino(), ctime)
    {
        return Ok(k);
    }
    // Read after the stat: a change during the read moves ctime past the one kept.
    let started = SystemTime::now();
    stats.read += 1;
    let entries = read_entries(dir, &|name| judge(&slashed(&rel.join(name)))).map_err(io_err)?;
    Ok(Listing {
        dev: meta.dev(),
        ino: meta.ino(),
        ctime,
        racy: is_racy(ctime, started),
        entries,
    })
}

/// The entries of the open directory `dir` (links not followed), read through its
/// descriptor so no path length bounds the depth.
fn read_entries(dir: &File, judge: &dyn Fn(&OsStr) -> Access) -> io::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for item in std::fs::read_dir(fd_path(dir))? {
        let item = item?;
        let ft = item.file_type()?;
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
            access: judge(&name),
            ino: item.ino(),
            kind,
            name,
        });
    }
    Ok(entries)
}

/// Every directory below `root` with no limit, for the checks that must not stop at
/// the index's (a repository past the scan limit is still a repository): `each` is
/// given each directory's path relative to the root, its inode and its entries.
pub(crate) fn scan_all(
    root: &Path,
    each: &mut dyn FnMut(&Path, u64, &[Entry]),
) -> Result<(), ScanError> {
    walk(root, &mut |rel, dir| {
        let io_err = |source| ScanError::Io {
            path: root.join(rel),
            source,
        };
        let ino = dir.metadata().map_err(io_err)?.ino();
        let entries = read_entries(dir, &|_| Access::Open).map_err(io_err)?;
        each(rel, ino, &entries);
        Ok(subdirs(&entries))
    })
}

/// The path by which the kernel reaches an open file whatever its depth (the magic
/// link resolves to the file itself, never through a path string).
pub(crate) fn fd_path(f: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()))
}

/// `openat(parent, name, flags)`.
fn openat(parent: &File, name: &OsStr, flags: libc::c_int) -> io::Result<File> {
    let c = CString::new(name.as_bytes()).map_err(io::Error::other)?;
    // SAFETY: a valid descriptor and a NUL-terminated name; the result is checked.
    let fd = unsafe { libc::openat(parent.as_raw_fd(), c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nobody else owns.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

const DIR_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

/// A directory open for the walk; when the harness had to give itself access to it
/// (its own directory, made unreadable by a command), the mode it had is put back
/// when this is dropped.
pub(crate) struct OpenDir {
    pub dir: File,
    restore: Option<u32>,
}

impl OpenDir {
    /// A directory opened with nothing to restore.
    pub(crate) fn plain(dir: File) -> Self {
        Self { dir, restore: None }
    }
}

impl Drop for OpenDir {
    fn drop(&mut self) {
        if let Some(mode) = self.restore
            && let Err(e) = self
                .dir
                .set_permissions(std::fs::Permissions::from_mode(mode))
        {
            tracing::warn!(error = %e, "could not restore a directory's mode after the workspace check");
        }
    }
}

/// Opens the directory `name` of `parent`, never following a link. A directory of
/// the harness's own user that it cannot read (a command's `chmod 311`) is given
/// `u+rwx` for the walk and has its mode restored after; one still unreadable is an
/// error, never a skipped subtree.
pub(crate) fn open_child(parent: &File, name: &OsStr) -> io::Result<OpenDir> {
    match openat(parent, name, DIR_FLAGS) {
        Ok(dir) => Ok(OpenDir { dir, restore: None }),
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            let path = openat(
                parent,
                name,
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )?;
            let restore = make_accessible(&path)?.ok_or(e)?;
            match openat(parent, name, DIR_FLAGS) {
                Ok(dir) => Ok(OpenDir {
                    dir,
                    restore: Some(restore),
                }),
                Err(e) => {
                    let _ = set_mode(&path, restore);
                    Err(e)
                }
            }
        }
        Err(e) => Err(e),
    }
}

/// Gives the directory open as `dir` (`O_PATH` will do) `u+rwx` when the harness owns
/// it and it lacks some; the mode it had, when it was changed. A directory of another
/// user is `EACCES`.
pub(crate) fn make_accessible(dir: &File) -> io::Result<Option<u32>> {
    let meta = dir.metadata()?;
    // SAFETY: geteuid cannot fail.
    if meta.uid() != unsafe { libc::geteuid() } {
        return Err(io::Error::from_raw_os_error(libc::EACCES));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o700 == 0o700 {
        return Ok(None);
    }
    set_mode(dir, mode | 0o700)?;
    Ok(Some(mode))
}

/// `chmod` of an open file through its descriptor's magic link (works for `O_PATH`).
fn set_mode(f: &File, mode: u32) -> io::Result<()> {
    std::fs::set_permissions(fd_path(f), std::fs::Permissions::from_mode(mode))
}

/// What [`walk`] calls for each directory.
type OnDir<'a> = dyn FnMut(&Path, &File) -> Result<Vec<OsString>, ScanError> + 'a;

/// Walks the tree below `root` depth-first by directory descriptors: each directory
/// is opened relative to its parent's (`O_NOFOLLOW | O_DIRECTORY`), so no path length
/// bounds the depth and no link is followed. `on_dir` is given each directory (its
/// path relative to the root and the open directory) and returns the names of the
/// subdirectories to enter. An entry that is gone or no longer a directory when
/// opened is skipped (it changed under the walk; its parent's next read sees that);
/// any other failure ends the walk with an error.
fn walk(root: &Path, on_dir: &mut OnDir<'_>) -> Result<(), ScanError> {
    let top = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(root)
        .map_err(|source| ScanError::Io {
            path: root.to_path_buf(),
            source,
        })?;
    let subdirs = on_dir(Path::new(""), &top)?;
    let mut stack = vec![(
        PathBuf::new(),
        OpenDir {
            dir: top,
            restore: None,
        },
        subdirs,
    )];
    while let Some((rel, open, subdirs)) = stack.last_mut() {
        let Some(name) = subdirs.pop() else {
            stack.pop();
            continue;
        };
        let rel = rel.join(&name);
        let child = match open_child(&open.dir, &name) {
            Ok(c) => c,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)
                ) =>
            {
                continue;
            }
            Err(source) => {
                return Err(ScanError::Io {
                    path: root.join(&rel),
                    source,
                });
            }
        };
        let subdirs = on_dir(&rel, &child.dir)?;
        stack.push((rel, child, subdirs));
    }
    Ok(())
}

/// A relative path as the policy names it (`/`-separated).
pub(crate) fn slashed(p: &Path) -> String {
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

    fn env_denied(p: &str) -> Access {
        match p.rsplit('/').next() {
            Some(".env") => Access::Masked,
            Some("AGENTS.md" | "locked") => Access::ReadOnly,
            _ => Access::Open,
        }
    }

    /// Issue 16 route 7: what the policy denies writing is listed to be held
    /// read-only, outermost only, never a link, never inside a masked directory.
    #[test]
    fn read_only_lists_the_outermost_write_denied_entries() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("locked/inner")).unwrap();
        std::fs::write(d.path().join("locked/inner/AGENTS.md"), "").unwrap();
        std::fs::write(d.path().join("AGENTS.md"), "").unwrap();
        std::fs::create_dir_all(d.path().join("docs")).unwrap();
        std::os::unix::fs::symlink("../AGENTS.md", d.path().join("docs/AGENTS.md")).unwrap();
        std::fs::create_dir_all(d.path().join(".env")).unwrap();
        std::fs::write(d.path().join(".env/AGENTS.md"), "").unwrap();
        let mut ix = TreeIndex::new(d.path(), 100);
        ix.refresh(&env_denied, false).unwrap();
        assert_eq!(
            ix.read_only(),
            [PathBuf::from("AGENTS.md"), PathBuf::from("locked")]
        );
        assert_eq!(ix.denied(), [PathBuf::from(".env")]);
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

    /// B3: a directory of the harness's own user made unreadable (`chmod 311`) is
    /// given `u+rwx` for the walk and gets its mode back after. (Run as root the
    /// `EACCES` that leads here never happens, so this checks the chmod and restore.)
    #[test]
    fn an_unreadable_own_directory_is_opened_and_its_mode_restored() {
        let d = tempfile::tempdir().unwrap();
        let zz = d.path().join("zz");
        std::fs::create_dir(&zz).unwrap();
        std::fs::set_permissions(&zz, std::fs::Permissions::from_mode(0o311)).unwrap();
        let mode = || std::fs::metadata(&zz).unwrap().permissions().mode() & 0o7777;
        let path = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(&zz)
            .unwrap();
        assert_eq!(make_accessible(&path).unwrap(), Some(0o311));
        assert_eq!(mode(), 0o711);
        let parent = File::open(d.path()).unwrap();
        let open = OpenDir {
            dir: openat(&parent, OsStr::new("zz"), DIR_FLAGS).unwrap(),
            restore: Some(0o311),
        };
        drop(open);
        assert_eq!(mode(), 0o311, "the mode is put back");
        assert_eq!(make_accessible(&parent).unwrap(), None, "nothing to change");
    }

    #[test]
    fn a_tree_deeper_than_path_max_is_indexed() {
        let d = tempfile::tempdir().unwrap();
        let name = OsStr::new("d123456789d123456789d123456789d123456789d123456789d123456789");
        let mut dir = File::open(d.path()).unwrap();
        for _ in 0..100 {
            std::fs::create_dir(fd_path(&dir).join(name)).unwrap();
            dir = openat(&dir, name, DIR_FLAGS).unwrap();
        }
        std::fs::create_dir(fd_path(&dir).join(".git")).unwrap();
        let mut ix = TreeIndex::new(d.path(), 1000);
        ix.refresh(&env_denied, false).unwrap();
        assert!(
            ix.entries()
                .any(|(p, e)| e.name == ".git" && p.as_os_str().len() > 6000)
        );
    }
}
