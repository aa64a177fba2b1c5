//! The run store: one SQLite file (WAL) that holds everything needed to answer, after
//! the fact, what a run did — and to resume it.
//!
//! # Why SQLite, and how it is configured
//!
//! A run must survive its own process being killed at any instant (SPEC C8), and an
//! operator must be able to audit it from the file alone (C7). One SQLite file gives both
//! with no server. [`Store::open`] sets:
//!
//! - `journal_mode = WAL`: readers never block the writer, and several processes (a
//!   parent run and its sub-agents, or `io-harness runs` while a run is live) share the
//!   file safely.
//! - `synchronous = NORMAL`: in WAL mode a transaction is in the WAL file when `COMMIT`
//!   returns, so a process killed with SIGKILL loses nothing it committed — the kernel
//!   still holds the written pages and the next opener replays the WAL. What `NORMAL` gives
//!   up relative to `FULL` is the `fsync` on every commit: only an operating-system crash
//!   or power loss can lose the last few transactions, and even then the database stays
//!   consistent (it rolls back to an earlier commit, never to a torn one). A step per
//!   `fsync` would dominate the cost of fast scripted runs for a guarantee against an
//!   event that also takes the agent's workspace with it.
//! - `busy_timeout = 10 s`: concurrent writers wait for each other instead of failing
//!   with `SQLITE_BUSY`; every write transaction starts `IMMEDIATE` so the wait happens
//!   at `BEGIN`, where SQLite can honour it, not on a read-to-write upgrade, where it
//!   cannot.
//! - `foreign_keys = ON`: a step cannot name a run that does not exist.
//!
//! # Layout
//!
//! The schema is versioned through `PRAGMA user_version` and moved forward by a small
//! migration runner (an ordered list of SQL steps, one transaction each); a file written by a newer build is refused
//! ([`StoreError::TooNew`]) rather than misread. Tables gain columns by migration, and
//! new event *kinds* are values, not tables (seed 000). One file per record family:
//! runs, steps (with their tool calls and content-addressed request bodies), the tool
//! intent journal, the sandbox and policy event logs, and the context log.
//!
//! # Secrets
//!
//! [`Store::redact_secrets`] registers credential values; from then on every text the
//! store writes, and every request body before it is hashed, has each occurrence
//! replaced by `[REDACTED]`, so the file can be shared for debugging.

use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::Connection;

mod approvals;
mod async_store;
mod attempts;
mod batches;
mod blobs;
mod body_stream;
mod context_events;
mod events;
mod health;
mod journal;
mod mcp_events;
mod memory;
mod open;
mod prune;
mod records;
mod replies;
mod run_sessions;
mod runs;
mod sandbox_event;
mod schema;
mod sessions;
mod settings;
mod step_messages;
mod steps;
mod trace_reads;

pub use async_store::AsyncStore;
pub use batches::{BatchRecord, BatchTask, NewBatchTask};
pub use context_events::ContextEvent;
pub use health::LostRecord;
pub use mcp_events::McpEvent;
pub use memory::{MAX_KEY, MAX_NOTES, MAX_VALUE, MemoryNote};
pub use records::{
    ApprovalRecord, LostCall, ModelCallRecord, NewRun, PolicyEvent, ProviderAttempt, RunFinish,
    RunRecord, SandboxSession, StepRecord, ToolCallRecord, ToolIntent, ToolIntentRecord,
};
pub use replies::StoredReply;
pub use run_sessions::RunSession;
pub use runs::{AgentLink, ChildRun};
pub use sandbox_event::SandboxEvent;
pub use schema::SCHEMA_VERSION;
pub use settings::RunSetting;
pub use trace_reads::SessionTime;

use crate::redact::{Redactor, SecretSet};

/// Failure of a store operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite said no.
    #[error("store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The file could not be opened or its directory created.
    #[error("store {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file was written by a newer io-harness.
    #[error("store schema version {found} is newer than this io-harness supports ({supported})")]
    TooNew {
        /// Version in the file.
        found: u32,
        /// Newest this build knows.
        supported: u32,
    },
    /// No pending approval request of that id.
    #[error("run {run_id} has no pending approval request {request_id:?}")]
    NoSuchApproval {
        /// The run.
        run_id: i64,
        /// The request.
        request_id: String,
    },
    /// A memory note outside the bounds.
    #[error(
        "a memory note needs a key of 1 to 64 bytes and a value of 1 to 1000 bytes (got {key_len} and {value_len})"
    )]
    MemoryBounds {
        /// Key length.
        key_len: usize,
        /// Value length.
        value_len: usize,
    },
    /// A run id that does not exist.
    #[error("no run with id {0}")]
    NoSuchRun(i64),
    /// The step was already committed; a step is never overwritten, so a resumed run
    /// cannot apply it twice.
    #[error("run {run_id} step {step} is already committed")]
    StepAlreadyCommitted {
        /// The run.
        run_id: i64,
        /// The step.
        step: u32,
    },
    /// A journal row id that does not exist.
    #[error("no tool intent with id {0}")]
    NoSuchIntent(i64),
    /// A call through [`AsyncStore`] never ran: the runtime dropped its task (it was
    /// shutting down).
    #[error("store call did not run: {0}")]
    TaskCancelled(String),
    /// The path no longer names the file this handle opened: it was deleted, or another
    /// file was renamed over it. Nothing more is written, because nothing written to the
    /// orphaned file could ever be read.
    #[error("store {path} was deleted or replaced while open; nothing more can be recorded")]
    Replaced {
        /// The store's path.
        path: String,
    },
    /// A record write of the run failed earlier where the run could not stop at once
    /// (see [`Store::note_lost`]); a step is not committed over a gap in its record.
    #[error(
        "run {run_id}: {count} record write(s) failed (the first, a {what}: {first}); the step is not committed"
    )]
    RecordsLost {
        /// The run.
        run_id: i64,
        /// Writes lost.
        count: u64,
        /// What the first was.
        what: &'static str,
        /// Why it failed.
        first: String,
    },
    /// A command that reads an existing store was pointed at a path with no store;
    /// nothing was created.
    #[error("no store at {path} (nothing was created; pass --store or IO_HARNESS_STORE)")]
    Missing {
        /// The path.
        path: String,
    },
}

