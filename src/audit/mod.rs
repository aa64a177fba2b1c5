//! The audit log (C18): one JSON line per sandbox session, appended to
//! `$XDG_CONFIG_HOME/io-harness/audit/sessions.jsonl`, beside the store.
//!
//! The store answers questions about a run; this file answers "what ran on this
//! machine, where, and how was it isolated" across every run and every store, in a form
//! `grep` and `jq` can read. It is written 0600 in a 0700 directory because an argv can
//! carry a token: the command line is recorded as it ran (a log that cannot say what
//! ran answers nothing, and a redaction heuristic would imply a safety it cannot give)
//! except for the values of the credentials the harness itself holds — the provider's
//! key, an MCP server's token — which are replaced in every form [`crate::redact`]
//! finds, as in the store. Environment *values* are never recorded — names only.
//!
//! Appending is best effort: an unwritable log never fails a run, because the run is
//! what the operator asked for. Rotation at 8 MiB keeps 5 generations (about 60,000
//! sessions); a reader must read every generation ([`generations`]), or it reports the
//! older history as though it never happened.

mod branch;
mod record;
mod rotate;

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use branch::git_branch;
pub use record::SessionRecord;
pub use rotate::{MAX_BYTES, MAX_GENERATIONS, generations};

use crate::redact::SecretSet;

/// File name of the live generation.
pub const FILE_NAME: &str = "sessions.jsonl";

/// Where the log lives by default: `$XDG_CONFIG_HOME/io-harness/audit`, else
/// `~/.config/io-harness/audit`; `None` without either (nothing is written then).
pub fn default_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(x).join("io-harness").join("audit"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(".config/io-harness/audit"))
}

/// An append-only, rotating JSONL log of sandbox sessions.
///
/// ```
/// use io_harness::audit::{AuditLog, SessionRecord};
/// let dir = tempfile::tempdir().unwrap();
/// let log = AuditLog::new(dir.path().join("audit"));
/// let mut rec = SessionRecord::new(vec!["/bin/true".into()], "/work", "portable-floor");
/// rec.exit_code = Some(0);
/// log.append(&rec).unwrap();
/// let lines = log.read_all().unwrap();
/// assert_eq!(lines[0].backend, "portable-floor");
/// ```
#[derive(Debug, Clone)]
pub struct AuditLog {
    dir: PathBuf,
    max_bytes: u64,
    /// Whether a failed append was already warned about: shared by the clones a run
    /// hands to its executor and MCP servers, so a log that stays unwritable warns
    /// once, not once per session.
    warned: Arc<AtomicBool>,
    /// The credentials replaced in every line (shared with the run's store).
    secrets: SecretSet,
}

impl AuditLog {
    /// A log in `dir` (created on first append, mode 0700).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            max_bytes: MAX_BYTES,
            warned: Arc::default(),
            secrets: SecretSet::default(),
        }
    }

    /// This log, redacting the secrets of `set` (a store's, so the two records hide
    /// the same values) instead of its own.
    pub fn sharing_secrets(mut self, set: SecretSet) -> Self {
        self.secrets = set;
        self
    }

    /// Values to redact from every line appended from now on (see
    /// [`crate::store::Store::redact_secrets`]).
    pub fn redact_secrets(&self, values: &[String]) {
        self.secrets.register(values);
    }

    /// The log at [`default_dir`], if there is one.
    pub fn default_location() -> Option<Self> {
        default_dir().map(Self::new)
    }

    /// Rotates at `bytes` instead of 8 MiB (tests, small machines).
    pub fn with_max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = bytes.max(1);
        self
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The live file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// Appends one record. Check, rotate and append happen under one exclusive lock,
    /// so concurrent writers (threads or processes) never interleave lines or rotate
    /// twice. Callers treat an error as a warning: it must never fail a run.
    pub fn append(&self, rec: &SessionRecord) -> io::Result<()> {
        let json = serde_json::to_vec(rec).map_err(io::Error::other)?;
        let mut line = self.secrets.redactor().bytes(&json).into_owned();
        line.push(b'\n');
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        // A directory that existed with wider permissions is narrowed: it holds argv.
        fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700))?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(self.dir.join("sessions.lock"))?;
        let _held = rotate::Flock::exclusive(&lock)?;
        rotate::rotate_if_needed(&self.dir, self.max_bytes, line.len() as u64)?;
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(self.path())?;
        f.write_all(&line)?;
        f.flush()
    }

    /// Warns about a failed append the first time one happens on this log (and its
    /// clones); returns whether this call warned. The caller counts every failure in
    /// the store: a warning per session would bury the run's own output.
    pub fn warn_once(&self, err: &io::Error) -> bool {
        let first = !self.warned.swap(true, Ordering::Relaxed);
        if first {
            tracing::warn!(dir = %self.dir.display(), error = %err, "the audit log cannot be written; the run goes on, failures are counted in the store");
        }
        first
    }

    /// Every record of every generation, oldest first. Lines that do not parse are
    /// skipped (a log is not a place to fail on a truncated last line).
    pub fn read_all(&self) -> io::Result<Vec<SessionRecord>> {
        let mut out = Vec::new();
        let mut gens = generations(&self.dir)?;
        gens.reverse();
        for g in gens {
            let f = File::open(&g)?;
            for line in io::BufReader::new(f).lines() {
                if let Ok(rec) = serde_json::from_str::<SessionRecord>(&line?) {
                    out.push(rec);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
