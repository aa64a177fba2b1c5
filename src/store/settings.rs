//! The configuration a run was started with: every resolved value and where it came
//! from (a file and line, a variable, a flag, or the built-in default), so the record
//! answers "why did this run use that model, that cap, that retry policy" without the
//! files that were on the operator's machine at the time.

use rusqlite::params;

use super::{Result, Store, ensure_run};

/// One resolved value of a run's configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunSetting {
    /// Dotted key (`sandbox.limits.memory`).
    pub key: String,
    /// The value as TOML writes it on one line, credentials redacted.
    pub value: String,
    /// Where it came from: `file:line`, `env VAR`, `flag --x` or `default`.
    pub source: String,
    /// The layer: `default`, `user`, `project`, `task`, `env` or `flag`.
    pub layer: String,
}

impl Store {
    /// Records a run's resolved configuration (replacing what was recorded for it).
    pub fn record_settings(&self, run_id: i64, settings: &[RunSetting]) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, run_id)?;
        tx.execute(
            "DELETE FROM run_settings WHERE run_id = ?1",
            params![run_id],
        )?;
        for (seq, s) in settings.iter().enumerate() {
            tx.execute(
                "INSERT INTO run_settings (run_id, seq, key, value, source, layer)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    run_id,
                    i64::try_from(seq).unwrap_or(i64::MAX),
                    red.text(&s.key),
                    red.text(&s.value),
                    red.text(&s.source),
                    s.layer,
                ],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// A run's resolved configuration, in the order it was recorded (empty for a run
    /// started before settings were kept, or from the library without them).
    pub fn settings(&self, run_id: i64) -> Result<Vec<RunSetting>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT key, value, source, layer FROM run_settings WHERE run_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map(params![run_id], |r| {
            Ok(RunSetting {
                key: r.get(0)?,
                value: r.get(1)?,
                source: r.get(2)?,
                layer: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
