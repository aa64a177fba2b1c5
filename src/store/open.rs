//! Opening a store: connection settings and migration (see the module docs for why
//! each setting).

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

use super::schema::{self, MIGRATIONS};
use super::{Result, Store, StoreError};

/// How long a writer waits for another before giving up with `SQLITE_BUSY`. Steps are
/// short transactions; ten seconds is far beyond any honest wait and still bounded.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

impl Store {
    /// Opens (creating if needed) a store file, creating its parent directories, and
    /// brings its schema up to date.
    ///
    /// The handle remembers which file it opened: once the path names another file (the
    /// store was deleted or renamed over), every write fails with
    /// [`StoreError::Replaced`] instead of landing where no one can read it.
    ///
    /// Fails with [`StoreError::TooNew`] for a file written by a newer io-harness.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        let io_err = |source| StoreError::Io {
            path: path.display().to_string(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io_err)?;
        }
        let conn = Connection::open(path)?;
        Self::finish_open(conn, path)
    }

    /// Opens a store file that must exist: for commands that read (or answer) what
    /// runs recorded, which must never leave an empty store behind a mistyped path.
    /// Fails with [`StoreError::Missing`] when there is no file at `path`; creates
    /// nothing, not even a directory.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Store> {
        use rusqlite::OpenFlags;
        let path = path.as_ref();
        let missing = || StoreError::Missing {
            path: path.display().to_string(),
        };
        if !path.is_file() {
            return Err(missing());
        }
        // Without SQLITE_OPEN_CREATE: a file removed since the check is not recreated.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = match Connection::open_with_flags(path, flags) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::CannotOpen =>
            {
                return Err(missing());
            }
            other => other?,
        };
        Self::finish_open(conn, path)
    }

    /// The settings and migrations of a file just opened, and its identity.
    fn finish_open(mut conn: Connection, path: &Path) -> Result<Store> {
        // First, so that even switching the journal mode waits for other openers.
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let mode: String =
            while_busy(|| conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0)))?;
        if !mode.eq_ignore_ascii_case("wal") {
            // Some filesystems (network mounts) cannot hold the WAL index; the rollback
            // journal is slower under concurrency but just as durable.
            tracing::warn!(path = %path.display(), mode, "store: WAL unavailable");
        }
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        configure(&mut conn)?;
        // The file SQLite resolved (absolute); none for `:memory:` and temporary
        // databases, which no one can delete from under the handle.
        let file =
            match conn.path().filter(|p| !p.is_empty()) {
                Some(p) => Some(super::health::FileId::of(Path::new(p)).map_err(|source| {
                    StoreError::Io {
                        path: path.display().to_string(),
                        source,
                    }
                })?),
                None => None,
            };
        Ok(Store::from_connection(conn, file))
    }

    /// An in-memory store: nothing survives the last clone of the handle. For tests and
    /// one-off runs that need no record.
    pub fn memory() -> Result<Store> {
        let mut conn = Connection::open_in_memory()?;
        configure(&mut conn)?;
        Ok(Store::from_connection(conn, None))
    }

    /// The schema version of the open file (always [`super::SCHEMA_VERSION`] once
    /// opened).
    pub fn schema_version(&self) -> Result<u32> {
        schema::version(&self.conn())
    }
}

/// Retries `f` while SQLite answers `SQLITE_BUSY`, for at most [`BUSY_TIMEOUT`].
/// Switching a file to WAL takes an exclusive lock without consulting the busy
/// handler, so several processes opening a new store at once can see `BUSY` there
/// (eight threads opening one new file failed this way, rarely, under load).
fn while_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match f() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// Settings common to files and memory, then the migrations.
fn configure(conn: &mut Connection) -> Result<()> {
    conn.pragma_update(None, "foreign_keys", true)?;
    schema::migrate(conn, MIGRATIONS)?;
    Ok(())
}
