//! Recording what the servers of one run do: `mcp_events`, sandbox events and
//! sessions, and the policy decisions taken at start.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::policy::PolicyDecision;
use crate::sandbox::RunSpec;
use crate::store::{McpEvent, PolicyEvent, SandboxEvent, Store};

/// Records events for one run; the step moves as the run goes.
pub(super) struct Recorder {
    store: Option<Store>,
    run_id: i64,
    step: AtomicU32,
    audit: Option<crate::audit::AuditLog>,
}

impl Recorder {
    pub(super) fn new(
        store: Option<Store>,
        run_id: i64,
        step: u32,
        audit: Option<crate::audit::AuditLog>,
    ) -> Self {
        Self {
            store,
            run_id,
            step: AtomicU32::new(step),
            audit,
        }
    }

    fn step(&self) -> u32 {
        self.step.load(Ordering::SeqCst)
    }

    /// Events from now on belong to `step`.
    pub(super) fn set_step(&self, step: u32) {
        self.step.store(step, Ordering::SeqCst);
    }

    pub(super) fn mcp(&self, make: impl FnOnce(i64, u32) -> McpEvent) {
        if let Some(s) = &self.store
            && let Err(e) = s.record_mcp_event(&make(self.run_id, self.step()))
        {
            s.note_lost(Some(self.run_id), "MCP event", &e);
        }
    }

    pub(super) fn sandbox(&self, make: impl FnOnce(i64, u32) -> SandboxEvent) {
        if let Some(s) = &self.store
            && let Err(e) = s.record_sandbox_event(&make(self.run_id, self.step()))
        {
            s.note_lost(Some(self.run_id), "sandbox event", &e);
        }
    }

    /// The sandbox session of a server that ended, like a command's: a
    /// `sandbox_sessions` row (purpose `mcp`) and an audit line. A write that fails is
    /// noted on the store (the run stops at its next commit); the audit log only warns
    /// and counts.
    pub(super) fn session(
        &self,
        spec: &RunSpec,
        out: &crate::sandbox::SandboxOutcome,
        proxy: Option<&crate::egress::EgressProxy>,
    ) {
        let step = self.step();
        let egress = crate::exec::EgressRecord::of(spec, out, proxy);
        let facts = crate::exec::SessionFacts {
            run_id: self.run_id,
            step,
            purpose: "mcp",
            workdir: &spec.workdir,
            spec,
            out,
            egress: &egress,
        };
        if let Some(s) = &self.store
            && let Err(e) = s.record_sandbox_session(&facts.row())
        {
            s.note_lost(Some(self.run_id), "MCP sandbox session", &e);
        }
        if let Some(log) = &self.audit {
            let run = self.store.as_ref().map(|_| (self.run_id, step));
            let line = facts.audit_line(run);
            match &self.store {
                Some(s) => crate::exec::append_audit(s, Some(self.run_id), log, &line),
                // No record to count the failure in (`mcp list`): the warning is all.
                None => {
                    if let Err(e) = log.append(&line) {
                        log.warn_once(&e);
                    }
                }
            }
        }
    }

    pub(super) fn policy(&self, d: &PolicyDecision) {
        if let Some(s) = &self.store
            && let Err(e) = s.record_policy_event(&PolicyEvent {
                run_id: self.run_id,
                step: self.step(),
                act: d.action.act.as_str().into(),
                target: d.action.target.clone(),
                decision: d.decision.as_str().into(),
                rule: d.rule.clone(),
                layer: d.layer.clone(),
            })
        {
            s.note_lost(Some(self.run_id), "policy event", &e);
        }
    }
}
