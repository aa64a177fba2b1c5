//! Approval requests: asks deferred to a human, answered later by `io-harness approve`.

use rusqlite::{OptionalExtension, params};

use super::{ApprovalRecord, Result, Store, StoreError, ensure_run, now_ms};

const COLUMNS: &str = "run_id, request_id, step, call_id, tool, input_json, action_json, reply_json, status, reason, remember";

fn record(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApprovalRecord> {
    Ok(ApprovalRecord {
        run_id: r.get(0)?,
        request_id: r.get(1)?,
        step: r.get(2)?,
        call_id: r.get(3)?,
        tool: r.get(4)?,
        input_json: r.get(5)?,
        action_json: r.get(6)?,
        reply_json: r.get(7)?,
        status: r.get(8)?,
        reason: r.get(9)?,
        remember: crate::contract::policy::Remember::from_i64(r.get(10)?),
    })
}

impl Store {
    /// Records a pending request. Fails with [`StoreError::NoSuchRun`] for an unknown
    /// run.
    pub fn record_approval_request(&self, a: &ApprovalRecord) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, a.run_id)?;
        tx.execute(
            &format!("INSERT INTO approvals ({COLUMNS}, created_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', NULL, 0, ?9)"),
            params![
                a.run_id,
                red.text(&a.request_id),
                a.step,
                red.text(&a.call_id),
                red.text(&a.tool),
                red.text(&a.input_json),
                red.text(&a.action_json),
                red.text(&a.reply_json),
                now_ms(),
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Answers a pending request. Fails with [`StoreError::NoSuchApproval`] when the run
    /// has no pending request of that id.
    pub fn decide_approval(
        &self,
        run_id: i64,
        request_id: &str,
        allow: bool,
        reason: Option<&str>,
        remember: crate::contract::policy::Remember,
    ) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        let changed = tx.execute(
            "UPDATE approvals SET status = ?3, reason = ?4, remember = ?5, decided_at_ms = ?6
             WHERE run_id = ?1 AND request_id = ?2 AND status = 'pending'",
            params![
                run_id,
                request_id,
                if allow { "allowed" } else { "denied" },
                red.opt(reason),
                remember.as_i64(),
                now_ms(),
            ],
        )?;
        if changed == 0 {
            return Err(StoreError::NoSuchApproval {
                run_id,
                request_id: request_id.to_string(),
            });
        }
        tx.commit()?;
        Ok(())
    }

    /// Approval requests of a run, oldest first.
    pub fn approvals(&self, run_id: i64) -> Result<Vec<ApprovalRecord>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM approvals WHERE run_id = ?1 ORDER BY id"
        ))?;
        let rows = stmt.query_map([run_id], record)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Where in the tree of `run_id` a request lives: `run_id` itself, or the sub-agent
    /// (at any depth) that asked. A child's ask ends its whole tree `AwaitingApproval`
    /// with the child's request id, and the operator only knows the run they started.
    pub fn approval_in_tree(&self, run_id: i64, request_id: &str) -> Result<Option<i64>> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                "WITH RECURSIVE tree(id) AS (
                     SELECT ?1
                     UNION ALL
                     SELECT runs.id FROM runs JOIN tree ON runs.parent_run_id = tree.id
                 )
                 SELECT approvals.run_id FROM approvals JOIN tree ON approvals.run_id = tree.id
                 WHERE approvals.request_id = ?2
                 ORDER BY approvals.run_id = ?1 DESC, approvals.run_id
                 LIMIT 1",
                params![run_id, request_id],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// The root of the tree `run_id` belongs to (itself for a root run).
    pub fn root_run(&self, run_id: i64) -> Result<i64> {
        let conn = self.conn();
        let root = conn
            .query_row(
                "WITH RECURSIVE up(id, parent) AS (
                     SELECT id, parent_run_id FROM runs WHERE id = ?1
                     UNION ALL
                     SELECT runs.id, runs.parent_run_id FROM runs JOIN up ON runs.id = up.parent
                 )
                 SELECT id FROM up WHERE parent IS NULL",
                [run_id],
                |r| r.get(0),
            )
            .optional()?;
        root.ok_or(StoreError::NoSuchRun(run_id))
    }

    /// One request.
    pub fn approval(&self, run_id: i64, request_id: &str) -> Result<Option<ApprovalRecord>> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                &format!("SELECT {COLUMNS} FROM approvals WHERE run_id = ?1 AND request_id = ?2"),
                params![run_id, request_id],
                record,
            )
            .optional()?)
    }
}
