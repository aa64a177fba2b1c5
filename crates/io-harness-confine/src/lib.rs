//! Confinement: every file access is reached *beneath* a workspace root, race-free.
//!
//! Why: checking a path string and then opening it is a race. Between the two, a
//! directory on the path can be swapped for a symlink to `/etc`, and the open that
//! follows the check lands outside. So the root is opened once as a directory
//! descriptor and every access is resolved relative to it by the kernel:
//!
//! - **Linux 5.6+**: `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`. The
//!   kernel refuses any resolution that would leave the root (`..`, absolute
//!   symlinks, relative ones climbing out) however the tree changes meanwhile, so
//!   symlinks that stay inside are followed and those that leave are refused.
//! - **Elsewhere** (older kernels, other Unixes, or a seccomp filter that hides
//!   `openat2`): a walk one component at a time with `openat(O_NOFOLLOW)` from the
//!   root descriptor, which **refuses every symlink**, inside or not — it cannot tell
//!   race-free where a symlink leads. [`Workspace::resolver`] says which is in force.
//!
//! Writes are stricter than reads in both modes: no component of a written path may
//! be a symlink. A policy deciding on the path as written needs the write to land on
//! exactly that path (`ln -s .git g` then writing `g/config` must not slip past a
//! rule protecting `.git/`). The file is written to a temporary name in the same
//! directory and `renameat`-ed over the target, which is atomic and replaces a
//! symlink planted at the final name rather than following it.
//!
//! Paths are also checked lexically first ([`Workspace::normalize`]), so a refusal
//! for `..` or an absolute path comes with a clear reason before anything is opened.
//!
//! The syscalls come from `rustix`; this crate has no `unsafe` of its own.
//!
//! ```
//! use io_harness_confine::{Error, Workspace};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("notes.txt"), "hello")?;
//! let ws = Workspace::open(dir.path())?;
//! assert_eq!(ws.read("notes.txt")?, b"hello");
//! ws.write("sub/new.txt", b"made")?;
//! assert_eq!(ws.read("sub/./new.txt")?, b"made");
//! // Leaving the root is refused, lexically here and by the kernel for symlinks.
//! assert!(matches!(ws.read("../secret"), Err(Error::Refused(_))));
//! assert!(matches!(ws.read("missing.txt"), Err(Error::NotFound(_))));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]
// Without Unix every access fails in `Root::open`, leaving the shared helpers unused.
#![cfg_attr(not(unix), allow(dead_code))]

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

mod error;
#[cfg(unix)]
mod sys;
#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as imp;

#[cfg(not(unix))]
mod unsupported;
#[cfg(not(unix))]
use unsupported as imp;

pub use error::Error;

/// A path that would leave the workspace, or cross a symlink it may not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct ConfineError {
    /// The path as given.
    pub path: String,
    /// Why it was refused.
    pub reason: String,
}

impl ConfineError {
    pub(crate) fn new(path: &str, reason: &str) -> Self {
        Self {
            path: path.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// Reasons given in [`ConfineError::reason`]; stable wording the tests and the model
/// can rely on.
pub(crate) mod reason {
    pub const NUL: &str = "contains a NUL byte";
    pub const ABSOLUTE: &str =
        "absolute paths are refused; give a path relative to the workspace root";
    pub const DOTDOT: &str = "`..` climbs out of the workspace root";
    pub const OUTSIDE: &str = "a symlink on this path resolves outside the workspace";
    pub const LOOP: &str = "a symlink on this path loops or is a /proc magic link";
    pub const WRITE_SYMLINK: &str =
        "a component of this path is a symlink; writes never go through symlinks";
    pub const WALK_SYMLINK: &str = "a component of this path is a symlink, and symlinks are refused because openat2(2) is unavailable here";
    pub const RACE: &str = "the path kept changing while it was resolved";
}

/// How paths are resolved beneath the root on this machine: an honest status, not a
/// promise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Resolver {
    /// `openat2(2)` with `RESOLVE_BENEATH`: symlinks staying inside are followed for
    /// reads, escapes refused by the kernel.
    Openat2,
    /// Component walk with `O_NOFOLLOW`: every symlink is refused.
    Walk,
}

/// What a directory entry or resolved path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (only from listings; resolution follows or refuses them).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// What [`Workspace::metadata`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metadata {
    /// Kind (after following symlinks that stay inside).
    pub kind: EntryKind,
    /// Size in bytes.
    pub len: u64,
}

/// Which file a path reaches, whatever its name: a rename or a hard link keeps it,
/// so a caller can follow a file it judged once (`(device, inode)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    /// The device.
    pub dev: u64,
    /// The inode on it.
    pub ino: u64,
}

