//! Steps: the atomic unit of a run's record and of its resume.
//!
//! A step row, its tool calls, its policy decisions and its request body are written in
//! one transaction. A reader — or a resumed run — therefore sees a step whole or not at
//! all, and a step is never written twice: resume continues after the last committed
//! step and cannot re-apply it.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::events::{insert_policy_event, policy_events_of};
use super::{
    Result, StepRecord, Store, StoreError, ToolCallRecord, ensure_run, get_opt_u64, get_u64,
    now_ms, sql_u64,
};
use crate::redact::Redactor;

const STEP_COLUMNS: &str = "run_id, step, started_at_ms, duration_ms, model_ms, request_hash,
    reply_json, messages_json, usage_json, input_tokens, output_tokens,
    cached_input_tokens, cost_usd, cost_source, state_json, provider, token_source,
    estimated_input_tokens, estimated_output_tokens, stop_reason";

impl Store {
    /// Commits a step atomically: the step, its tool calls, its policy events and its
    /// request body (content-addressed) all land, or none does.
    ///
    /// `request_hash` is computed from `request_body` (after redaction); when there is
    /// no body, a given `request_hash` must name a blob already stored. Fails with
    /// [`StoreError::StepAlreadyCommitted`] if this `(run_id, step)` exists and with
    /// [`StoreError::NoSuchRun`] for an unknown run.
    ///
    /// Fails with [`StoreError::RecordsLost`] when an earlier record write of the run
    /// failed (see [`Store::note_lost`]): a step is not on record as done while part of
    /// what it did is missing from the record.
    pub fn commit_step(&self, step: &StepRecord) -> Result<()> {
        self.ensure_nothing_lost(step.run_id)?;
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, step.run_id)?;
        let exists = tx
            .query_row(
                "SELECT 1 FROM steps WHERE run_id = ?1 AND step = ?2",
                params![step.run_id, step.step],
                |_| Ok(()),
            )
            .optional()?;
        if exists.is_some() {
            return Err(StoreError::StepAlreadyCommitted {
                run_id: step.run_id,
                step: step.step,
            });
        }
        let hash = match &step.request_body {
            Some(body) => Some(
                self.streams
                    .put(&tx, (step.run_id, "step"), &red.bytes(body))?,
            ),
            None => step.request_hash.clone(),
        };
        insert_step(&tx, &red, step, hash.as_deref())?;
        for (seq, call) in step.tool_calls.iter().enumerate() {
            insert_tool_call(&tx, &red, step, seq, call)?;
        }
        let at = now_ms();
        for event in &step.policy_events {
            insert_policy_event(&tx, &red, event, at)?;
        }
        // The step holds its reply now: the copy kept for a resume before the commit
        // goes, so the reply is stored once.
        tx.execute(
            "DELETE FROM step_replies WHERE run_id = ?1 AND step = ?2",
            params![step.run_id, step.step],
        )?;
        // The reply's usage is now on record: its call is no longer in flight.
        if let Some(call) = step.model_call {
            tx.execute(
                "UPDATE model_calls SET status = 'committed' WHERE id = ?1 AND run_id = ?2",
                params![call, step.run_id],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Committed steps of a run, in step order, with their tool calls and the policy
    /// events recorded for each step (in the commit or separately).
    ///
    /// `request_body` is left `None` — bodies can be large and are rarely needed; fetch
    /// one with [`Store::blob`] and `request_hash`.
    pub fn steps(&self, run_id: i64) -> Result<Vec<StepRecord>> {
        let conn = self.conn();
        let sql = format!("SELECT {STEP_COLUMNS} FROM steps WHERE run_id = ?1 ORDER BY step");
        let mut stmt = conn.prepare(&sql)?;
        let mut steps = stmt
            .query_map([run_id], step_record)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        for step in &mut steps {
            step.tool_calls = tool_calls_of(&conn, run_id, step.step)?;
            if let Some(m) = super::step_messages::restore(&step.messages_json, &step.tool_calls) {
                step.messages_json = m;
            }
            step.policy_events = policy_events_of(&conn, run_id, Some(step.step))?;
        }
        Ok(steps)
    }
}

fn insert_step(tx: &Connection, red: &Redactor, s: &StepRecord, hash: Option<&str>) -> Result<()> {
    let sql = format!(
        "INSERT INTO steps ({STEP_COLUMNS})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                 ?18, ?19, ?20)"
    );
    tx.execute(
        &sql,
        params![
            s.run_id,
            s.step,
            s.started_at_ms,
            sql_u64(s.duration_ms),
            sql_u64(s.model_ms),
            hash,
            red.text(&s.reply_json),
            red.text(
                &super::step_messages::elide(&s.messages_json, &s.tool_calls)
                    .unwrap_or_else(|| s.messages_json.clone())
            ),
            red.text(&s.usage_json),
            sql_u64(s.input_tokens),
            sql_u64(s.output_tokens),
            s.cached_input_tokens.map(sql_u64),
            s.cost_usd,
            red.text(&s.cost_source),
            red.text(&s.state_json),
            red.opt(s.provider.as_deref()),
            red.text(&s.token_source),
            s.estimated_input_tokens.map(sql_u64),
            s.estimated_output_tokens.map(sql_u64),
            red.opt(s.stop_reason.as_deref()),
        ],
    )?;
    Ok(())
}

fn insert_tool_call(
    tx: &Connection,
    red: &Redactor,
    s: &StepRecord,
    seq: usize,
    c: &ToolCallRecord,
) -> Result<()> {
    tx.execute(
        "INSERT INTO tool_calls (run_id, step, seq, call_id, name, input_json, output,
                                 is_error, confinement_refusal, duration_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            s.run_id,
            s.step,
            seq as i64,
            red.text(&c.call_id),
            red.text(&c.name),
            red.text(&c.input_json),
            red.text(&c.output),
            c.is_error,
            red.opt(c.confinement_refusal.as_deref()),
            sql_u64(c.duration_ms),
        ],
    )?;
    Ok(())
}

fn tool_calls_of(conn: &Connection, run_id: i64, step: u32) -> Result<Vec<ToolCallRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT call_id, name, input_json, output, is_error, confinement_refusal, duration_ms
         FROM tool_calls WHERE run_id = ?1 AND step = ?2 ORDER BY seq",
    )?;
    let rows = stmt.query_map(params![run_id, step], |r| {
        Ok(ToolCallRecord {
            call_id: r.get(0)?,
            name: r.get(1)?,
            input_json: r.get(2)?,
            output: r.get(3)?,
            is_error: r.get(4)?,
            confinement_refusal: r.get(5)?,
            duration_ms: get_u64(r, 6)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Maps a `SELECT {STEP_COLUMNS}` row; tool calls and policy events are filled after.
fn step_record(r: &Row<'_>) -> rusqlite::Result<StepRecord> {
    Ok(StepRecord {
        run_id: r.get(0)?,
        step: r.get(1)?,
        started_at_ms: r.get(2)?,
        duration_ms: get_u64(r, 3)?,
        model_ms: get_u64(r, 4)?,
        request_body: None,
        request_hash: r.get(5)?,
        reply_json: r.get(6)?,
        messages_json: r.get(7)?,
        usage_json: r.get(8)?,
        input_tokens: get_u64(r, 9)?,
        output_tokens: get_u64(r, 10)?,
        cached_input_tokens: get_opt_u64(r, 11)?,
        cost_usd: r.get(12)?,
        cost_source: r.get(13)?,
        state_json: r.get(14)?,
        provider: r.get(15)?,
        token_source: r.get(16)?,
        estimated_input_tokens: get_opt_u64(r, 17)?,
        estimated_output_tokens: get_opt_u64(r, 18)?,
        stop_reason: r.get(19)?,
        model_call: None,
        tool_calls: Vec::new(),
        policy_events: Vec::new(),
    })
}
