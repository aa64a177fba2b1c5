//! Runs: creation, the end of a run, and reading runs back with totals computed from
//! their committed steps (never stored twice, so they cannot disagree).

use rusqlite::{OptionalExtension, Row, params};

use super::{
    NewRun, Result, RunFinish, RunRecord, Store, StoreError, get_opt_u64, get_u64, now_ms,
};

/// A run with its step totals. Every step counts once; `SUM(cost_usd)` skips unknown
/// costs and is NULL when none is known, which is exactly `RunRecord::cost_usd`. Model
/// calls whose reply was lost add their estimated input and its estimated cost, as
/// the run's result counted them; the tokens of estimated steps and of lost calls are
/// the record's estimated part.
const RUN_SELECT: &str = "
SELECT r.id, r.goal, r.root, r.work_dir, r.status, r.outcome, r.outcome_json,
       r.contract_json, r.provider_json, r.parent_run_id, r.started_at_ms,
       r.finished_at_ms, r.final_message, r.diff,
       COUNT(s.id),
       COALESCE(SUM(s.input_tokens), 0) + (SELECT COALESCE(SUM(m.estimated_input_tokens), 0)
           FROM model_calls m WHERE m.run_id = r.id AND m.status = 'lost'),
       COALESCE(SUM(s.output_tokens), 0),
       COALESCE(SUM(s.cached_input_tokens), 0),
       CASE WHEN SUM(s.cost_usd) IS NULL AND (SELECT SUM(m.estimated_cost_usd) FROM model_calls m
                 WHERE m.run_id = r.id AND m.status = 'lost') IS NULL THEN NULL
            ELSE COALESCE(SUM(s.cost_usd), 0) + COALESCE((SELECT SUM(m.estimated_cost_usd)
                 FROM model_calls m WHERE m.run_id = r.id AND m.status = 'lost'), 0) END,
       COALESCE(SUM(s.id IS NOT NULL AND s.cost_usd IS NULL), 0),
       r.scratch_dir, r.policy_json, r.initial_json, r.audit_failures, r.elapsed_ms,
       (SELECT COUNT(*) FROM model_calls m WHERE m.run_id = r.id AND m.status = 'lost'),
       COALESCE(SUM(CASE WHEN s.token_source = 'estimated'
                         THEN s.input_tokens + s.output_tokens ELSE 0 END), 0)
         + (SELECT COALESCE(SUM(m.estimated_input_tokens), 0)
            FROM model_calls m WHERE m.run_id = r.id AND m.status = 'lost')
FROM runs r LEFT JOIN steps s ON s.run_id = r.id";

