//! Sandbox sessions: for every sandboxed command, the layers that were really applied,
//! so "was this contained?" is answered from the store alone.

use rusqlite::params;

use super::{Result, SandboxSession, Store, ensure_run, get_opt_u64, get_u64, now_ms, sql_u64};

impl Store {
    /// Records one sandboxed command. Fails with [`super::StoreError::NoSuchRun`] for an
    /// unknown run.
    pub fn record_sandbox_session(&self, s: &SandboxSession) -> Result<()> {
        let red = self.redactor();
        let mut conn = self.conn();
        let tx = self.write_tx(&mut conn)?;
        ensure_run(&tx, s.run_id)?;
        tx.execute(
            "INSERT INTO sandbox_sessions (run_id, step, purpose, backend, argv_json, layers_json,
                 limits_json, network, masked_json, env_names_json, exit_code, signal, cap_hit,
                 duration_ms, at_ms, allow_hosts_json, egress_refusals_reported,
                 egress_admitted_reported, egress_refused_hosts_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                 ?18, ?19)",
            params![
                s.run_id,
                s.step,
                red.text(&s.purpose),
                red.text(&s.backend),
                red.text(&s.argv_json),
                red.text(&s.layers_json),
                red.text(&s.limits_json),
                red.text(&s.network),
                red.text(&s.masked_json),
                red.text(&s.env_names_json),
                s.exit_code,
                s.signal,
                red.opt(s.cap_hit.as_deref()),
                sql_u64(s.duration_ms),
                now_ms(),
                red.text(&s.allow_hosts_json),
                s.egress_refusals_reported.map(sql_u64),
                s.egress_admitted_reported.map(sql_u64),
                red.text(&s.egress_refused_hosts_json),
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Sandbox sessions of a run, oldest first.
    pub fn sandbox_sessions(&self, run_id: i64) -> Result<Vec<SandboxSession>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT run_id, step, purpose, backend, argv_json, layers_json, limits_json, network,
                    masked_json, env_names_json, exit_code, signal, cap_hit, duration_ms,
                    allow_hosts_json, egress_refusals_reported, egress_admitted_reported,
                    egress_refused_hosts_json
             FROM sandbox_sessions WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(SandboxSession {
                run_id: r.get(0)?,
                step: r.get(1)?,
                purpose: r.get(2)?,
                backend: r.get(3)?,
                argv_json: r.get(4)?,
                layers_json: r.get(5)?,
                limits_json: r.get(6)?,
                network: r.get(7)?,
                masked_json: r.get(8)?,
                env_names_json: r.get(9)?,
                exit_code: r.get(10)?,
                signal: r.get(11)?,
                cap_hit: r.get(12)?,
                duration_ms: get_u64(r, 13)?,
                allow_hosts_json: r.get(14)?,
                egress_refusals_reported: get_opt_u64(r, 15)?,
                egress_admitted_reported: get_opt_u64(r, 16)?,
                egress_refused_hosts_json: r.get(17)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
