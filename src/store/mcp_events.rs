//! [`McpEvent`]: the record of a run's MCP servers — what connected, what it offered,
//! every call made to it, and how it went away.

use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::{Result, Store, ensure_run, now_ms};

/// One event in the life of an MCP server a run used.
///
/// Kinds (the `kind` field):
///
/// | kind | when | fields |
/// |---|---|---|
/// | `connected` | the handshake finished | `detail`: JSON with the server's name, version, protocol version, transport, `sandbox` (the backend that isolated a stdio server, or `"none"` when it ran outside the sandbox or is reached over HTTP) and `pid` (a stdio server's host pid); for a stdio server run outside the sandbox also `harness_memory_readable` (whether that process could read the harness's memory: the harness runs as root, or is dumpable) and `harness_memory_why` (which of the two, or why not), absent for any other server |
/// | `discovered` | its tools were listed | `detail`: JSON with `tools` (offered to the model) and `hidden` (withheld by the server's allow/deny lists, or past the cap of 128 tools per server), and `path_args_unmatched` (tools the contract's `path_args` names that the server does not list) when there are any |
/// | `called` | one tool call ended | `tool`, `duration_ms`, `outcome` (`ok`, `error`, `timeout`, `unavailable`, `too_large`, `protocol_error`) |
/// | `disconnected` | the run closed it | — |
/// | `failed` | it could not start, or died | `detail`: the reason (with how a stdio server's process ended — `exit code N` or `killed by signal N` — when it has, and the tail of its stderr) |
///
/// A new kind is a new `kind` value, never a new table or column.
///
/// ```
/// use io_harness::{McpEvent, Store};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = Store::memory()?;
/// let run_id = store.start_run("look something up", "/repo")?;
/// store.record_mcp_event(&McpEvent::called(run_id, 2, "docs", "search", 41, "ok"))?;
/// let calls = store.mcp_events(run_id)?;
/// assert_eq!(calls[0].tool.as_deref(), Some("search"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpEvent {
    /// The run.
    pub run_id: i64,
    /// The step it happened on (0: at run start, before any step).
    pub step: u32,
    /// The server's name in the contract.
    pub server: String,
    /// `connected`, `discovered`, `called`, `disconnected` or `failed`.
    pub kind: String,
    /// The server's own name of the tool, for `called`.
    pub tool: Option<String>,
    /// Wall time of a call, for `called`.
    pub duration_ms: Option<u64>,
    /// `ok`, `error`, `timeout`, `unavailable`, `too_large` or `protocol_error`, for
    /// `called`.
    pub outcome: Option<String>,
    /// Kind-specific detail (see the table above).
    pub detail: Option<String>,
}