/// One entry of a listed directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Name (lossily UTF-8 for display).
    pub name: String,
    /// Kind of the entry itself (a symlink is reported as a symlink).
    pub kind: EntryKind,
    raw: OsString,
}

impl DirEntry {
    pub(crate) fn new(raw: OsString, kind: EntryKind) -> Self {
        Self {
            name: raw.to_string_lossy().into_owned(),
            kind,
            raw,
        }
    }

    /// The name exactly as stored, for opening it (see [`WorkspaceDir`]).
    pub fn os_name(&self) -> &OsStr {
        &self.raw
    }
}

/// A tag no other handle (in this process or another) gives its temporary files:
/// the process id and the time the handle opened.
fn temp_tag() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static OPENED: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = OPENED.fetch_add(1, Ordering::Relaxed);
    format!("{}-{:x}{n}", std::process::id(), nanos & 0xffff_ffff)
}

/// Whether a resolution may follow symlinks that stay beneath the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// Follow symlinks that stay inside (refuse them all in walk mode).
    Inside,
    /// Refuse any symlink on the path: what a write will touch.
    Never,
}

/// The workspace root, opened once; every access resolves beneath it.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    inner: imp::Root,
    /// Names this handle's temporary files (see [`Workspace::temp_path_for`]).
    temp_tag: String,
}

impl Workspace {
    /// Opens the root directory and finds out whether `openat2(2)` works here.
    pub fn open(root: &Path) -> io::Result<Self> {
        Ok(Self {
            root: root.to_path_buf(),
            inner: imp::Root::open(root, false)?,
            temp_tag: temp_tag(),
        })
    }

    /// Opens the root but resolves by the component walk even where `openat2` works:
    /// how the fallback is tested on a modern kernel.
    #[cfg(test)]
    pub(crate) fn open_forcing_walk(root: &Path) -> io::Result<Self> {
        Ok(Self {
            root: root.to_path_buf(),
            inner: imp::Root::open(root, true)?,
            temp_tag: temp_tag(),
        })
    }

    /// The root path, as given to [`Workspace::open`]. For display: never use it to
    /// open files, that is what the methods here are for.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// How paths are resolved here.
    pub fn resolver(&self) -> Resolver {
        self.inner.resolver()
    }

    /// Lexically checks and normalizes a relative path (`a/./b//c/../d` → `a/b/d`;
    /// the root itself is `.`). Refuses absolute paths, `..` that climbs above the
    /// root, and NUL bytes. Symlinks are not looked at here: that happens, race-free,
    /// when the path is opened.
    pub fn normalize(&self, rel: &str) -> Result<String, ConfineError> {
        normalize(rel)
    }

    /// Reads a whole file beneath the root (following only symlinks that stay
    /// inside).
    pub fn read(&self, rel: &str) -> Result<Vec<u8>, Error> {
        self.read_bounded(rel, u64::MAX)
    }

    /// Reads a file of at most `max` bytes; a larger one is [`Error::TooLarge`].
    pub fn read_bounded(&self, rel: &str, max: u64) -> Result<Vec<u8>, Error> {
        self.read_with(rel, max, Follow::Inside)
    }

    /// [`Workspace::read_bounded`] with a choice of symlink handling: `Never` reads
    /// exactly the file a write to `rel` would replace.
    pub fn read_with(&self, rel: &str, max: u64, follow: Follow) -> Result<Vec<u8>, Error> {
        let rel = normalize(rel)?;
        let (file, meta) = self.inner.open_file(&rel, follow)?;
        read_limited(file, meta.len, max, &rel)
    }

