//! The context log: what assembly did to each request (C16) — tokens before and after,
//! the budget, the state it left, the provider's reported usage beside the estimate,
//! the request as assembled (a content-addressed blob), and one row per observation
//! stubbed, re-read, refused, trimmed or left out.
//!
//! Kinds (`kind`):
//! - `assembled`: one per request sent (two for a step whose first request overflowed);
//!   `tokens_before`/`tokens_after` are estimates of the full history and of the
//!   request, `reported_input_tokens` what the provider billed (uncached + cache reads +
//!   cache writes), `state_json` the assembler's state after it;
//! - `stubbed`, `reread`, `reread_refused`, `trimmed`, `dropped`: an observation sent
//!   other than whole, recorded when its treatment first appears (not again on every
//!   later request that repeats it);
//! - `overflow_retry`: the provider reported a context overflow and the request is
//!   assembled again, harder, once.

use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::{Result, Store, ensure_run, get_opt_u64, now_ms, sql_u64};

/// One row of the context log.
///
/// ```
/// use io_harness::Store;
/// use io_harness::store::ContextEvent;
///
/// let store = Store::memory().unwrap();
/// let run = store.start_run("g", "/ws").unwrap();
/// store
///     .record_context_events(&[ContextEvent {
///         run_id: run,
///         step: 3,
///         kind: "stubbed".into(),
///         obs_step: Some(1),
///         tool: Some("read_file".into()),
///         target: Some("src/lib.rs".into()),
///         ..ContextEvent::default()
///     }])
///     .unwrap();
/// let log = store.context_events(run).unwrap();
/// assert_eq!((log[0].kind.as_str(), log[0].obs_step), ("stubbed", Some(1)));
/// // The provider's usage was not reported here: unknown, not zero.
/// assert_eq!(log[0].reported_input_tokens, None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextEvent {
    /// The run.
    pub run_id: i64,
    /// The step whose request this is about.
    pub step: u32,
    /// The kind (see the module docs).
    pub kind: String,
    /// The step of the observation concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub obs_step: Option<u32>,
    /// Its tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Its target (path, command line, search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Estimated tokens before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_before: Option<u64>,
    /// Estimated tokens after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
    /// The budget applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<u64>,
    /// Input tokens the provider reported for the request (all kinds); `None` when the
    /// call failed or the provider did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_input_tokens: Option<u64>,
    /// Of which read from the prompt cache, as reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Of which written to the prompt cache, as reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// The assembler's state after an `assembled` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_json: Option<String>,
    /// The stub sent, or a summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The assembled request (neutral JSON) to store; read back through
    /// `request_hash` and [`Store::blob`].
    #[serde(skip)]
    pub request: Option<Vec<u8>>,
    /// Hash of the stored request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_hash: Option<String>,
}

impl ContextEvent {
    /// Every kind the context log documents (see the module docs); a test proves each
    /// is produced.
    pub const KINDS: &'static [&'static str] = &[
        "assembled",
        "stubbed",
        "reread",
        "reread_refused",
        "trimmed",
        "dropped",
        "overflow_retry",
    ];
}

impl Store {
    /// Records context events in one transaction (their requests as blobs). Fails with
    /// [`super::StoreError::NoSuchRun`] for an unknown run.
    pub fn record_context_events(&self, events: &[ContextEvent]) -> Result<()> {
        let Some(first) = events.first() else {
            return Ok(());
        };
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, first.run_id)?;
        let at = now_ms();
        for e in events {
            let hash = match &e.request {
                Some(body) => Some(self.streams.put(
                    &tx,
                    (e.run_id, "context"),
                    &red.bytes(body),
                )?),
                None => e.request_hash.clone(),
            };
            tx.execute(
                "INSERT INTO context_events (run_id, step, kind, obs_step, tool, target,
                    tokens_before, tokens_after, budget, reported_input_tokens,
                    cached_input_tokens, cache_write_tokens, state_json, detail, request_hash, at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                params![
                    e.run_id,
                    e.step,
                    red.text(&e.kind),
                    e.obs_step,
                    red.opt(e.tool.as_deref()),
                    red.opt(e.target.as_deref()),
                    e.tokens_before.map(sql_u64),
                    e.tokens_after.map(sql_u64),
                    e.budget.map(sql_u64),
                    e.reported_input_tokens.map(sql_u64),
                    e.cached_input_tokens.map(sql_u64),
                    e.cache_write_tokens.map(sql_u64),
                    red.opt(e.state_json.as_deref()),
                    red.opt(e.detail.as_deref()),
                    hash,
                    at,
                ],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Context events of a run, oldest first.
    pub fn context_events(&self, run_id: i64) -> Result<Vec<ContextEvent>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT run_id, step, kind, obs_step, tool, target, tokens_before, tokens_after,
                    budget, reported_input_tokens, cached_input_tokens, cache_write_tokens,
                    state_json, detail, request_hash
             FROM context_events WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(ContextEvent {
                run_id: r.get(0)?,
                step: r.get(1)?,
                kind: r.get(2)?,
                obs_step: r.get(3)?,
                tool: r.get(4)?,
                target: r.get(5)?,
                tokens_before: get_opt_u64(r, 6)?,
                tokens_after: get_opt_u64(r, 7)?,
                budget: get_opt_u64(r, 8)?,
                reported_input_tokens: get_opt_u64(r, 9)?,
                cached_input_tokens: get_opt_u64(r, 10)?,
                cache_write_tokens: get_opt_u64(r, 11)?,
                state_json: r.get(12)?,
                detail: r.get(13)?,
                request: None,
                request_hash: r.get(14)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_their_request_blobs_read_back() {
        let store = Store::memory().unwrap();
        let run_id = store.start_run("g", "/tmp").unwrap();
        let e = ContextEvent {
            run_id,
            step: 1,
            kind: "assembled".into(),
            tokens_before: Some(100),
            tokens_after: Some(40),
            reported_input_tokens: None,
            request: Some(b"{\"messages\":[]}".to_vec()),
            ..ContextEvent::default()
        };
        store.record_context_events(&[e]).unwrap();
        let back = store.context_events(run_id).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].tokens_after, Some(40));
        assert_eq!(
            back[0].reported_input_tokens, None,
            "not observed is not zero"
        );
        let hash = back[0].request_hash.as_deref().unwrap();
        assert_eq!(store.blob(hash).unwrap().unwrap(), b"{\"messages\":[]}");
        assert!(matches!(
            store.record_context_events(&[ContextEvent {
                run_id: 999,
                ..ContextEvent::default()
            }]),
            Err(crate::store::StoreError::NoSuchRun(999))
        ));
    }
}