impl Store {
    /// Starts a bare run (seed API): goal and root only, no contract or provider.
    pub fn start_run(&self, goal: &str, root: &str) -> Result<i64> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        tx.execute(
            "INSERT INTO runs (goal, root, status, started_at_ms) VALUES (?1, ?2, 'running', ?3)",
            params![red.text(goal), red.text(root), now_ms()],
        )?;
        let id = tx.last_insert_rowid();
        tx.commit()?;
        Ok(id)
    }

    /// Starts a run with its resolved contract and provider identity, so it can be
    /// resumed from the store alone.
    ///
    /// Fails with [`StoreError::NoSuchRun`] if `parent_run_id` names no run.
    pub fn create_run(&self, run: &NewRun) -> Result<i64> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        if let Some(parent) = run.parent_run_id {
            super::ensure_run(&tx, parent)?;
        }
        tx.execute(
            "INSERT INTO runs (goal, root, work_dir, status, contract_json, provider_json,
                               parent_run_id, started_at_ms, scratch_dir)
             VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, ?8)",
            params![
                red.text(&run.goal),
                red.text(&run.root),
                red.text(&run.work_dir),
                red.text(&run.contract_json),
                red.text(&run.provider_json),
                run.parent_run_id,
                now_ms(),
                run.scratch_dir.as_deref().map(|d| red.text(d)),
            ],
        )?;
        let id = tx.last_insert_rowid();
        tx.commit()?;
        Ok(id)
    }

    /// Stores the policy layers a run is under (again whenever they change, as when an
    /// approval is remembered). Fails with [`StoreError::NoSuchRun`] for an unknown run.
    pub fn set_run_policy(&self, run_id: i64, policy_json: &str) -> Result<()> {
        self.set_run_text(
            run_id,
            "UPDATE runs SET policy_json = ?2 WHERE id = ?1",
            policy_json,
        )
    }

    /// Stores the run's first messages as sent. Fails with [`StoreError::NoSuchRun`] for
    /// an unknown run.
    pub fn set_run_initial(&self, run_id: i64, initial_json: &str) -> Result<()> {
        self.set_run_text(
            run_id,
            "UPDATE runs SET initial_json = ?2 WHERE id = ?1",
            initial_json,
        )
    }

    /// Runs `update` (which sets one text column of run `?1` to `?2`) with the text
    /// redacted; an unknown run is [`StoreError::NoSuchRun`].
    fn set_run_text(&self, run_id: i64, update: &'static str, text: &str) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        let changed = tx.execute(update, params![run_id, red.text(text)])?;
        if changed == 0 {
            return Err(StoreError::NoSuchRun(run_id));
        }
        tx.commit()?;
        Ok(())
    }

    /// Counts one failed append to the audit log for the run (SPEC C18: the log never
    /// fails a run, but the record says it missed something).
    pub fn count_audit_failure(&self, run_id: i64) -> Result<()> {
        self.update_run(
            run_id,
            "UPDATE runs SET audit_failures = audit_failures + 1 WHERE id = ?1",
            params![run_id],
        )
    }

    /// Runs one `UPDATE` of the run's row (`?1` is its id) in its own transaction;
    /// [`StoreError::NoSuchRun`] when no row changed.
    fn update_run(&self, run_id: i64, sql: &str, args: impl rusqlite::Params) -> Result<()> {
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        if tx.execute(sql, args)? == 0 {
            return Err(StoreError::NoSuchRun(run_id));
        }
        tx.commit()?;
        Ok(())
    }

    /// Keeps the run's wall time as last known (at least what it was): written while a
    /// session runs, so a session killed between two commits hands its time on.
    pub fn set_run_elapsed(&self, run_id: i64, elapsed_ms: u64) -> Result<()> {
        let ms = i64::try_from(elapsed_ms).unwrap_or(i64::MAX);
        self.update_run(
            run_id,
            "UPDATE runs SET elapsed_ms = MAX(COALESCE(elapsed_ms, 0), ?2) WHERE id = ?1",
            params![run_id, ms],
        )
    }

    /// One run, or `None` if there is no such id.
    pub fn run(&self, run_id: i64) -> Result<Option<RunRecord>> {
        let conn = self.conn();
        let sql = format!("{RUN_SELECT} WHERE r.id = ?1 GROUP BY r.id");
        Ok(conn.query_row(&sql, [run_id], run_record).optional()?)
    }

    /// All runs, newest first (ids grow with creation order).
    pub fn runs(&self) -> Result<Vec<RunRecord>> {
        let conn = self.conn();
        let sql = format!("{RUN_SELECT} GROUP BY r.id ORDER BY r.id DESC");
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map([], run_record)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Marks a run finished with its outcome, final message and diff. Fails with
    /// [`StoreError::RecordsLost`], writing nothing, when a record write of the run was
    /// lost: an outcome is not put over a gap in the record (the run stays `running`,
    /// shown `interrupted` once its process ends, and resumable).
    pub fn finish_run(&self, run_id: i64, fin: &RunFinish) -> Result<()> {
        self.ensure_nothing_lost(run_id)?;
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        let changed = tx.execute(
            "UPDATE runs SET status = 'finished', outcome = ?2, outcome_json = ?3,
                             final_message = ?4, diff = ?5, finished_at_ms = ?6
             WHERE id = ?1",
            params![
                run_id,
                red.text(&fin.outcome),
                red.text(&fin.outcome_json),
                red.opt(fin.final_message.as_deref()),
                red.opt(fin.diff.as_deref()),
                now_ms(),
            ],
        )?;
        if changed == 0 {
            return Err(StoreError::NoSuchRun(run_id));
        }
        tx.commit()?;
        Ok(())
    }

    /// Marks a finished-but-resumable run (awaiting approval, out of budget…) running
    /// again: clears everything [`Store::finish_run`] set, keeps its steps. Idempotent.
    ///
    /// Forgets the writes of the run this handle lost: the session that reopens it
    /// replays the uncommitted step they belonged to.
    pub fn reopen_run(&self, run_id: i64) -> Result<()> {
        self.forget_lost(run_id);
        self.update_run(
            run_id,
            "UPDATE runs SET status = 'running', outcome = NULL, outcome_json = NULL,
                             final_message = NULL, diff = NULL, finished_at_ms = NULL
             WHERE id = ?1",
            params![run_id],
        )
    }
}