impl StoreError {
    /// Whether the store itself failed (SQLite, I/O, a replaced file, a lost write), as
    /// opposed to refusing a request (an unknown run, a step already committed, a note
    /// out of bounds).
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            Self::Sqlite(_)
                | Self::Io { .. }
                | Self::TaskCancelled(_)
                | Self::Replaced { .. }
                | Self::RecordsLost { .. }
        )
    }
}

/// A store result.
pub type Result<T> = std::result::Result<T, StoreError>;

/// The store handle. Cheap to clone; one connection per handle, shared by its clones.
///
/// Clones share the connection (behind a mutex) and the registered secrets. Separate
/// [`Store::open`] calls on the same path — other threads or processes — each get their
/// own connection and coordinate through SQLite's locks.
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
    secrets: SecretSet,
    /// The file opened (`None` in memory), checked before every write transaction.
    file: Option<Arc<health::FileId>>,
    /// Record writes that failed where nothing could stop the run (see `health`).
    health: Arc<health::Health>,
    /// The previous request body of each run, so the next is stored incrementally.
    streams: Arc<body_stream::BodyStreams>,
}

// The store is handed to the run loop, sub-agents and blocking tasks: it must stay
// shareable across threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Store>();
};

impl Store {
    /// Caps this handle's database at its current size plus `extra_pages`, so the next
    /// writes fail as on a full disk (SQLite's `max_page_count`). Test-only: compiled
    /// with the `failpoints` feature.
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub fn fill_disk_after(&self, extra_pages: u32) -> Result<()> {
        let conn = self.conn();
        let pages: u32 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
        conn.pragma_update(None, "max_page_count", pages + extra_pages)?;
        Ok(())
    }

    /// The database file, or `None` for an in-memory store. The sandbox hides it (and
    /// its `-wal` and `-shm` companions) from sandboxed commands.
    pub fn path(&self) -> Option<std::path::PathBuf> {
        let conn = self.conn();
        conn.path()
            .filter(|p| !p.is_empty())
            .map(std::path::PathBuf::from)
    }

    fn from_connection(conn: Connection, file: Option<health::FileId>) -> Store {
        Store {
            conn: Arc::new(Mutex::new(conn)),
            secrets: SecretSet::default(),
            file: file.map(Arc::new),
            health: Arc::default(),
            streams: Arc::default(),
        }
    }

    /// Starts a write transaction that takes the write lock at `BEGIN`, where
    /// `busy_timeout` applies (see the module docs), then checks that the path still
    /// names the file this handle opened ([`StoreError::Replaced`] otherwise): checked
    /// under the lock, so no write of this handle lands in an orphaned file unseen.
    fn write_tx<'c>(&self, conn: &'c mut Connection) -> Result<rusqlite::Transaction<'c>> {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        self.check_file()?;
        Ok(tx)
    }

    /// The connection. A panic while it was held cannot leave it mid-transaction (an
    /// unfinished `Transaction` rolls back on drop), so a poisoned lock is still usable.
    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The secrets registered so far (a snapshot: cheap, and no lock held while writing).
    fn redactor(&self) -> Arc<Redactor> {
        self.secrets.redactor()
    }

    /// Values to redact from everything written from now on.
    ///
    /// Each value is found in every form [`crate::redact`] names (split by invisible
    /// characters, JSON-escaped, base64). Values shorter than 8 characters are ignored:
    /// they are not plausible credentials, and replacing every occurrence of a short
    /// string such as `true` or a port number would corrupt unrelated text and JSON.
    /// Registrations accumulate and are shared by all clones of this handle.
    pub fn redact_secrets(&self, values: &[String]) {
        self.secrets.register(values);
    }

    /// The set of secrets this store redacts, to share with another record (the audit
    /// log) so both hide the same values.
    pub fn secrets(&self) -> SecretSet {
        self.secrets.clone()
    }
}

/// Current wall-clock time in Unix milliseconds (0 if the clock is before 1970).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Fails with [`StoreError::NoSuchRun`] unless the run exists.
fn ensure_run(conn: &Connection, run_id: i64) -> Result<()> {
    use rusqlite::OptionalExtension;
    conn.query_row("SELECT 1 FROM runs WHERE id = ?1", [run_id], |_| Ok(()))
        .optional()?
        .ok_or(StoreError::NoSuchRun(run_id))
}

/// A count or duration as SQLite's integer (saturating: no real count reaches 2^63).
fn sql_u64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Column `i` as a non-negative integer; a negative value is reported, not wrapped.
fn get_u64(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<u64> {
    get_opt_u64(r, i)?.ok_or(rusqlite::Error::InvalidColumnType(
        i,
        String::new(),
        rusqlite::types::Type::Null,
    ))
}

/// Nullable column `i` as a non-negative integer.
fn get_opt_u64(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<u64>> {
    let v: Option<i64> = r.get(i)?;
    v.map(|v| u64::try_from(v).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(i, v)))
        .transpose()
}
