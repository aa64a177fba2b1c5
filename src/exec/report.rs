//! The sandbox's layer report as JSON, for the store and the audit log. Field names
//! here are stable on disk.

use serde_json::{Value, json};

use crate::sandbox::{LayerReport, SandboxLimits, SandboxOutcome};

fn labels<T: Copy>(items: &[T], label: impl Fn(T) -> &'static str) -> Vec<&'static str> {
    items.iter().map(|&i| label(i)).collect()
}

/// What was really applied.
pub fn layers_json(l: &LayerReport) -> Value {
    let mounts = l.mounts.as_ref().map(|m| {
        json!({
            "fresh_root": m.fresh_root,
            "fresh_proc": m.fresh_proc,
            "minimal_dev": m.minimal_dev,
            "view": m.view.iter().map(|e| json!({
                "path": e.path,
                "access": e.access.label(),
            })).collect::<Vec<_>>(),
            "idmapped": m.idmapped,
            "excluded": m.excluded,
            "protected": m.protected,
            "masked": m.masked,
        })
    });
    json!({
        "namespaces": labels(&l.namespaces, |n| n.label()),
        "mounts": mounts,
        "landlock": {
            "abi": l.landlock.abi,
            "status": l.landlock.status.label(),
            "tcp_denied": l.landlock.tcp_denied,
            "scoped": l.landlock.scoped,
        },
        "seccomp": l.seccomp,
        "no_new_privs": l.no_new_privs,
        "new_session": l.new_session,
        "capabilities_dropped": l.capabilities_dropped,
        "fds_closed": l.fds_closed,
        "proxy_bridge": l.proxy_bridge,
        "host_uid": l.host_uid,
        "limits": {
            "cgroup": labels(&l.limits.cgroup, |c| c.label()),
            "rlimits": l.limits.rlimits,
            "memory_monitor": l.limits.memory_monitor,
            "cpu_tree": l.limits.cpu_tree.map(|c| c.label()),
            "disk_watch": l.limits.disk_watch,
            "enforced": labels(&l.limits.enforced, |c| c.label()),
            "unobservable": labels(&l.limits.unobservable, |c| c.label()),
            "teardown": labels(&l.limits.teardown, |t| t.label()),
        },
    })
}

/// The caps asked for (`null` = unbounded).
pub fn limits_json(l: &SandboxLimits) -> Value {
    json!({
        "cpu_secs": l.cpu_secs,
        "wall_secs": l.wall_secs,
        "memory_bytes": l.memory_bytes,
        "processes": l.processes,
        "open_files": l.open_files,
        "output_bytes": l.output_bytes,
        "disk_bytes": l.disk_bytes,
    })
}

/// What is known of each enforced cap after the command: `hit`, `not_hit` or
/// `not_observable` (a cap enforced where nothing outside sees a hit is never
/// recorded as `not_hit`).
pub fn caps_json(out: &SandboxOutcome) -> Value {
    let map: serde_json::Map<String, Value> = out
        .caps
        .iter()
        .map(|(c, s)| (c.label().to_string(), Value::from(s.label())))
        .collect();
    Value::Object(map)
}

/// The layer report with the per-cap states under `limits.caps`.
fn session_layers_json(out: &SandboxOutcome) -> Value {
    let mut v = layers_json(&out.layers);
    v["limits"]["caps"] = caps_json(out);
    // What the sweep after the session did: a file it cleared, and any part of the
    // writable trees it could not walk (where a setuid file may remain).
    v["setuid"] = json!({
        "cleared": out.setuid_cleared,
        "incomplete": out.setuid_incomplete,
    });
    v
}

fn json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// One finished sandbox session as the store and the audit log keep it: its
/// `sandbox_sessions` row and its audit line, built from the same facts so the two never
/// disagree. Commands, gates and MCP servers all end here.
pub(crate) struct SessionFacts<'a> {
    /// The run and step it belongs to.
    pub run_id: i64,
    pub step: u32,
    /// `tool`, `gate`, `mcp`…
    pub purpose: &'a str,
    /// The directory it ran in, as the audit log names it.
    pub workdir: &'a std::path::Path,
    pub spec: &'a crate::sandbox::RunSpec,
    pub out: &'a crate::sandbox::SandboxOutcome,
    pub egress: &'a super::EgressRecord,
}

