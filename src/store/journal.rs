//! The tool intent journal: each tool call is written down *before* it runs and
//! completed after, with the file effects it had. A run killed between the two leaves a
//! `pending` row, which tells resume exactly which call may have half-happened and what
//! it was about to touch.

use rusqlite::params;

use super::{Result, Store, StoreError, ToolIntent, ToolIntentRecord, ensure_run, now_ms};

impl Store {
    /// Journals an intent as `pending`; returns its id for [`Store::journal_complete`].
    pub fn journal_intent(&self, intent: &ToolIntent) -> Result<i64> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, intent.run_id)?;
        let now = now_ms();
        tx.execute(
            "INSERT INTO tool_intents (run_id, step, call_id, tool, input_json, actions_json,
                                       status, created_at_ms, updated_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?7)",
            params![
                intent.run_id,
                intent.step,
                red.text(&intent.call_id),
                red.text(&intent.tool),
                red.text(&intent.input_json),
                red.text(&intent.actions_json),
                now,
            ],
        )?;
        let id = tx.last_insert_rowid();
        tx.commit()?;
        Ok(id)
    }

    /// Completes an intent: `done` when `ok`, else `failed`, with its file effects and
    /// the result the model is given (so a resume answers the call from the record
    /// instead of running it again). Fails with [`StoreError::NoSuchIntent`] for an
    /// unknown id.
    pub fn journal_complete(
        &self,
        id: i64,
        ok: bool,
        effects_json: &str,
        output: &str,
    ) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        let status = if ok { "done" } else { "failed" };
        let changed = tx.execute(
            "UPDATE tool_intents SET status = ?2, effects_json = ?3, output = ?4,
                                     updated_at_ms = ?5
             WHERE id = ?1",
            params![
                id,
                status,
                red.text(effects_json),
                red.text(output),
                now_ms()
            ],
        )?;
        if changed == 0 {
            return Err(StoreError::NoSuchIntent(id));
        }
        tx.commit()?;
        Ok(())
    }

    /// Marks a pending intent `uncertain`: its call was interrupted and its effects
    /// cannot be known (a command). Fails with [`StoreError::NoSuchIntent`] for an
    /// unknown id.
    pub fn journal_uncertain(&self, id: i64) -> Result<()> {
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        let changed = tx.execute(
            "UPDATE tool_intents SET status = 'uncertain', updated_at_ms = ?2
             WHERE id = ?1 AND status = 'pending'",
            params![id, now_ms()],
        )?;
        if changed == 0 {
            return Err(StoreError::NoSuchIntent(id));
        }
        tx.commit()?;
        Ok(())
    }

    /// Removes a `pending` intent whose call did not run after all (the policy asked
    /// and nobody had answered yet): a resume must not take it for a call that ran.
    pub fn journal_discard(&self, id: i64) -> Result<()> {
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        let changed = tx.execute(
            "DELETE FROM tool_intents WHERE id = ?1 AND status = 'pending'",
            params![id],
        )?;
        if changed == 0 {
            return Err(StoreError::NoSuchIntent(id));
        }
        tx.commit()?;
        Ok(())
    }

    /// The run a journal row belongs to (for naming the run whose write was lost).
    pub(super) fn intent_run(&self, id: i64) -> Option<i64> {
        use rusqlite::OptionalExtension;
        let conn = self.conn();
        conn.query_row("SELECT run_id FROM tool_intents WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()
        .ok()
        .flatten()
    }

    /// The journal of a run, in the order the intents were written.
    pub fn journal(&self, run_id: i64) -> Result<Vec<ToolIntentRecord>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, run_id, step, call_id, tool, input_json, actions_json, status,
                    effects_json, output
             FROM tool_intents WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(ToolIntentRecord {
                id: r.get(0)?,
                intent: ToolIntent {
                    run_id: r.get(1)?,
                    step: r.get(2)?,
                    call_id: r.get(3)?,
                    tool: r.get(4)?,
                    input_json: r.get(5)?,
                    actions_json: r.get(6)?,
                },
                status: r.get(7)?,
                effects_json: r.get(8)?,
                output: r.get(9)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