    /// Writes `bytes` to a file beneath the root, creating missing parent directories
    /// and replacing an existing file atomically (its permission bits kept). Refuses
    /// if any component of the path is a symlink.
    ///
    /// The temporary file is named [`Workspace::temp_path_for`] `rel` (another name
    /// only when that one exists already), so a caller that journals the name before
    /// the write can remove what a crash mid-write left, and nothing else.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> Result<(), Error> {
        let rel = normalize(rel)?;
        if rel == "." {
            return Err(Error::RootNotAFile);
        }
        let temp = self.temp_name(&rel);
        self.inner.write(&rel, bytes, &temp)
    }

    /// The workspace-relative path of the temporary file a [`Workspace::write`] of
    /// `rel` through this handle creates beside its target: known before the write,
    /// so it can be put on record first.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let ws = io_harness_confine::Workspace::open(dir.path()).unwrap();
    /// let temp = ws.temp_path_for("src/lib.rs").unwrap();
    /// assert!(temp.starts_with("src/.io-harness-") && temp.ends_with(".tmp"));
    /// assert_eq!(temp, ws.temp_path_for("src/./lib.rs").unwrap());
    /// ```
    pub fn temp_path_for(&self, rel: &str) -> Result<String, ConfineError> {
        let rel = normalize(rel)?;
        let name = self.temp_name(&rel);
        Ok(match rel.rsplit_once('/') {
            Some((parent, _)) => format!("{parent}/{name}"),
            None => name,
        })
    }

    /// Removes the file (or symlink) `rel` itself, never what it points to, and
    /// never a directory: how a journaled temporary file left by a crash is cleaned.
    pub fn remove_file(&self, rel: &str) -> Result<(), Error> {
        let rel = normalize(rel)?;
        if rel == "." {
            return Err(Error::RootNotAFile);
        }
        self.inner.remove_file(&rel)
    }

    fn temp_name(&self, rel: &str) -> String {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        rel.hash(&mut h);
        format!(".io-harness-{}-{:016x}.tmp", self.temp_tag, h.finish())
    }

    /// Size and kind of what `rel` resolves to.
    pub fn metadata(&self, rel: &str) -> Result<Metadata, Error> {
        let rel = normalize(rel)?;
        self.inner.metadata(&rel)
    }

    /// The entries of a directory, sorted by name.
    pub fn list_dir(&self, rel: &str) -> Result<Vec<DirEntry>, Error> {
        self.open_dir(rel)?.entries()
    }

    /// Opens a directory beneath the root, for walking it without re-resolving paths.
    pub fn open_dir(&self, rel: &str) -> Result<WorkspaceDir, Error> {
        let rel = normalize(rel)?;
        let inner = self.inner.open_dir(&rel)?;
        Ok(WorkspaceDir { rel, inner })
    }

    /// The path a read of `rel` really reaches, relative to the root, when it differs
    /// from `rel` (a symlink inside the workspace): the policy must judge the file that
    /// is read, not the name it was asked by, or a link named `notes.txt` pointing at
    /// `.env` would pass a read-deny of `.env`. `None` when it is `rel` itself, when
    /// nothing is there, or where the OS cannot say.
    pub fn resolved_target(&self, rel: &str) -> Option<String> {
        let rel = normalize(rel).ok()?;
        let (file, _) = self.inner.open_file(&rel, Follow::Inside).ok()?;
        let real = fd_path(&file)?;
        let root = std::fs::canonicalize(&self.root).ok()?;
        let inside = real.strip_prefix(&root).ok()?;
        let target = inside.to_str()?.to_string();
        (target != rel && !target.is_empty()).then_some(target)
    }

    /// The identity of the regular file `rel` reaches (`Never`: refusing any symlink
    /// on the path, as a write would), without opening it for reading; `None` when it
    /// is something else (a directory, a FIFO).
    pub fn file_id(&self, rel: &str, follow: Follow) -> Result<Option<FileId>, Error> {
        let rel = normalize(rel)?;
        self.inner.file_id(&rel, follow)
    }

    /// Opens a regular file for reading, with its metadata (`Never`: refusing any
    /// symlink on the path, as a write would).
    pub fn open_file(&self, rel: &str, follow: Follow) -> Result<(File, Metadata), Error> {
        let rel = normalize(rel)?;
        self.inner.open_file(&rel, follow)
    }
}

