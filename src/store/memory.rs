//! Cross-run memory (C17): short notes keyed to a workspace's canonical path, written by
//! agents (the `remember` tool) or the API, offered to later runs as untrusted text.
//!
//! Bounded: at most [`MAX_NOTES`] per workspace, keys of at most [`MAX_KEY`] bytes and
//! values of at most [`MAX_VALUE`]; writing past the count evicts the least recently
//! used notes — never the one just written — and says which.

use rusqlite::{OptionalExtension, params};

use super::{Result, Store, StoreError, now_ms};

/// Notes kept per workspace.
pub const MAX_NOTES: usize = 50;
/// Longest key, in bytes.
pub const MAX_KEY: usize = 64;
/// Longest value, in bytes.
pub const MAX_VALUE: usize = 1000;

/// One note.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemoryNote {
    /// Key.
    pub key: String,
    /// Text.
    pub value: String,
    /// The run that wrote it, when a run did.
    pub source_run: Option<i64>,
    /// Unix ms.
    pub created_at_ms: i64,
    /// Unix ms of the last write or offer.
    pub used_at_ms: i64,
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MemoryNote> {
    Ok(MemoryNote {
        key: r.get(0)?,
        value: r.get(1)?,
        source_run: r.get(2)?,
        created_at_ms: r.get(3)?,
        used_at_ms: r.get(4)?,
    })
}

impl Store {
    /// Writes a note; returns the keys evicted to stay within [`MAX_NOTES`]. Fails with
    /// [`StoreError::MemoryBounds`] for an empty or too long key or value.
    pub fn memory_put(
        &self,
        workspace: &str,
        key: &str,
        value: &str,
        source_run: Option<i64>,
    ) -> Result<Vec<String>> {
        if key.trim().is_empty()
            || key.len() > MAX_KEY
            || value.is_empty()
            || value.len() > MAX_VALUE
        {
            return Err(StoreError::MemoryBounds {
                key_len: key.len(),
                value_len: value.len(),
            });
        }
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        // Strictly after every other note, so the LRU order never picks the new one.
        let newest: i64 = tx.query_row(
            "SELECT COALESCE(MAX(used_at_ms), 0) FROM memory WHERE workspace = ?1",
            [workspace],
            |r| r.get(0),
        )?;
        let now = now_ms().max(newest + 1);
        tx.execute(
            "INSERT INTO memory (workspace, key, value, source_run, created_at_ms, used_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)
             ON CONFLICT (workspace, key) DO UPDATE SET value = ?3, source_run = ?4, used_at_ms = ?5",
            params![workspace, red.text(key), red.text(value), source_run, now],
        )?;
        let mut evicted = Vec::new();
        {
            let mut stmt = tx.prepare(
                "SELECT key FROM memory WHERE workspace = ?1 ORDER BY used_at_ms DESC, key LIMIT -1 OFFSET ?2",
            )?;
            let rows = stmt.query_map(params![workspace, MAX_NOTES as i64], |r| {
                r.get::<_, String>(0)
            })?;
            for k in rows {
                evicted.push(k?);
            }
        }
        for k in &evicted {
            tx.execute(
                "DELETE FROM memory WHERE workspace = ?1 AND key = ?2",
                params![workspace, k],
            )?;
        }
        tx.commit()?;
        Ok(evicted)
    }

    /// The notes of a workspace, most recently used first.
    pub fn memory_list(&self, workspace: &str) -> Result<Vec<MemoryNote>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT key, value, source_run, created_at_ms, used_at_ms FROM memory
             WHERE workspace = ?1 ORDER BY used_at_ms DESC, key",
        )?;
        let rows = stmt.query_map([workspace], row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// One note.
    pub fn memory_get(&self, workspace: &str, key: &str) -> Result<Option<MemoryNote>> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                "SELECT key, value, source_run, created_at_ms, used_at_ms FROM memory
                 WHERE workspace = ?1 AND key = ?2",
                params![workspace, key],
                row,
            )
            .optional()?)
    }

    /// Marks notes as used now (they were offered to a run), keeping their order.
    pub fn memory_touch(&self, workspace: &str, keys: &[String]) -> Result<()> {
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        let base = now_ms();
        // Oldest first, so the relative order of the offered notes is preserved.
        for (i, k) in keys.iter().rev().enumerate() {
            tx.execute(
                "UPDATE memory SET used_at_ms = ?3 WHERE workspace = ?1 AND key = ?2",
                params![workspace, k, base + i as i64],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Deletes a note; whether it existed.
    pub fn memory_delete(&self, workspace: &str, key: &str) -> Result<bool> {
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        let n = tx.execute(
            "DELETE FROM memory WHERE workspace = ?1 AND key = ?2",
            params![workspace, key],
        )?;
        tx.commit()?;
        Ok(n > 0)
    }

    /// Deletes every note of a workspace; how many there were.
    pub fn memory_clear(&self, workspace: &str) -> Result<usize> {
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        let n = tx.execute("DELETE FROM memory WHERE workspace = ?1", [workspace])?;
        tx.commit()?;
        Ok(n)
    }
}
