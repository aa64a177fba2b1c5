//! Failed provider attempts: every retry and every fallback, so an operator can see
//! afterwards why a step took as long as it did and which provider answered it.

use rusqlite::params;

use super::{ProviderAttempt, Result, Store, ensure_run, get_opt_u64, get_u64, now_ms, sql_u64};

impl Store {
    /// Records one failed attempt. Fails with [`super::StoreError::NoSuchRun`] for an
    /// unknown run.
    pub fn record_provider_attempt(&self, a: &ProviderAttempt) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, a.run_id)?;
        tx.execute(
            "INSERT INTO provider_attempts (run_id, step, provider, attempt, kind, status, delay_ms, next, at_ms, code, request_bytes)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                a.run_id,
                a.step,
                red.text(&a.provider),
                a.attempt,
                red.text(&a.kind),
                a.status,
                sql_u64(a.delay_ms),
                red.text(&a.next),
                now_ms(),
                red.opt(a.code.as_deref()),
                a.request_bytes.map(sql_u64),
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Failed attempts of a run, oldest first.
    pub fn provider_attempts(&self, run_id: i64) -> Result<Vec<ProviderAttempt>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT run_id, step, provider, attempt, kind, status, delay_ms, next, code, request_bytes
             FROM provider_attempts WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(ProviderAttempt {
                run_id: r.get(0)?,
                step: r.get(1)?,
                provider: r.get(2)?,
                attempt: r.get(3)?,
                kind: r.get(4)?,
                status: r.get(5)?,
                delay_ms: get_u64(r, 6)?,
                next: r.get(7)?,
                code: r.get(8)?,
                request_bytes: get_opt_u64(r, 9)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
