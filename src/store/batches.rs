//! Batches (issue 21): many task runs started together under one id. A batch keeps
//! each task's resolved contract from the moment every task file was validated, so
//! `batch --resume` can start a task that never ran exactly as it would have started,
//! and each task's run once it has one. A run belongs to at most one batch task.
//!
//! The batch is data of the store like any run: the CLI reads and writes it only
//! through these methods, so another store backend carries batches by implementing
//! them.

use rusqlite::{OptionalExtension, params};

use super::{Result, Store, ensure_run, now_ms};

/// A task of a new batch, as validated before anything ran.
#[derive(Debug, Clone, PartialEq)]
pub struct NewBatchTask {
    /// Where the task came from: its file (`dir/a.toml`) or a JSONL list's line
    /// (`tasks.jsonl:3`).
    pub source: String,
    /// The resolved contract, JSON.
    pub contract_json: String,
    /// The resolved settings with their sources, JSON (stored with the run when it
    /// starts).
    pub settings_json: String,
}

/// A stored batch with its tasks in order.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct BatchRecord {
    /// Batch id.
    pub id: i64,
    /// When it was made (ms since the epoch).
    pub created_at_ms: i64,
    /// When its last session ended, if one did.
    pub finished_at_ms: Option<i64>,
    /// Tasks run at once.
    pub jobs: u32,
    /// The batch's total cost budget, if it has one.
    pub max_cost_usd: Option<f64>,
    /// `running`, `cancelled` or `finished` (every task ended or was refused).
    pub status: String,
    /// Its tasks, by position.
    pub tasks: Vec<BatchTask>,
}

/// One task of a batch.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct BatchTask {
    /// 1-based place in the batch.
    pub position: u32,
    /// Where it came from.
    pub source: String,
    /// Its resolved contract, JSON.
    #[serde(skip)]
    pub contract_json: String,
    /// Its resolved settings, JSON.
    #[serde(skip)]
    pub settings_json: String,
    /// Its run, once it started.
    pub run_id: Option<i64>,
    /// Why it was refused when it was to start (nothing ran; exit 2), if it was.
    pub refused: Option<String>,
}

impl Store {
    /// Records a new batch and its tasks; returns its id.
    pub fn create_batch(
        &self,
        jobs: u32,
        max_cost_usd: Option<f64>,
        tasks: &[NewBatchTask],
    ) -> Result<i64> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        tx.execute(
            "INSERT INTO batches (created_at_ms, jobs, max_cost_usd, status)
             VALUES (?1, ?2, ?3, 'running')",
            params![now_ms(), jobs, max_cost_usd],
        )?;
        let id = tx.last_insert_rowid();
        for (i, t) in tasks.iter().enumerate() {
            tx.execute(
                "INSERT INTO batch_tasks (batch_id, position, source, contract_json, settings_json)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    id,
                    i64::try_from(i + 1).unwrap_or(i64::MAX),
                    red.text(&t.source),
                    red.text(&t.contract_json),
                    red.text(&t.settings_json),
                ],
            )?;
        }
        tx.commit()?;
        Ok(id)
    }

    /// Links task `position` of `batch_id` to the run it started.
    pub fn link_batch_run(&self, batch_id: i64, position: u32, run_id: i64) -> Result<()> {
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, run_id)?;
        tx.execute(
            "UPDATE batch_tasks SET run_id = ?3, refused = NULL
             WHERE batch_id = ?1 AND position = ?2",
            params![batch_id, position, run_id],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Records that task `position` was refused when it was to start (nothing ran).
    pub fn refuse_batch_task(&self, batch_id: i64, position: u32, why: &str) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        tx.execute(
            "UPDATE batch_tasks SET refused = ?3 WHERE batch_id = ?1 AND position = ?2",
            params![batch_id, position, red.text(why)],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Sets a batch's status (`running`, `cancelled`, `finished`) at the start or end
    /// of one of its sessions.
    pub fn set_batch_status(&self, batch_id: i64, status: &str) -> Result<()> {
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        let finished = (status != "running").then(now_ms);
        tx.execute(
            "UPDATE batches SET status = ?2, finished_at_ms = ?3 WHERE id = ?1",
            params![batch_id, status, finished],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// A batch with its tasks, or `None`.
    pub fn batch(&self, batch_id: i64) -> Result<Option<BatchRecord>> {
        let conn = self.conn();
        let head = conn
            .query_row(
                "SELECT id, created_at_ms, finished_at_ms, jobs, max_cost_usd, status
                 FROM batches WHERE id = ?1",
                params![batch_id],
                |r| {
                    Ok(BatchRecord {
                        id: r.get(0)?,
                        created_at_ms: r.get(1)?,
                        finished_at_ms: r.get(2)?,
                        jobs: r.get(3)?,
                        max_cost_usd: r.get(4)?,
                        status: r.get(5)?,
                        tasks: Vec::new(),
                    })
                },
            )
            .optional()?;
        let Some(mut batch) = head else {
            return Ok(None);
        };
        let mut stmt = conn.prepare(
            "SELECT position, source, contract_json, settings_json, run_id, refused
             FROM batch_tasks WHERE batch_id = ?1 ORDER BY position",
        )?;
        let rows = stmt.query_map(params![batch_id], |r| {
            Ok(BatchTask {
                position: r.get(0)?,
                source: r.get(1)?,
                contract_json: r.get(2)?,
                settings_json: r.get(3)?,
                run_id: r.get(4)?,
                refused: r.get(5)?,
            })
        })?;
        batch.tasks = rows.collect::<rusqlite::Result<_>>()?;
        Ok(Some(batch))
    }

    /// The batch a run belongs to, with its task's position and source.
    pub fn batch_of_run(&self, run_id: i64) -> Result<Option<(i64, u32, String)>> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                "SELECT batch_id, position, source FROM batch_tasks WHERE run_id = ?1",
                params![run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(source: &str) -> NewBatchTask {
        NewBatchTask {
            source: source.into(),
            contract_json: "{}".into(),
            settings_json: "[]".into(),
        }
    }

    #[test]
    fn a_batch_keeps_its_tasks_in_order_and_links_runs() {
        let store = Store::memory().unwrap();
        let id = store
            .create_batch(4, Some(1.5), &[task("a.toml"), task("b.toml")])
            .unwrap();
        let run = store.start_run("g", "/r").unwrap();
        store.link_batch_run(id, 2, run).unwrap();
        store.refuse_batch_task(id, 1, "workspace busy").unwrap();
        store.set_batch_status(id, "cancelled").unwrap();
        let b = store.batch(id).unwrap().unwrap();
        assert_eq!(
            (b.jobs, b.max_cost_usd, b.status.as_str()),
            (4, Some(1.5), "cancelled")
        );
        assert!(b.finished_at_ms.is_some());
        let sources: Vec<_> = b.tasks.iter().map(|t| t.source.as_str()).collect();
        assert_eq!(sources, ["a.toml", "b.toml"]);
        assert_eq!(b.tasks[1].run_id, Some(run));
        assert_eq!(b.tasks[0].refused.as_deref(), Some("workspace busy"));
        assert_eq!(
            store.batch_of_run(run).unwrap(),
            Some((id, 2, "b.toml".into()))
        );
        assert_eq!(store.batch(id + 1).unwrap(), None);
        assert!(
            store.link_batch_run(id, 1, run + 99).is_err(),
            "no such run"
        );
    }
}
