//! The model's reply of a step, on record the moment it arrives and before any of its
//! tool calls runs: a session cut off during the tools (a kill, Ctrl-C, the time
//! budget) resumes by replaying this reply — the same calls, with the journal saying
//! which already ran — instead of asking the model for the step again.

use rusqlite::{OptionalExtension, params};

use super::{Result, Store, ensure_run, now_ms};

/// A step's reply as received, before the step is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredReply {
    /// The reply (`Completion`) as JSON.
    pub reply_json: String,
    /// Which provider of the chain answered.
    pub provider: Option<String>,
    /// How long the model call took.
    pub model_ms: u64,
}

impl Store {
    /// Puts a step's reply on record (replacing one recorded for the same step).
    pub fn record_reply(&self, run_id: i64, step: u32, reply: &StoredReply) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, run_id)?;
        tx.execute(
            "INSERT OR REPLACE INTO step_replies (run_id, step, reply_json, provider, model_ms,
                                                  created_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                run_id,
                step,
                red.text(&reply.reply_json),
                reply.provider.as_deref().map(|p| red.text(p)),
                i64::try_from(reply.model_ms).unwrap_or(i64::MAX),
                now_ms(),
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The reply recorded for `step`, if any.
    pub fn reply(&self, run_id: i64, step: u32) -> Result<Option<StoredReply>> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                "SELECT reply_json, provider, model_ms FROM step_replies
                 WHERE run_id = ?1 AND step = ?2",
                params![run_id, step],
                |r| {
                    Ok(StoredReply {
                        reply_json: r.get(0)?,
                        provider: r.get(1)?,
                        model_ms: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                    })
                },
            )
            .optional()?)
    }
}
