//! One tool call of a step: journaled, dispatched through the policy, recorded.

use super::approval::{AskAnswer, describe};
use super::environment::policy_event;
use super::journal::{JournalAction, file_hash};
use super::{HALT_GRACE, Session, StepEnd, halted};
use crate::policy::{Action, Decision, PolicyDecision, Remember};
use crate::provider::{Completion, ContentBlock};
use crate::run::events::RunEvent;
use crate::store::{PolicyEvent, ToolCallRecord, ToolIntent};
use crate::tools::FileEffect;

impl Session<'_> {
    /// Journals, dispatches and records one tool call.
    pub(super) async fn call_tool(
        &mut self,
        step: u32,
        id: &str,
        name: &str,
        input: &serde_json::Value,
        reply: &Completion,
        refusal: Option<String>,
    ) -> Result<
        (
            ContentBlock,
            ToolCallRecord,
            Vec<PolicyEvent>,
            Vec<FileEffect>,
        ),
        StepEnd,
    > {
        let target = ["path", "pattern"]
            .iter()
            .find_map(|k| input.get(k).and_then(|v| v.as_str()).map(str::to_string));
        self.emit(RunEvent::ToolCalled {
            run_id: self.run.id,
            step,
            name: name.to_string(),
            target,
        });
        // Arguments over the bound are not stored either: the record says what they were.
        let input_json = serde_json::to_string(input).unwrap_or_default();
        let bound = self.run.contract.tools.max_argument_bytes;
        let input_json = if input_json.len() as u64 > bound {
            let n = input_json.len();
            serde_json::json!({ "not_stored": format!("{n} bytes of arguments, over the {bound} of [tools] max_argument_bytes") })
                .to_string()
        } else {
            input_json
        };
        let early = refusal.or_else(|| crate::provider::invalid_call::feedback(name, input));
        let dispatched = if let Some(text) = early {
            crate::tools::Dispatched::refused(text)
        } else if name == crate::tools::SPAWN_AGENT {
            self.spawn_agent(step, id, input, reply).await?
        } else if let Some(done) = self.answered_by_journal(id, name, &input_json) {
            done
        } else {
            self.dispatch_asking(step, id, name, input, &input_json, reply)
                .await?
        };
        let mut events = Vec::new();
        for pd in &dispatched.decisions {
            self.emit_decision(step, pd);
            events.push(policy_event(self.run.id, step, pd));
        }
        self.emit(RunEvent::ToolFinished {
            run_id: self.run.id,
            step,
            name: name.to_string(),
            is_error: dispatched.is_error,
            duration_ms: dispatched.duration_ms,
            status: (name == "run_command"
                && dispatched
                    .decisions
                    .iter()
                    .all(|d| d.decision == Decision::Allow))
            .then(|| dispatched.content.lines().next().unwrap_or("").to_string())
            .filter(|s| {
                s.starts_with("exit code")
                    || s.starts_with("killed by")
                    || s.starts_with("ended without")
            }),
        });
        let record = ToolCallRecord {
            call_id: id.to_string(),
            name: name.to_string(),
            input_json,
            output: dispatched.content.clone(),
            is_error: dispatched.is_error,
            confinement_refusal: dispatched.confinement_refusal.clone(),
            duration_ms: dispatched.duration_ms,
        };
        // What an MCP server answers is the server's text: framed as untrusted, unless
        // the harness refused the call (then the text is the harness's own).
        let refused = dispatched
            .decisions
            .iter()
            .any(|d| d.decision != Decision::Allow);
        let content = if name.starts_with("mcp__") && !refused {
            let source = format!("tool {name}");
            self.conversation
                .boundary
                .frame(&source, &dispatched.content)
        } else {
            dispatched.content
        };
        let block = ContentBlock::ToolResult {
            tool_use_id: id.to_string(),
            content,
            is_error: dispatched.is_error,
        };
        Ok((block, record, events, dispatched.effects))
    }

    /// Dispatches a call through the policy; an action the policy asks about is put
    /// to the approver (or deferred), and the call then runs with it approved or is
    /// refused with the operator's reason.
    async fn dispatch_asking(
        &mut self,
        step: u32,
        id: &str,
        name: &str,
        input: &serde_json::Value,
        input_json: &str,
        reply: &Completion,
    ) -> Result<crate::tools::Dispatched, StepEnd> {
        let mut d = self.journaled_dispatch(step, id, name, input, &[]).await?;
        if !d.asked.is_empty() {
            let asked = std::mem::take(&mut d.asked);
            match self
                .resolve_ask(step, id, name, input, input_json, &asked, reply)
                .await
                .map_err(StepEnd::Outcome)?
            {
                AskAnswer::Approved {
                    input: approved_input,
                    remember,
                } => {
                    for a in &asked {
                        match remember {
                            Remember::No => {}
                            Remember::Exact => {
                                self.tools.policy.gate.remember(a);
                            }
                            Remember::Program => {
                                self.tools.policy.gate.remember_program(a);
                            }
                        }
                    }
                    let first = std::mem::take(&mut d.decisions);
                    d = self
                        .journaled_dispatch(step, id, name, &approved_input, &asked)
                        .await?;
                    d.decisions.splice(0..0, first);
                }
                AskAnswer::Denied(reason) => {
                    d.content = format!(
                        "refused: the operator denied {}: {reason}",
                        describe(&asked)
                    );
                    d.decisions.extend(asked.iter().map(|a| PolicyDecision {
                        action: a.clone(),
                        decision: Decision::Deny,
                        rule: "denied by approver".into(),
                        layer: "approval".into(),
                    }));
                }
            }
        }
        Ok(d)
    }

    /// Journals (when the call can change something), dispatches with `approved`
    /// actions under the run's halt, and completes the journal entry with the result.
    /// An intent that cannot be written (a full disk) stops the run before the call: a
    /// change without its intent on record could be applied twice by a resume. A call
    /// the halt cuts off (a command stopped, an MCP call dropped) stays journaled as
    /// `uncertain` and ends the step uncommitted: a resume tells the model it was
    /// interrupted instead of running it again.
    pub(super) async fn journaled_dispatch(
        &self,
        step: u32,
        id: &str,
        name: &str,
        input: &serde_json::Value,
        approved: &[Action],
    ) -> Result<crate::tools::Dispatched, StepEnd> {
        let ws = &self.tools.ctx.workspace;
        let input_json = serde_json::to_string(input).unwrap_or_default();
        let actions: Vec<JournalAction> = self
            .opts
            .tools
            .get(name)
            .and_then(|t| t.plan(&self.tools.ctx, input).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|a| {
                let write = a.act == crate::policy::Act::Write;
                JournalAction {
                    before: write.then(|| file_hash(ws, &a.target)).flatten(),
                    temp: write
                        .then(|| ws.confined().temp_path_for(&a.target).ok())
                        .flatten(),
                    act: a.act,
                    target: a.target,
                }
            })
            .collect();
        // A command or an MCP call: what it does cannot be reconciled from the files.
        let opaque = actions
            .iter()
            .any(|a| !matches!(a.act, crate::policy::Act::Read | crate::policy::Act::Write));
        // Only calls that can change something need an intent on record: a read
        // replayed after a crash does no harm, and skipping its two journal writes is
        // most of a read step's bookkeeping.
        let effectful = actions.iter().any(|a| a.act != crate::policy::Act::Read);
        let intent_id = match effectful {
            true => Some(
                self.store
                    .journal_intent(ToolIntent {
                        run_id: self.run.id,
                        step,
                        call_id: id.to_string(),
                        tool: name.to_string(),
                        input_json,
                        actions_json: serde_json::to_string(&actions).unwrap_or_default(),
                    })
                    .await
                    .map_err(StepEnd::Store)?,
            ),
            false => None,
        };
        let dispatch = self.opts.tools.dispatch_approved(
            &self.tools.ctx,
            self.tools.policy.gate.as_ref(),
            name,
            input,
            approved,
        );
        let ran = self.halt.guard_with_grace(dispatch, HALT_GRACE).await;
        crate::failpoint::hit("tool.after_apply", step);
        let d = match ran {
            Ok(d) if !(opaque && self.halt.reached_now().is_some()) => d,
            // Cut off: a command the halt stopped, or a call dropped after the grace.
            cut => {
                let why = cut.err().or(self.halt.reached_now());
                if let Some(iid) = intent_id {
                    self.store
                        .journal_uncertain(iid)
                        .await
                        .map_err(StepEnd::Store)?;
                }
                return Err(StepEnd::Outcome(halted(
                    why.unwrap_or(crate::halt::HaltReason::Cancelled),
                )));
            }
        };
        if let Some(iid) = intent_id {
            if !d.asked.is_empty() {
                // It did not run: the policy asked. The approved dispatch journals anew.
                self.store
                    .journal_discard(iid)
                    .await
                    .map_err(StepEnd::Store)?;
                return Ok(d);
            }
            // A completion that cannot be written is no reason to stop: a resume
            // reconciles the call from the intent's before-hashes, as after a crash.
            let effects = serde_json::to_string(&d.effects).unwrap_or_default();
            if let Err(e) = self
                .store
                .journal_complete(iid, !d.is_error, effects, d.content.clone())
                .await
            {
                tracing::warn!(run_id = self.run.id, step, error = %e, "could not complete a journal entry");
            }
        }
        Ok(d)
    }
}
