//! The sandbox and policy event logs: append-only, one row per event, read back in the
//! order they happened. New kinds of event are new `kind` values, never new tables.

use rusqlite::{Connection, params};

use super::{PolicyEvent, Result, SandboxEvent, Store, ensure_run, now_ms};
use crate::redact::Redactor;

impl Store {
    /// Records a sandbox event. Fails with [`super::StoreError::NoSuchRun`] for an
    /// unknown run.
    pub fn record_sandbox_event(&self, e: &SandboxEvent) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, e.run_id)?;
        tx.execute(
            "INSERT INTO sandbox_events (run_id, step, kind, backend, detail, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                e.run_id,
                e.step,
                red.text(&e.kind),
                red.opt(e.backend.as_deref()),
                red.opt(e.detail.as_deref()),
                now_ms(),
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Sandbox events of a run, oldest first.
    pub fn sandbox_events(&self, run_id: i64) -> Result<Vec<SandboxEvent>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT run_id, step, kind, backend, detail FROM sandbox_events
             WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(SandboxEvent {
                run_id: r.get(0)?,
                step: r.get(1)?,
                kind: r.get(2)?,
                backend: r.get(3)?,
                detail: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Records a policy event outside a step commit (a decision whose step never
    /// commits, such as one that ends the run awaiting approval). Fails with
    /// [`super::StoreError::NoSuchRun`] for an unknown run.
    pub fn record_policy_event(&self, e: &PolicyEvent) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, e.run_id)?;
        insert_policy_event(&tx, &red, e, now_ms())?;
        tx.commit()?;
        Ok(())
    }

    /// Policy events of a run, oldest first.
    pub fn policy_events(&self, run_id: i64) -> Result<Vec<PolicyEvent>> {
        policy_events_of(&self.conn(), run_id, None)
    }
}

/// Inserts one policy event inside the caller's transaction.
pub(crate) fn insert_policy_event(
    tx: &Connection,
    red: &Redactor,
    e: &PolicyEvent,
    at_ms: i64,
) -> Result<()> {
    tx.execute(
        "INSERT INTO policy_events (run_id, step, act, target, decision, rule, layer, at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            e.run_id,
            e.step,
            red.text(&e.act),
            red.text(&e.target),
            red.text(&e.decision),
            red.text(&e.rule),
            red.text(&e.layer),
            at_ms,
        ],
    )?;
    Ok(())
}

/// Policy events of a run, or of one of its steps, oldest first.
pub(crate) fn policy_events_of(
    conn: &Connection,
    run_id: i64,
    step: Option<u32>,
) -> Result<Vec<PolicyEvent>> {
    let mut stmt = conn.prepare_cached(
        "SELECT run_id, step, act, target, decision, rule, layer FROM policy_events
         WHERE run_id = ?1 AND (?2 IS NULL OR step = ?2) ORDER BY id",
    )?;
    let rows = stmt.query_map(params![run_id, step], |r| {
        Ok(PolicyEvent {
            run_id: r.get(0)?,
            step: r.get(1)?,
            act: r.get(2)?,
            target: r.get(3)?,
            decision: r.get(4)?,
            rule: r.get(5)?,
            layer: r.get(6)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