/// An open directory beneath the root. Its children are opened relative to it and
/// never through a symlink, so a walk cannot be led outside by a swap.
#[derive(Debug)]
pub struct WorkspaceDir {
    rel: String,
    inner: imp::Dir,
}

impl WorkspaceDir {
    /// Path relative to the root (`.` for the root).
    pub fn rel(&self) -> &str {
        &self.rel
    }

    /// The path of a child, relative to the root.
    pub fn child_rel(&self, name: &str) -> String {
        if self.rel == "." {
            name.to_string()
        } else {
            format!("{}/{name}", self.rel)
        }
    }

    /// The entries, sorted by name.
    pub fn entries(&self) -> Result<Vec<DirEntry>, Error> {
        let mut v = self.inner.entries().map_err(|e| Error::io(&self.rel, e))?;
        v.sort_by(|a, b| a.raw.cmp(&b.raw));
        Ok(v)
    }

    /// Opens a child directory; a symlink there is refused.
    pub fn open_subdir(&self, name: &OsStr) -> Result<WorkspaceDir, Error> {
        let rel = self.child_rel(&name.to_string_lossy());
        let inner = self.inner.open_subdir(name, &rel)?;
        Ok(WorkspaceDir { rel, inner })
    }

    /// Opens a child regular file for reading; a symlink there is refused.
    pub fn open_file(&self, name: &OsStr) -> Result<(File, Metadata), Error> {
        let rel = self.child_rel(&name.to_string_lossy());
        self.inner.open_file(name, &rel)
    }

    /// Reads a child regular file of at most `max` bytes.
    pub fn read_file(&self, name: &OsStr, max: u64) -> Result<Vec<u8>, Error> {
        let rel = self.child_rel(&name.to_string_lossy());
        let (file, meta) = self.inner.open_file(name, &rel)?;
        read_limited(file, meta.len, max, &rel)
    }
}

/// Reads at most `max` bytes, refusing a file that is (or grows) larger.
fn read_limited(file: File, len: u64, max: u64, rel: &str) -> Result<Vec<u8>, Error> {
    let too_large = |size| Error::TooLarge {
        path: rel.to_string(),
        size,
        limit: max,
    };
    if len > max {
        return Err(too_large(len));
    }
    let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(max.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(rel, e))?;
    let read = u64::try_from(buf.len()).unwrap_or(u64::MAX);
    if read > max {
        return Err(too_large(read));
    }
    Ok(buf)
}

/// The path the kernel has for an open file.
fn fd_path(file: &File) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        None
    }
}

/// See [`Workspace::normalize`].
pub(crate) fn normalize(rel: &str) -> Result<String, ConfineError> {
    if rel.contains('\0') {
        return Err(ConfineError::new(rel, reason::NUL));
    }
    if rel.starts_with('/') {
        return Err(ConfineError::new(rel, reason::ABSOLUTE));
    }
    let mut parts: Vec<&str> = Vec::new();
    for c in rel.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(ConfineError::new(rel, reason::DOTDOT));
                }
            }
            c => parts.push(c),
        }
    }
    Ok(if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_cleans_and_refuses_lexically() {
        for (input, want) in [
            ("a/./b//c/../d", "a/b/d"),
            ("", "."),
            (".", "."),
            ("./", "."),
            ("a/..", "."),
            ("a/b/", "a/b"),
            (".git/config", ".git/config"),
        ] {
            assert_eq!(normalize(input).unwrap(), want, "{input:?}");
        }
        for (input, why) in [
            ("..", reason::DOTDOT),
            ("../x", reason::DOTDOT),
            ("a/../../x", reason::DOTDOT),
            ("/etc/passwd", reason::ABSOLUTE),
            ("a\0b", reason::NUL),
        ] {
            assert_eq!(normalize(input).unwrap_err().reason, why, "{input:?}");
        }
    }
}