impl SessionFacts<'_> {
    /// A cap only counts as hit where the backend enforced it.
    fn cap_hit(&self) -> Option<String> {
        self.out
            .cap_hit
            .filter(|c| self.out.layers.enforces(*c))
            .map(|c| c.label().to_string())
    }

    /// What was really masked in this session: the paths the backend's mount plan
    /// covered (workspace-relative where inside it), not the ones asked for — a
    /// backend without mounts masked nothing, and says so.
    fn masked(&self) -> Vec<String> {
        let Some(mounts) = &self.out.layers.mounts else {
            return Vec::new();
        };
        let work = std::fs::canonicalize(self.workdir).unwrap_or_else(|_| self.workdir.into());
        let spec_work =
            std::fs::canonicalize(&self.spec.workdir).unwrap_or_else(|_| self.spec.workdir.clone());
        mounts
            .masked
            .iter()
            .map(|m| {
                m.strip_prefix(&work)
                    .or_else(|_| m.strip_prefix(&spec_work))
                    .unwrap_or(m)
                    .display()
                    .to_string()
            })
            .collect()
    }

    fn env_names(&self) -> Vec<String> {
        self.spec.env.iter().map(|(k, _)| k.clone()).collect()
    }

    fn duration_ms(&self) -> u64 {
        u64::try_from(self.out.duration.as_millis()).unwrap_or(u64::MAX)
    }

    /// The `sandbox_sessions` row.
    pub fn row(&self) -> crate::store::SandboxSession {
        let (spec, out, egress) = (self.spec, self.out, self.egress);
        crate::store::SandboxSession {
            run_id: self.run_id,
            step: self.step,
            purpose: self.purpose.into(),
            backend: out.backend.label().into(),
            argv_json: json(&spec.argv),
            layers_json: session_layers_json(out).to_string(),
            limits_json: limits_json(&spec.limits).to_string(),
            network: egress.posture.into(),
            allow_hosts_json: json(&egress.allow_hosts),
            egress_refusals_reported: egress.report.refusals,
            egress_admitted_reported: egress.report.admitted,
            egress_refused_hosts_json: json(&egress.report.refused_hosts),
            masked_json: json(&self.masked()),
            env_names_json: json(&self.env_names()),
            exit_code: out.exit_code,
            signal: out.signal,
            cap_hit: self.cap_hit(),
            duration_ms: self.duration_ms(),
        }
    }

    /// The audit line; `run` is `None` when nothing in the store names the session.
    pub fn audit_line(&self, run: Option<(i64, u32)>) -> crate::audit::SessionRecord {
        let (spec, out, egress) = (self.spec, self.out, self.egress);
        let mut rec = crate::audit::SessionRecord::new(
            spec.argv.clone(),
            self.workdir.display().to_string(),
            out.backend.label(),
        );
        if let Some((run_id, step)) = run {
            rec.run_id = Some(run_id);
            rec.step = Some(step);
        }
        rec.layers = session_layers_json(out);
        rec.network = egress.posture.into();
        rec.allow_hosts = egress.allow_hosts.clone();
        rec.egress_denied_reported = egress.report.refusals;
        rec.egress_admitted_reported = egress.report.admitted;
        rec.egress_denied_hosts_reported = egress.report.refused_hosts.clone();
        rec.env_names = self.env_names();
        rec.masked_paths = self.masked();
        rec.exit_code = out.exit_code;
        rec.signal = out.signal;
        rec.duration_ms = self.duration_ms();
        rec.cap_hit = self.cap_hit();
        rec
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::EgressRecord;
    use crate::sandbox::{Backend, Cap, RunSpec, SandboxOutcome};

    fn outcome(cap_hit: Option<Cap>, enforced: Vec<Cap>) -> SandboxOutcome {
        let mut layers = crate::sandbox::LayerReport::default();
        layers.limits.enforced = enforced;
        let mut out = SandboxOutcome::new(Backend::PortableFloor, layers);
        out.signal = Some(9);
        out.cap_hit = cap_hit;
        out.duration = std::time::Duration::from_millis(1500);
        out
    }

    /// Issue 15: a setuid sweep that could not walk part of the workspace is in the
    /// session's record (row and audit line), not only in a log line.
    #[test]
    fn an_incomplete_setuid_sweep_is_on_record() {
        let spec = RunSpec::new(["true"], "/ws");
        let egress = EgressRecord {
            posture: "none",
            allow_hosts: Vec::new(),
            report: crate::egress::EgressReport::default(),
        };
        let mut out = outcome(None, Vec::new());
        out.setuid_cleared = vec!["/ws/sh".into()];
        out.setuid_incomplete = vec!["/ws/locked".into()];
        let facts = SessionFacts {
            run_id: 1,
            step: 1,
            purpose: "tool",
            workdir: std::path::Path::new("/ws"),
            spec: &spec,
            out: &out,
            egress: &egress,
        };
        let row: Value = serde_json::from_str(&facts.row().layers_json).unwrap();
        assert_eq!(row["setuid"]["cleared"], json!(["/ws/sh"]));
        assert_eq!(row["setuid"]["incomplete"], json!(["/ws/locked"]));
        let line = facts.audit_line(None);
        assert_eq!(line.layers["setuid"], row["setuid"]);
    }

    #[test]
    fn the_row_and_the_audit_line_say_the_same_and_only_what_was_enforced() {
        let mut spec = RunSpec::new(["cargo", "test"], "/ws");
        spec.env = vec![("RUST_LOG".into(), "secret-value".into())];
        let egress = EgressRecord {
            posture: "allowlist",
            allow_hosts: vec!["crates.io:443".into()],
            report: crate::egress::EgressReport {
                refusals: Some(2),
                admitted: Some(0),
                refused_hosts: vec!["evil.test".into()],
            },
        };
        let out = outcome(Some(Cap::Wall), vec![Cap::Wall]);
        let facts = SessionFacts {
            run_id: 7,
            step: 3,
            purpose: "mcp",
            workdir: std::path::Path::new("/ws"),
            spec: &spec,
            out: &out,
            egress: &egress,
        };
        let (row, line) = (facts.row(), facts.audit_line(Some((7, 3))));
        assert_eq!((row.run_id, row.step, row.purpose.as_str()), (7, 3, "mcp"));
        assert_eq!((line.run_id, line.step), (Some(7), Some(3)));
        assert_eq!(row.cap_hit.as_deref(), Some("wall"));
        assert_eq!(line.cap_hit, row.cap_hit);
        assert_eq!(
            (row.network.as_str(), line.network.as_str()),
            ("allowlist", "allowlist")
        );
        assert_eq!(line.allow_hosts, ["crates.io:443"]);
        assert_eq!(row.egress_refusals_reported, Some(2));
        assert_eq!(line.egress_denied_reported, Some(2));
        assert_eq!(
            row.egress_admitted_reported,
            Some(0),
            "observed zero stays zero"
        );
        assert_eq!(row.duration_ms, 1500);
        assert_eq!(line.duration_ms, 1500);
        assert!(row.env_names_json.contains("RUST_LOG") && !row.env_names_json.contains("secret"));
        assert_eq!(line.env_names, ["RUST_LOG"]);

        // A cap the backend did not enforce is never reported hit.
        let out = outcome(Some(Cap::Memory), vec![Cap::Wall]);
        let facts = SessionFacts { out: &out, ..facts };
        assert_eq!(facts.row().cap_hit, None);
        assert_eq!(facts.audit_line(None).cap_hit, None);
        assert_eq!(
            facts.audit_line(None).run_id,
            None,
            "no store, no run named"
        );
    }

    /// Every cap label and every cap state reaches the record, and a cap nothing
    /// outside can observe is recorded as such, never as `not_hit`.
    #[test]
    fn every_cap_label_and_state_is_recorded() {
        use crate::sandbox::CapState;
        let all = [
            (Cap::Cpu, "cpu"),
            (Cap::Memory, "memory"),
            (Cap::Wall, "wall"),
            (Cap::Processes, "processes"),
            (Cap::OpenFiles, "open_files"),
            (Cap::Output, "output"),
            (Cap::Disk, "disk"),
        ];
        let mut out = outcome(Some(Cap::Disk), all.iter().map(|(c, _)| *c).collect());
        out.layers.limits.unobservable = vec![Cap::OpenFiles, Cap::Processes];
        out.caps = all
            .iter()
            .map(|(c, _)| {
                let s = match c {
                    Cap::Disk => CapState::Hit,
                    Cap::OpenFiles | Cap::Processes => CapState::NotObservable,
                    _ => CapState::NotHit,
                };
                (*c, s)
            })
            .collect();
        let spec = RunSpec::new(["true"], "/ws");
        let egress = EgressRecord {
            posture: "none",
            allow_hosts: vec![],
            report: crate::egress::EgressReport::default(),
        };
        let facts = SessionFacts {
            run_id: 1,
            step: 1,
            purpose: "tool",
            workdir: std::path::Path::new("/ws"),
            spec: &spec,
            out: &out,
            egress: &egress,
        };
        let row = facts.row();
        assert_eq!(row.cap_hit.as_deref(), Some("disk"));
        let layers: Value = serde_json::from_str(&row.layers_json).unwrap();
        for (_, label) in all {
            assert!(
                layers["limits"]["enforced"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|v| v == label),
                "{label}"
            );
        }
        let caps = &layers["limits"]["caps"];
        assert_eq!(caps["disk"], "hit");
        assert_eq!(caps["cpu"], "not_hit");
        assert_eq!(caps["processes"], "not_observable");
        assert_eq!(caps["open_files"], "not_observable");
        assert_eq!(
            layers["limits"]["unobservable"],
            serde_json::json!(["open_files", "processes"])
        );
        assert_eq!(facts.audit_line(None).layers, layers);
        let limits: Value = serde_json::from_str(&row.limits_json).unwrap();
        assert_eq!(limits["disk_bytes"], Value::from(8u64 << 30));
    }
}
