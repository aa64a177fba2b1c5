//! Deleting runs from the store (`io-harness runs prune --rows`): every row of each
//! run, then the request bodies and chunks no remaining row refers to, then `VACUUM`
//! so the file shrinks.
//!
//! The tables that belong to a run are found from the schema (every table with a
//! `run_id` column), not listed here, so a table a later migration adds is pruned too.
//! Foreign keys are checked at the commit (`defer_foreign_keys`), so the order of the
//! deletes does not matter; a row of another run still pointing at a deleted one (a
//! child whose parent is pruned without it) fails the commit and nothing is deleted.

use std::collections::HashSet;

use rusqlite::params_from_iter;

use super::{Result, Store};

impl Store {
    /// Deletes the runs `ids` and all their rows, then the stored request bodies (and
    /// chunks) nothing refers to any more, in one transaction. A sub-agent's run must
    /// be in `ids` with its parent. Returns how many runs were deleted.
    pub fn delete_runs(&self, ids: &[i64]) -> Result<usize> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        tx.execute_batch("PRAGMA defer_foreign_keys = ON")?;
        let tables: Vec<String> = {
            let mut stmt = tx.prepare(
                "SELECT m.name FROM sqlite_master m
                 WHERE m.type = 'table' AND m.name != 'runs'
                   AND EXISTS (SELECT 1 FROM pragma_table_info(m.name) c WHERE c.name = 'run_id')",
            )?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let marks = vec!["?"; ids.len()].join(", ");
        for t in &tables {
            // A table name from the schema itself, quoted as an identifier.
            let sql = format!(
                "DELETE FROM \"{}\" WHERE run_id IN ({marks})",
                t.replace('"', "\"\"")
            );
            tx.execute(&sql, params_from_iter(ids))?;
        }
        let deleted = tx.execute(
            &format!("DELETE FROM runs WHERE id IN ({marks})"),
            params_from_iter(ids),
        )?;
        collect_blobs(&tx)?;
        tx.commit()?;
        Ok(deleted)
    }

    /// Rewrites the file without its free pages (after [`Store::delete_runs`]).
    pub fn vacuum(&self) -> Result<()> {
        let conn = self.conn();
        conn.execute_batch("VACUUM")?;
        Ok(())
    }
}

/// Deletes the blobs no `request_hash` column names, then the chunks no chunked blob
/// lists.
fn collect_blobs(tx: &rusqlite::Transaction<'_>) -> Result<()> {
    let referrers: Vec<String> = {
        let mut stmt = tx.prepare(
            "SELECT m.name FROM sqlite_master m
             WHERE m.type = 'table'
               AND EXISTS (SELECT 1 FROM pragma_table_info(m.name) c WHERE c.name = 'request_hash')",
        )?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    if !referrers.is_empty() {
        let used = referrers
            .iter()
            .map(|t| {
                format!(
                    "SELECT request_hash FROM \"{}\" WHERE request_hash IS NOT NULL",
                    t.replace('"', "\"\"")
                )
            })
            .collect::<Vec<_>>()
            .join(" UNION ");
        // A blob another one's delta list builds on stays while that one does:
        // deleted leaves first, until none is left to delete.
        let sql = format!(
            "DELETE FROM blobs WHERE hash NOT IN ({used})
               AND hash NOT IN (SELECT base FROM blobs WHERE base IS NOT NULL)"
        );
        while tx.execute(&sql, [])? > 0 {}
    }
    let mut listed: HashSet<Vec<u8>> = HashSet::new();
    {
        let mut stmt = tx.prepare("SELECT bytes, chunked FROM blobs WHERE chunked != 0")?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let bytes: Vec<u8> = r.get(0)?;
            // A delta list: its kept digests are its base's, listed there.
            let own = if r.get::<_, i64>(1)? == 2 {
                bytes.get(4..).unwrap_or_default()
            } else {
                &bytes[..]
            };
            listed.extend(own.chunks(32).map(<[u8]>::to_vec));
        }
    }
    let unused: Vec<i64> = {
        let mut stmt = tx.prepare("SELECT id, hash FROM chunks")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))?;
        rows.filter_map(|r| r.ok())
            .filter(|(_, h)| !listed.contains(h))
            .map(|(id, _)| id)
            .collect()
    };
    let mut del = tx.prepare("DELETE FROM chunks WHERE id = ?1")?;
    for id in unused {
        del.execute([id])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::store::{NewRun, Store};

    #[test]
    fn deleting_a_run_leaves_no_row_of_it_and_keeps_shared_bodies() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("s.db")).unwrap();
        let new = |goal: &str| NewRun {
            goal: goal.into(),
            root: "/r".into(),
            work_dir: "/r".into(),
            contract_json: "{}".into(),
            provider_json: "{}".into(),
            parent_run_id: None,
            scratch_dir: None,
        };
        let a = store.create_run(&new("a")).unwrap();
        let b = store.create_run(&new("b")).unwrap();
        for id in [a, b] {
            store
                .record_sandbox_event(&crate::store::SandboxEvent::create(id, 1, "floor"))
                .unwrap();
        }
        assert_eq!(store.delete_runs(&[a]).unwrap(), 1);
        assert!(store.run(a).unwrap().is_none());
        assert!(store.sandbox_events(a).unwrap().is_empty());
        assert_eq!(store.sandbox_events(b).unwrap().len(), 1);
        store.vacuum().unwrap();
        assert!(store.run(b).unwrap().is_some());
    }
}