/// Maps a [`RUN_SELECT`] row.
fn run_record(r: &Row<'_>) -> rusqlite::Result<RunRecord> {
    Ok(RunRecord {
        id: r.get(0)?,
        goal: r.get(1)?,
        root: r.get(2)?,
        work_dir: r.get(3)?,
        status: r.get(4)?,
        outcome: r.get(5)?,
        outcome_json: r.get(6)?,
        contract_json: r.get(7)?,
        provider_json: r.get(8)?,
        parent_run_id: r.get(9)?,
        scratch_dir: r.get(20)?,
        policy_json: r.get(21)?,
        initial_json: r.get(22)?,
        started_at_ms: r.get(10)?,
        finished_at_ms: r.get(11)?,
        final_message: r.get(12)?,
        diff: r.get(13)?,
        steps: r.get(14)?,
        input_tokens: get_u64(r, 15)?,
        output_tokens: get_u64(r, 16)?,
        cached_input_tokens: get_u64(r, 17)?,
        cost_usd: r.get(18)?,
        cost_unknown_steps: r.get(19)?,
        audit_failures: get_u64(r, 23)?,
        elapsed_ms: get_opt_u64(r, 24)?,
        lost_calls: get_u64(r, 25)?,
        estimated_tokens: get_u64(r, 26)?,
    })
}

/// Where a sub-agent's run hangs in its tree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AgentLink {
    /// The run that spawned it.
    pub parent_run_id: i64,
    /// 1 for a child of a root run, 2 for a grandchild…
    pub depth: u32,
    /// The parent's step that spawned it.
    pub step: u32,
    /// The parent's tool call that spawned it.
    pub call_id: String,
    /// The name the parent gave it.
    pub name: String,
}

/// A sub-agent's run with its place in the tree.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChildRun {
    /// How it hangs in the tree.
    pub link: AgentLink,
    /// The run itself (its own totals, without its own children's).
    pub run: RunRecord,
}

