//! The probe's answer kept across processes, so a command-line process does not pay a
//! complete extra sandbox (the probe's `/bin/true`) before the one it was asked for.
//!
//! # What is cached, and what never is
//!
//! Only the fact that the native backend's probe *succeeded*, for one [`Key`]: this
//! kernel, this binary, this identity. It only chooses the backend. The layers every
//! session records still come from that session's own report, and a failed probe is
//! never cached, so a cache file can never make a run weaker than a fresh probe
//! would: at worst it names a native backend that then fails at its first spawn (the
//! error the run reports, as it would for a native backend that broke after a fresh
//! probe), and that failure removes the entry ([`forget`]).
//!
//! # When an entry counts
//!
//! The file must be a regular file (not followed through a symlink) owned by the
//! effective uid with mode exactly 0600, in a directory owned by that uid that no
//! group or other can enter (0700), and its text must equal the key's entry byte for
//! byte. Anything else — a missing, foreign, widened, corrupt, truncated or stale file
//! — is a miss: the probe runs, and a success writes a fresh entry (a temporary file
//! renamed over the old one, so concurrent processes never read half an entry). No
//! cache problem is ever an error.
//!
//! The directory is `$XDG_CACHE_HOME/io-harness/probe` (else `~/.cache/io-harness/probe`);
//! `IO_HARNESS_PROBE_CACHE=off` turns the cache off (every process probes).

mod key;

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

pub(crate) use key::Key;

/// The first line of every entry; a change of format is a miss, never a misread.
const FORMAT: &str = "io-harness-sandbox probe cache 1";

/// The most of a file read: an entry is a few hundred bytes.
const MAX_ENTRY: u64 = 16 * 1024;

/// Why an entry was not used (for the log and the tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Miss {
    /// No entry, or it could not be opened (a symlink included).
    Absent,
    /// The directory is not ours, not a directory, or open to group or others.
    Directory,
    /// The file is not ours.
    Owner,
    /// The file's mode is not 0600, or it is not a regular file.
    Mode,
    /// Its text is not this key's entry: another kernel, binary or identity, or corrupt.
    Stale,
}

/// A cache directory.
#[derive(Debug, Clone)]
pub(crate) struct ProbeCache {
    dir: PathBuf,
}

impl ProbeCache {
    /// The cache at `dir` (tests; the real one is [`ProbeCache::default_location`]).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The default cache, unless `IO_HARNESS_PROBE_CACHE=off` or no directory can be
    /// named (no absolute `XDG_CACHE_HOME`, no `HOME`).
    pub fn default_location() -> Option<Self> {
        if std::env::var_os("IO_HARNESS_PROBE_CACHE").is_some_and(|v| v == "off" || v == "0") {
            return None;
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .map(|h| h.join(".cache"))
            })?;
        Some(Self::at(base.join("io-harness").join("probe")))
    }

    fn file(&self, key: &Key) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// Whether the directory is ours and closed to everyone else.
    fn dir_is_private(&self, euid: u32) -> bool {
        fs::symlink_metadata(&self.dir)
            .is_ok_and(|m| m.is_dir() && m.uid() == euid && m.mode() & 0o077 == 0)
    }

    /// Whether `key`'s entry is here and may be believed.
    pub fn check(&self, key: &Key) -> Result<(), Miss> {
        if !self.dir.exists() {
            return Err(Miss::Absent);
        }
        if !self.dir_is_private(key.euid) {
            return Err(Miss::Directory);
        }
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(self.file(key))
            .map_err(|_| Miss::Absent)?;
        let meta = file.metadata().map_err(|_| Miss::Absent)?;
        if meta.uid() != key.euid {
            return Err(Miss::Owner);
        }
        if !meta.is_file() || meta.mode() & 0o7777 != 0o600 {
            return Err(Miss::Mode);
        }
        let mut text = String::new();
        file.take(MAX_ENTRY)
            .read_to_string(&mut text)
            .map_err(|_| Miss::Stale)?;
        if text == key.entry() {
            Ok(())
        } else {
            Err(Miss::Stale)
        }
    }

    /// Records that the native probe succeeded for `key`. Best effort: a cache that
    /// cannot be written only means the next process probes again.
    pub fn store(&self, key: &Key) {
        if let Err(e) = self.try_store(key) {
            tracing::debug!(dir = %self.dir.display(), error = %e, "probe cache not written");
        }
    }

    fn try_store(&self, key: &Key) -> std::io::Result<()> {
        if let Some(parent) = self.dir.parent() {
            fs::create_dir_all(parent)?;
        }
        match DirBuilder::new().mode(0o700).create(&self.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let meta = fs::symlink_metadata(&self.dir)?;
        if !meta.is_dir() || meta.uid() != key.euid {
            return Err(std::io::Error::other("the cache directory is not ours"));
        }
        if meta.mode() & 0o077 != 0 {
            // Ours but open to others: narrowed. A file another user planted while it
            // was open is not ours, and `check` refuses it.
            fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700))?;
        }
        let tmp = self
            .dir
            .join(format!(".{}.{}.tmp", key.file_name(), std::process::id()));
        let _ = fs::remove_file(&tmp);
        let mut f: File = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        // The umask can only narrow the mode; the check wants exactly 0600.
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        let written = f.write_all(key.entry().as_bytes());
        drop(f);
        match written.and_then(|()| fs::rename(&tmp, self.file(key))) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// Removes `key`'s entry: the backend it named failed to start a sandbox.
    pub fn forget(&self, key: &Key) {
        let _ = fs::remove_file(self.file(key));
    }

    /// The directory (tests).
    #[cfg(test)]
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }
}

/// The default cache and this process's key, when both exist.
pub(crate) fn current() -> Option<(ProbeCache, Key)> {
    Some((ProbeCache::default_location()?, Key::current()?))
}

/// Forgets this process's entry in the default cache (a native spawn failed after a
/// cached choice; the next process probes afresh).
pub(crate) fn forget() {
    if let Some((cache, key)) = current() {
        cache.forget(&key);
    }
}

#[cfg(test)]
mod tests;
