//! Reads for the OpenTelemetry trace built from the store (`crate::otel`): what the
//! record families above give without a timestamp a span needs. Kept apart so the
//! trace's needs do not widen the records every other reader uses.

use super::{Result, Store, ensure_run, get_opt_u64, sql_u64};

/// When a sandbox session ended, by row: `sandbox_sessions.at_ms` is written as the
/// session is recorded, right after the command ended, so a span runs from
/// `ended_at_ms - duration_ms` to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionTime {
    /// Unix ms at which the session was recorded (its end).
    pub ended_at_ms: i64,
}

impl Store {
    /// The end time of each sandbox session of a run, in the order of
    /// [`Store::sandbox_sessions`] (oldest first), so the two zip.
    pub fn sandbox_session_times(&self, run_id: i64) -> Result<Vec<SessionTime>> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare("SELECT at_ms FROM sandbox_sessions WHERE run_id = ?1 ORDER BY id")?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(SessionTime {
                ended_at_ms: r.get(0)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Records how many live exports of the run's spans were dropped (0: all
    /// delivered). Left NULL for a run nothing was exported from live.
    pub fn set_otlp_dropped(&self, run_id: i64, dropped: u64) -> Result<()> {
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, run_id)?;
        tx.execute(
            "UPDATE runs SET otlp_dropped = ?2 WHERE id = ?1",
            rusqlite::params![run_id, sql_u64(dropped)],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The dropped live exports of a run: `None` when nothing was exported live.
    pub fn otlp_dropped(&self, run_id: i64) -> Result<Option<u64>> {
        let conn = self.conn();
        let v = conn.query_row(
            "SELECT otlp_dropped FROM runs WHERE id = ?1",
            [run_id],
            |r| get_opt_u64(r, 0),
        );
        match v {
            Ok(v) => Ok(v),
            Err(rusqlite::Error::QueryReturnedNoRows) => Err(super::StoreError::NoSuchRun(run_id)),
            Err(e) => Err(e.into()),
        }
    }
}