impl Store {
    /// Starts a sub-agent's run, linked to its parent's step and call in the same
    /// transaction: a parent resumed after a kill finds the child by that call
    /// ([`Store::child_for_call`]) and never starts a second one.
    ///
    /// Fails with [`StoreError::NoSuchRun`] if the parent does not exist, and with a
    /// constraint error if that call already has a child.
    pub fn create_child_run(&self, run: &NewRun, link: &AgentLink) -> Result<i64> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        super::ensure_run(&tx, link.parent_run_id)?;
        tx.execute(
            "INSERT INTO runs (goal, root, work_dir, status, contract_json, provider_json,
                               parent_run_id, started_at_ms, scratch_dir, depth, agent_name,
                               spawn_step, spawn_call_id)
             VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![
                red.text(&run.goal),
                red.text(&run.root),
                red.text(&run.work_dir),
                red.text(&run.contract_json),
                red.text(&run.provider_json),
                link.parent_run_id,
                now_ms(),
                run.scratch_dir.as_deref().map(|d| red.text(d)),
                link.depth,
                red.text(&link.name),
                link.step,
                link.call_id,
            ],
        )?;
        let id = tx.last_insert_rowid();
        tx.commit()?;
        Ok(id)
    }

    /// The link of a run to its parent; `None` for a root run (or no such run).
    pub fn agent_link(&self, run_id: i64) -> Result<Option<AgentLink>> {
        let conn = self.conn();
        let row = conn
            .query_row(
                "SELECT parent_run_id, depth, spawn_step, spawn_call_id, agent_name
                 FROM runs WHERE id = ?1",
                [run_id],
                link_row,
            )
            .optional()?;
        Ok(row.flatten())
    }

    /// The sub-agents a run spawned, in spawn order.
    pub fn children(&self, run_id: i64) -> Result<Vec<ChildRun>> {
        let links: Vec<(i64, AgentLink)> = {
            let conn = self.conn();
            let mut stmt = conn.prepare(
                "SELECT parent_run_id, depth, spawn_step, spawn_call_id, agent_name, id
                 FROM runs WHERE parent_run_id = ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map([run_id], |r| Ok((r.get::<_, i64>(5)?, link_row(r)?)))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()?
                .into_iter()
                .filter_map(|(id, l)| l.map(|l| (id, l)))
                .collect()
        };
        let mut out = Vec::with_capacity(links.len());
        for (id, link) in links {
            if let Some(run) = self.run(id)? {
                out.push(ChildRun { link, run });
            }
        }
        Ok(out)
    }

    /// The sub-agent a parent's tool call spawned, if it did.
    pub fn child_for_call(
        &self,
        run_id: i64,
        step: u32,
        call_id: &str,
    ) -> Result<Option<ChildRun>> {
        let id: Option<i64> = {
            let conn = self.conn();
            conn.query_row(
                "SELECT id FROM runs WHERE parent_run_id = ?1 AND spawn_step = ?2 AND spawn_call_id = ?3",
                params![run_id, step, call_id],
                |r| r.get(0),
            )
            .optional()?
        };
        match id {
            Some(id) => Ok(self
                .agent_link(id)?
                .zip(self.run(id)?)
                .map(|(link, run)| ChildRun { link, run })),
            None => Ok(None),
        }
    }

    /// Keeps the parent's model reply of a step that spawns sub-agents, before the first
    /// child starts: a resume replays that reply, so the calls are the same and their
    /// children are adopted. A second record for the same step is ignored.
    pub fn record_spawn_reply(&self, run_id: i64, step: u32, reply_json: &str) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        super::ensure_run(&tx, run_id)?;
        tx.execute(
            "INSERT OR IGNORE INTO agent_spawns (run_id, step, reply_json, created_at_ms)
             VALUES (?1, ?2, ?3, ?4)",
            params![run_id, step, red.text(reply_json), now_ms()],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The reply recorded by [`Store::record_spawn_reply`] for a step.
    pub fn spawn_reply(&self, run_id: i64, step: u32) -> Result<Option<String>> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                "SELECT reply_json FROM agent_spawns WHERE run_id = ?1 AND step = ?2",
                params![run_id, step],
                |r| r.get(0),
            )
            .optional()?)
    }
}

/// A link from `parent_run_id, depth, spawn_step, spawn_call_id, agent_name`; `None`
/// for a root run.
fn link_row(r: &Row<'_>) -> rusqlite::Result<Option<AgentLink>> {
    let parent: Option<i64> = r.get(0)?;
    let step: Option<u32> = r.get(2)?;
    let call: Option<String> = r.get(3)?;
    Ok(match (parent, step, call) {
        (Some(parent_run_id), Some(step), Some(call_id)) => Some(AgentLink {
            parent_run_id,
            depth: r.get(1)?,
            step,
            call_id,
            name: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
        }),
        _ => None,
    })
}
