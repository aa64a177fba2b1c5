//! The verification phase of a step: the contract's criteria checked against the
//! workspace, failed gate phases on record, the counters updated, the report for the
//! model.

use super::Session;
use crate::halt::HaltReason;
use crate::provider::ContentBlock;
use crate::run::events::RunEvent;
use crate::store::SandboxEvent;
use crate::verify;

impl Session<'_> {
    /// Checks the criteria; a failure's observation goes into `results` for the
    /// model. Returns whether they passed, or — when the halt came while a gate ran
    /// and they did not pass — why the gate was stopped: a stopped gate is no
    /// verdict, and counts as no failed attempt.
    pub(super) async fn verify(
        &mut self,
        step: u32,
        results: &mut Vec<ContentBlock>,
    ) -> Result<bool, HaltReason> {
        crate::failpoint::hit("verify.before", step);
        // A sub-agent's criteria were written by its parent's model: the files they
        // read are judged like its reads (a link made after the spawn included).
        let reads = match self.run.depth {
            0 => None,
            _ => self.tools.ctx.read_gate.as_deref(),
        };
        let report = verify::check_judged(
            &self.run.contract.verify.criteria,
            &self.tools.ctx.workspace,
            self.tools.ctx.exec.as_deref(),
            reads,
        )
        .await;
        if !report.passed()
            && let Some(why) = self.halt.reached_now()
        {
            return Err(why);
        }
        let mut events = Vec::new();
        for r in &report.results {
            let id = self.run.id;
            for what in &r.restored {
                events.push(SandboxEvent::criterion_restored(id, step, &r.label, what));
            }
            if let Some(trust) = r.trust {
                events.push(SandboxEvent::gate_trust(id, step, &r.label, trust.label()));
            }
            if let Some(tally) = &r.tests {
                let tally = tally.to_string();
                events.push(SandboxEvent::gate_tests(id, step, &r.label, &tally));
            }
        }
        for r in report.results.iter().filter(|r| !r.passed) {
            if let Some(phase) = r.phase {
                events.push(SandboxEvent::gate_phase_failed(self.run.id, step, phase));
            } else if let Some(out) = &r.output {
                // A Rust gate's compiler output quotes the agent's file: it goes to
                // the model only, and the record gets the phase.
                let detail = format!("{}\n{}", r.label, out);
                events.push(SandboxEvent::gate_output(self.run.id, step, &detail));
            }
        }
        self.store.record_sandbox_events(events).await;
        let passed = report.passed();
        let state = &mut self.progress.state;
        if passed {
            state.failing.clear();
        } else {
            state.verify_failures += 1;
            state.failing = report.failed_labels();
        }
        self.emit(RunEvent::Verified {
            run_id: self.run.id,
            step,
            passed,
            failed: self.progress.state.failing.clone(),
            attempt: self.progress.state.verify_failures,
        });
        if !passed {
            results.push(ContentBlock::Text {
                text: report.observation(&self.conversation.boundary),
            });
        }
        // What the checks after the gates' sessions did (an entry moved out).
        for text in self.tools.ctx.exec.iter().flat_map(|e| e.take_notices()) {
            results.push(ContentBlock::Text { text });
        }
        Ok(passed)
    }
}
