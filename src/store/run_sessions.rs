//! The sessions of a run: the process that started it and each one that resumed it,
//! with when each began and how it ended. A trace shows one span per session
//! (`crate::otel`), and a span, once sent, cannot change: so each session is its own
//! record, fixed when it ends, rather than the run's one row that a resume rewrites.

use super::{Result, Store, ensure_run};

/// One session of a run.
///
/// ```
/// # use io_harness::Store;
/// let store = Store::memory().unwrap();
/// let run = store.start_run("goal", "/w").unwrap();
/// let first = store.begin_run_session(run, 1_000).unwrap();
/// store.end_run_session(run, first, 2_000, "awaiting_approval").unwrap();
/// let again = store.begin_run_session(run, 5_000).unwrap();
/// let all = store.run_sessions(run).unwrap();
/// assert_eq!((first, again), (0, 1));
/// assert_eq!(all[0].ended_as.as_deref(), Some("awaiting_approval"));
/// assert_eq!(all[1].ended_at_ms, None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSession {
    /// 0 for the session that started the run, then 1, 2… for each resume.
    pub ordinal: u32,
    /// Unix ms at which the session began.
    pub started_at_ms: i64,
    /// Unix ms at which it ended; `None` while it runs or when its process was killed.
    pub ended_at_ms: Option<i64>,
    /// How it ended: the outcome name it recorded (`success`, `awaiting_approval`,
    /// `cancelled`…); `None` with `ended_at_ms`.
    pub ended_as: Option<String>,
}

impl Store {
    /// Records that a session of `run_id` began at `at_ms`; returns its ordinal.
    pub fn begin_run_session(&self, run_id: i64, at_ms: i64) -> Result<u32> {
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, run_id)?;
        let ordinal: u32 = tx.query_row(
            "SELECT COUNT(*) FROM run_sessions WHERE run_id = ?1",
            [run_id],
            |r| r.get(0),
        )?;
        tx.execute(
            "INSERT INTO run_sessions (run_id, ordinal, started_at_ms) VALUES (?1, ?2, ?3)",
            rusqlite::params![run_id, ordinal, at_ms],
        )?;
        tx.commit()?;
        Ok(ordinal)
    }

    /// Records how session `ordinal` of `run_id` ended (once: a later call for the same
    /// session changes nothing).
    pub fn end_run_session(
        &self,
        run_id: i64,
        ordinal: u32,
        at_ms: i64,
        ended_as: &str,
    ) -> Result<()> {
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, run_id)?;
        tx.execute(
            "UPDATE run_sessions SET ended_at_ms = ?3, ended_as = ?4
             WHERE run_id = ?1 AND ordinal = ?2 AND ended_at_ms IS NULL",
            rusqlite::params![run_id, ordinal, at_ms, ended_as],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The sessions of a run, oldest first (none for runs stored before sessions were
    /// kept).
    pub fn run_sessions(&self, run_id: i64) -> Result<Vec<RunSession>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT ordinal, started_at_ms, ended_at_ms, ended_as FROM run_sessions
             WHERE run_id = ?1 ORDER BY ordinal",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(RunSession {
                ordinal: r.get(0)?,
                started_at_ms: r.get(1)?,
                ended_at_ms: r.get(2)?,
                ended_as: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
