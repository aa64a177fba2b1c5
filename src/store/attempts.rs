//! Failed provider attempts: every retry and every fallback, so an operator can see
//! afterwards why a step took as long as it did and which provider answered it.
//!
//! And model calls as the token budget sees them (`model_calls`): each written before
//! its request goes out and closed when its reply's usage is committed, so a call whose
//! reply was lost — a broken stream, a cancel, a kill in flight — still counts its
//! request's estimated input, in this session and in a resumed one.

use rusqlite::params;

use super::{
    LostCall, ModelCallRecord, ProviderAttempt, Result, Store, ensure_run, get_opt_u64, get_u64,
    now_ms, sql_u64,
};

impl Store {
    /// Records one failed attempt. Fails with [`super::StoreError::NoSuchRun`] for an
    /// unknown run.
    pub fn record_provider_attempt(&self, a: &ProviderAttempt) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, a.run_id)?;
        tx.execute(
            "INSERT INTO provider_attempts (run_id, step, provider, attempt, kind, status, delay_ms, next, at_ms, code, request_bytes,
                                            estimated_input_tokens, reply_lost, message)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
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
                a.estimated_input_tokens.map(sql_u64),
                a.reply_lost,
                red.opt(a.message.as_deref()),
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Failed attempts of a run, oldest first.
    pub fn provider_attempts(&self, run_id: i64) -> Result<Vec<ProviderAttempt>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT run_id, step, provider, attempt, kind, status, delay_ms, next, code, request_bytes,
                    estimated_input_tokens, reply_lost, message, at_ms
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
                estimated_input_tokens: get_opt_u64(r, 10)?,
                reply_lost: r.get(11)?,
                message: r.get(12)?,
                at_ms: r.get::<_, Option<i64>>(13)?.unwrap_or(0),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Records a model call about to be sent (status `sent`) and returns its id. Fails
    /// with [`super::StoreError::NoSuchRun`] for an unknown run.
    pub fn record_model_call(
        &self,
        run_id: i64,
        step: u32,
        provider: &str,
        estimated_input_tokens: u64,
        estimated_cost_usd: Option<f64>,
        status: &str,
    ) -> Result<i64> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, run_id)?;
        tx.execute(
            "INSERT INTO model_calls (run_id, step, provider, estimated_input_tokens,
                                      estimated_cost_usd, status, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                run_id,
                step,
                red.text(provider),
                sql_u64(estimated_input_tokens),
                estimated_cost_usd,
                status,
                now_ms(),
            ],
        )?;
        let id = tx.last_insert_rowid();
        tx.commit()?;
        Ok(id)
    }

    /// Sets the status of model call `id` (`failed`, `lost`).
    pub fn set_model_call_status(&self, id: i64, status: &str) -> Result<()> {
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        tx.execute(
            "UPDATE model_calls SET status = ?2 WHERE id = ?1",
            params![id, status],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Marks the calls of run `run_id` still `sent` as `lost`: called by a session
    /// resuming the run (holding its lock), they were cut off with the session before
    /// it. `except` is the call whose reply the resumed step replays, which its commit
    /// closes. Returns how many were marked.
    pub fn mark_cut_off_calls(&self, run_id: i64, except: Option<i64>) -> Result<usize> {
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        let n = tx.execute(
            "UPDATE model_calls SET status = 'lost'
             WHERE run_id = ?1 AND status = 'sent' AND id IS NOT ?2",
            params![run_id, except],
        )?;
        tx.commit()?;
        Ok(n)
    }

    /// The model calls of a run, oldest first.
    pub fn model_calls(&self, run_id: i64) -> Result<Vec<ModelCallRecord>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, run_id, step, provider, estimated_input_tokens, estimated_cost_usd, status
             FROM model_calls WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(ModelCallRecord {
                id: r.get(0)?,
                run_id: r.get(1)?,
                step: r.get(2)?,
                provider: r.get(3)?,
                estimated_input_tokens: get_u64(r, 4)?,
                estimated_cost_usd: r.get(5)?,
                status: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The calls of a run whose reply was lost, as the totals count them.
    pub fn lost_calls(&self, run_id: i64) -> Result<Vec<LostCall>> {
        Ok(self
            .model_calls(run_id)?
            .into_iter()
            .filter(|c| c.status == "lost")
            .map(|c| LostCall {
                input_tokens: c.estimated_input_tokens,
                cost_usd: c.estimated_cost_usd,
            })
            .collect())
    }
}
