//! Reads for the OpenTelemetry trace built from the store (`crate::otel`): what the
//! record families above give without a timestamp a span needs. Kept apart so the
//! trace's needs do not widen the records every other reader uses.

use super::{Result, Store};

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
}