impl McpEvent {
    /// Every kind, as documented above.
    pub const KINDS: &'static [&'static str] = &[
        "connected",
        "discovered",
        "called",
        "disconnected",
        "failed",
    ];

    /// Every outcome of a `called` event: the server answered (`ok`), answered with an
    /// error or failed during the call (`error`), did not answer within the call
    /// timeout (`timeout`), was already gone (`unavailable`), answered with more than
    /// 16 MiB (`too_large`: the reply is dropped, the server lives), or answered with
    /// something that is not a JSON-RPC reply (`protocol_error`: recorded when it
    /// arrives, not at the timeout).
    pub const OUTCOMES: &'static [&'static str] = &[
        "ok",
        "error",
        "timeout",
        "unavailable",
        "too_large",
        "protocol_error",
    ];

    fn new(run_id: i64, step: u32, server: &str, kind: &str) -> Self {
        Self {
            run_id,
            step,
            server: server.to_string(),
            kind: kind.to_string(),
            tool: None,
            duration_ms: None,
            outcome: None,
            detail: None,
        }
    }

    /// The handshake with `server` finished; `detail` is the JSON described on the type.
    pub fn connected(run_id: i64, step: u32, server: &str, detail: &serde_json::Value) -> Self {
        Self {
            detail: Some(detail.to_string()),
            ..Self::new(run_id, step, server, "connected")
        }
    }

    /// `offered` tools of `server` are offered to the model, `hidden` withheld by its
    /// allow/deny lists.
    pub fn discovered(run_id: i64, step: u32, server: &str, offered: usize, hidden: usize) -> Self {
        Self {
            detail: Some(serde_json::json!({ "tools": offered, "hidden": hidden }).to_string()),
            ..Self::new(run_id, step, server, "discovered")
        }
    }

    /// A `discovered` event that also names the tools the contract's `path_args`
    /// declares but the server does not list (nothing is added when there are none).
    pub fn with_unmatched_path_args(mut self, tools: &[String]) -> Self {
        if tools.is_empty() {
            return self;
        }
        let mut v: serde_json::Value = self
            .detail
            .as_deref()
            .and_then(|d| serde_json::from_str(d).ok())
            .unwrap_or_else(|| serde_json::json!({}));
        v["path_args_unmatched"] = serde_json::json!(tools);
        self.detail = Some(v.to_string());
        self
    }

    /// A call of `tool` ended with `outcome` after `duration_ms`.
    pub fn called(
        run_id: i64,
        step: u32,
        server: &str,
        tool: &str,
        duration_ms: u64,
        outcome: &str,
    ) -> Self {
        Self {
            tool: Some(tool.to_string()),
            duration_ms: Some(duration_ms),
            outcome: Some(outcome.to_string()),
            ..Self::new(run_id, step, server, "called")
        }
    }

    /// The run closed its connection to `server`.
    pub fn disconnected(run_id: i64, step: u32, server: &str) -> Self {
        Self::new(run_id, step, server, "disconnected")
    }

    /// `server` could not start or died, for `reason`.
    pub fn failed(run_id: i64, step: u32, server: &str, reason: &str) -> Self {
        Self {
            detail: Some(reason.to_string()),
            ..Self::new(run_id, step, server, "failed")
        }
    }
}

impl Store {
    /// Records an MCP event. Fails with [`super::StoreError::NoSuchRun`] for an unknown
    /// run. Secret values registered with [`Store::redact_secrets`] are redacted.
    pub fn record_mcp_event(&self, e: &McpEvent) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, e.run_id)?;
        tx.execute(
            "INSERT INTO mcp_events (run_id, step, server, kind, tool, duration_ms, outcome, detail, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                e.run_id,
                e.step,
                red.text(&e.server),
                red.text(&e.kind),
                red.opt(e.tool.as_deref()),
                e.duration_ms.map(|d| i64::try_from(d).unwrap_or(i64::MAX)),
                red.opt(e.outcome.as_deref()),
                red.opt(e.detail.as_deref()),
                now_ms(),
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// MCP events of a run, oldest first.
    pub fn mcp_events(&self, run_id: i64) -> Result<Vec<McpEvent>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT run_id, step, server, kind, tool, duration_ms, outcome, detail
             FROM mcp_events WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            let d: Option<i64> = r.get(5)?;
            Ok(McpEvent {
                run_id: r.get(0)?,
                step: r.get(1)?,
                server: r.get(2)?,
                kind: r.get(3)?,
                tool: r.get(4)?,
                duration_ms: d.map(|d| u64::try_from(d).unwrap_or(0)),
                outcome: r.get(6)?,
                detail: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_in_order_and_are_redacted() {
        let store = Store::memory().unwrap();
        let run = store.start_run("g", "/r").unwrap();
        store.redact_secrets(&["s3cr3t-token".to_string()]);
        store
            .record_mcp_event(&McpEvent::failed(run, 0, "web", "401 for s3cr3t-token"))
            .unwrap();
        store
            .record_mcp_event(&McpEvent::called(run, 1, "fs", "read", 5, "ok"))
            .unwrap();
        let ev = store.mcp_events(run).unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].kind, "failed");
        assert!(!ev[0].detail.as_deref().unwrap().contains("s3cr3t-token"));
        assert_eq!(ev[1].duration_ms, Some(5));
        assert!(
            store
                .record_mcp_event(&McpEvent::disconnected(run + 9, 0, "x"))
                .is_err()
        );
    }
}
