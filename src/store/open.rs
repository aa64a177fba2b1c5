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
        let mut conn = Connection::open(path)?;
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
        Ok(Store::from_connection(conn))
    }

    /// An in-memory store: nothing survives the last clone of the handle. For tests and
    /// one-off runs that need no record.
    pub fn memory() -> Result<Store> {
        let mut conn = Connection::open_in_memory()?;
        configure(&mut conn)?;
        Ok(Store::from_connection(conn))
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
