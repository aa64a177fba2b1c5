//! The loop and one step of it, phase by phase: the budget check before the step,
//! then the model's reply, its tool calls, the stall check, verification, the commit,
//! and the decision whether the run goes on.
//!
//! The order of the phases is the order of a step's effects and store writes, which
//! the crash tests pin with failpoints (`step.after_reply`, `step.after_tools`,
//! `verify.before`, `step.before_commit`, `step.after_commit`). A step is two commits:
//! the model's reply goes on record as soon as it arrives, before any tool runs, and
//! the step (its results, usage and counters) at `commit`. A session cut off between
//! the two resumes by replaying that reply, never by asking the model again; the
//! intent journal says which of its calls already ran.
//!
//! Every wait of a step observes the session's [`crate::halt::Halt`]: the model call,
//! each tool call (a command is stopped at once), the gates and an approval prompt.
//! A halted step is not committed; the run ends `Cancelled` or `TimeBudgetExceeded`.

use std::time::Instant;

use super::{Replay, Session, StepEnd, halted, ms, now_ms};
use crate::policy::PolicyDecision;
use crate::provider::{Completion, CompletionRequest, ContentBlock, ThinkingSettings};
use crate::run::budget;
use crate::run::events::RunEvent;
use crate::run::outcome::RunOutcome;
use crate::run::stall::{SeenCall, StallVerdict};
use crate::run::{RunError, RunResult};
use crate::store::{PolicyEvent, StoredReply, ToolCallRecord};
use crate::tools::FileEffect;

/// How often a running session puts its wall time on record.
const HEARTBEAT: std::time::Duration = std::time::Duration::from_millis(250);

/// Aborts a background task when dropped (the session's heartbeat ends with it).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// When a step started: its number and its clocks.
pub(super) struct StepClock {
    pub step: u32,
    pub started: Instant,
    pub started_at_ms: i64,
}

/// The model's turn of a step.
pub(super) struct ModelTurn {
    pub reply: Completion,
    /// Which provider of the chain answered (or that the reply was replayed).
    pub served_by: Option<String>,
    pub model_ms: u64,
    /// `(id, name, input)` of each tool call, in the reply's order.
    pub calls: Vec<(String, String, serde_json::Value)>,
}

/// What the step's tool calls produced.
#[derive(Default)]
pub(super) struct ToolRound {
    /// Tool results, then any observations (a replan, a verification report, resume
    /// notes), for the message that answers the reply.
    pub results: Vec<ContentBlock>,
    pub records: Vec<ToolCallRecord>,
    pub policy_events: Vec<PolicyEvent>,
    pub effects: Vec<Vec<FileEffect>>,
}

impl Session<'_> {
    pub(in crate::run) async fn drive(mut self) -> Result<RunResult, RunError> {
        let _heartbeat = self.heartbeat();
        self.begin_session().await;
        self.save_policy().await;
        self.emit(RunEvent::RunStarted {
            run_id: self.run.id,
            goal: self.run.contract.goal.clone(),
            work_dir: self.run.dirs.work.display().to_string(),
            resumed: self.run.resumed,
        });
        let outcome = loop {
            if let Some(o) = self.stop_before_step() {
                break o;
            }
            match self.step().await {
                Ok(Some(o)) => break o,
                Ok(None) => {}
                Err(StepEnd::Outcome(o)) => break o,
                Err(StepEnd::Store(e)) => return Err(e.into()),
            }
        };
        self.keep_elapsed().await;
        self.finish(outcome).await
    }

    /// Keeps the run's wall time on record every quarter second while the session runs, so a
    /// session killed between two commits hands its time on to the resume. Stops when
    /// the returned guard drops.
    fn heartbeat(&self) -> AbortOnDrop {
        let (store, run_id) = (self.store.clone(), self.run.id);
        let (earlier, started) = (self.progress.earlier, self.progress.session_start);
        AbortOnDrop(tokio::spawn(async move {
            let mut tick = tokio::time::interval(HEARTBEAT);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let ms = ms(earlier + started.elapsed());
                if let Err(e) = store.call(move |s| s.set_run_elapsed(run_id, ms)).await {
                    tracing::debug!(run_id, error = %e, "could not keep the run's wall time");
                }
            }
        }))
    }

    /// Puts this session's start on record (a trace has one span per session); a
    /// store that cannot take it costs the trace its session span, never the run.
    async fn begin_session(&mut self) {
        let (run_id, at) = (self.run.id, super::now_ms());
        match self
            .store
            .call(move |s| s.begin_run_session(run_id, at))
            .await
        {
            Ok(n) => self.progress.ordinal = Some(n),
            Err(e) => tracing::warn!(run_id, error = %e, "could not record the session's start"),
        }
    }

    /// The run's wall time on record now (at the end of a session, however it ends).
    async fn keep_elapsed(&self) {
        let (run_id, ms) = (self.run.id, ms(self.elapsed()));
        if let Err(e) = self
            .store
            .call(move |s| s.set_run_elapsed(run_id, ms))
            .await
        {
            tracing::warn!(run_id, error = %e, "could not keep the run's wall time");
        }
    }

    /// Whether the run ends before another step: cancelled, a required MCP server
    /// gone, or a budget with no room for a step.
    fn stop_before_step(&self) -> Option<RunOutcome> {
        // A resumed run whose last committed step had already decided how it ends.
        if let Some(decided) = &self.progress.state.decided {
            return Some(decided.clone());
        }
        if self.opts.cancel.is_cancelled() {
            return Some(RunOutcome::Cancelled);
        }
        if let Some(server) = self.tools.mcp.as_ref().and_then(|m| m.required_failed()) {
            return Some(RunOutcome::McpRequiredServerFailed { server });
        }
        if self.opts.shared_cost.as_ref().is_some_and(|c| c.is_spent()) {
            return Some(RunOutcome::CostBudgetExceeded);
        }
        budget::before_step(
            &self.run.contract.budget,
            &self.progress.totals,
            self.elapsed(),
            &self.progress.state.failing,
        )
    }

    /// One step. `Ok(Some)` ends the run after a committed step; `Err` ends it without
    /// committing this step.
    async fn step(&mut self) -> Result<Option<RunOutcome>, StepEnd> {
        let clock = self.begin_step();
        let step = clock.step;
        let turn = self.model_turn(step).await?;
        let mut round = match self.run_tools(step, &turn).await {
            Ok(round) => round,
            Err(end) => return Err(self.uncommitted(&turn, end).await),
        };
        crate::failpoint::hit("step.after_tools", step);
        let stalled = self.check_stall(&turn, &mut round);
        let done = turn.calls.is_empty();
        let verified = if !stalled && (done || self.run.contract.verify.every_step) {
            match self.verify(step, &mut round.results).await {
                Ok(passed) => Some(passed),
                Err(why) => {
                    return Err(self.uncommitted(&turn, StepEnd::Outcome(halted(why))).await);
                }
            }
        } else {
            None
        };
        // A verdict's outcome goes on record with the step that reached it.
        self.progress.state.decided = self.verdict(stalled, verified);
        self.commit(clock, turn, round).await?;
        Ok(self.decide(stalled, verified))
    }

    /// A step that ends the run after its reply arrived but before its commit. When
    /// the run can be resumed, the resume replays the reply and commits it with its
    /// usage; when it cannot (the time budget ran out), the reply's call is closed here
    /// so its tokens are not lost to the totals: its input (reported, else estimated)
    /// and its cost count, on record as a call whose step was never committed.
    async fn uncommitted(&mut self, turn: &ModelTurn, end: StepEnd) -> StepEnd {
        if let StepEnd::Outcome(o) = &end
            && !o.is_resumable()
        {
            let lost = crate::store::LostCall {
                input_tokens: turn.reply.usage.effective_input(),
                cost_usd: turn.reply.cost.usd,
            };
            self.close_call(turn.reply.model_call, Some(&lost)).await;
        }
        end
    }

    /// Numbers the step, tells the executor and the MCP servers, starts its clocks.
    fn begin_step(&self) -> StepClock {
        let step = self.progress.totals.steps + 1;
        if let Some(e) = &self.tools.ctx.exec {
            e.set_step(step);
        }
        if let Some(m) = &self.tools.mcp {
            m.set_step(step);
        }
        let clock = StepClock {
            step,
            started: Instant::now(),
            started_at_ms: now_ms(),
        };
        self.emit(RunEvent::StepStarted {
            run_id: self.run.id,
            step,
            max_steps: self.run.contract.budget.max_steps,
        });
        clock
    }

    /// The model's reply: replayed when an interrupted session left it on record,
    /// else asked for and put on record before any of its calls runs.
    async fn model_turn(&mut self, step: u32) -> Result<ModelTurn, StepEnd> {
        let (reply, served_by, model_ms) = match self.carryover.replay.take() {
            Some(Replay {
                reply,
                served_by,
                model_ms,
            }) => (reply, served_by, model_ms),
            None => {
                let model_started = Instant::now();
                let (mut reply, served_by) = self.call_assembled(step).await?;
                let model_ms = ms(model_started.elapsed());
                if let (Some(shared), Some(usd)) = (&self.opts.shared_cost, reply.cost.usd) {
                    shared.add(usd);
                }
                // Arguments no call may carry are not kept, in the record or in the
                // conversation sent on: the record says what they were.
                shrink_oversized(&mut reply, self.run.contract.tools.max_argument_bytes);
                let kept = StoredReply {
                    reply_json: serde_json::to_string(&reply).unwrap_or_default(),
                    provider: served_by.clone(),
                    model_ms,
                };
                // Without the reply on record a resume would ask the model again and
                // could get other calls than the ones about to run.
                self.store
                    .record_reply(self.run.id, step, kept)
                    .await
                    .map_err(StepEnd::Store)?;
                (reply, served_by, model_ms)
            }
        };
        crate::failpoint::hit("step.after_reply", step);
        let calls: Vec<(String, String, serde_json::Value)> = reply
            .tool_calls()
            .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
            .collect();
        self.emit(RunEvent::ModelReplied {
            run_id: self.run.id,
            step,
            usage: reply.usage,
            cost: reply.cost,
            tool_calls: calls.len(),
            text: super::super::events::shown_text(
                &reply.text(),
                super::super::events::MODEL_TEXT_SHOWN,
            ),
        });
        Ok(ModelTurn {
            reply,
            served_by,
            model_ms,
            calls,
        })
    }

    /// Runs the reply's tool calls in order.
    async fn run_tools(&mut self, step: u32, turn: &ModelTurn) -> Result<ToolRound, StepEnd> {
        let mut round = ToolRound::default();
        let bounds = self.run.contract.tools;
        for (i, (id, name, input)) in turn.calls.iter().enumerate() {
            // A halt between calls: the calls after it never started, so a resume runs
            // them; those before are answered from the journal.
            if let Some(why) = self.halt.reached_now() {
                return Err(StepEnd::Outcome(halted(why)));
            }
            let refusal = over_bounds(&bounds, i, turn.calls.len(), input);
            let (block, record, decisions, fx) = self
                .call_tool(step, id, name, input, &turn.reply, refusal)
                .await?;
            round.results.push(block);
            round.records.push(record);
            round.policy_events.extend(decisions);
            round.effects.push(fx);
        }
        Ok(round)
    }

    /// Feeds the step's calls to the stall detector; a replan goes to the model,
    /// `true` ends the run `Stalled` once the step is committed.
    fn check_stall(&mut self, turn: &ModelTurn, round: &mut ToolRound) -> bool {
        if turn.calls.is_empty() {
            return false;
        }
        let changed = round.effects.iter().flatten().any(|f| f.before != f.after);
        let seen = SeenCall::all(&round.records);
        match self.progress.stall.observe(
            &self.run.contract.stall,
            &mut self.progress.state.stall,
            &seen,
            changed,
        ) {
            StallVerdict::Progress | StallVerdict::Idle => false,
            StallVerdict::Replan(text) => {
                round.results.push(ContentBlock::Text { text });
                false
            }
            StallVerdict::Stalled => true,
        }
    }

    /// The outcome a step's own verdict decides (not the budgets, which the commit's
    /// totals decide after it).
    fn verdict(&self, stalled: bool, verified: Option<bool>) -> Option<RunOutcome> {
        let failures = self.progress.state.verify_failures;
        match verified {
            _ if stalled => Some(RunOutcome::Stalled),
            Some(true) => Some(RunOutcome::Success),
            Some(false) if failures >= self.run.contract.verify.max_attempts => {
                Some(RunOutcome::VerificationFailed {
                    failed: self.progress.state.failing.clone(),
                })
            }
            _ => None,
        }
    }

    /// After the commit: whether the run ends here, and how.
    fn decide(&self, stalled: bool, verified: Option<bool>) -> Option<RunOutcome> {
        if stalled {
            return Some(RunOutcome::Stalled);
        }
        match verified {
            Some(true) => return Some(RunOutcome::Success),
            Some(false)
                if self.progress.state.verify_failures >= self.run.contract.verify.max_attempts =>
            {
                return Some(RunOutcome::VerificationFailed {
                    failed: self.progress.state.failing.clone(),
                });
            }
            _ => {}
        }
        budget::after_step(&self.run.contract.budget, &self.progress.totals)
    }

    /// The full request of this step, before the context budget shapes it.
    pub(super) fn request(&self) -> CompletionRequest {
        let spec = self.run.contract.providers.first();
        CompletionRequest {
            model: self.provider.identity().model,
            system: Some(self.conversation.system.clone()),
            messages: self.conversation.messages.clone(),
            tools: {
                let mut t = self.opts.tools.specs();
                if self.agents_offered() {
                    t.push(crate::tools::spawn_agent_spec());
                }
                t
            },
            max_tokens: spec.map_or(8192, |s| s.max_output_tokens),
            thinking: ThinkingSettings {
                budget_tokens: spec.and_then(|s| s.thinking_budget),
                effort: spec.and_then(|s| s.reasoning_effort),
            },
        }
    }

    /// A decision told to the observer.
    pub(super) fn emit_decision(&self, step: u32, d: &PolicyDecision) {
        self.emit(RunEvent::PolicyDecision {
            run_id: self.run.id,
            step,
            act: d.action.act.as_str().into(),
            target: d.action.target.clone(),
            decision: d.decision.as_str().into(),
            layer: d.layer.clone(),
        });
    }
}

/// The key of the object that stands in for arguments over `[tools]
/// max_argument_bytes` in a reply as kept.
const NOT_STORED: &str = "not_stored";

/// Replaces each tool call's arguments over `bound` bytes with a short object saying
/// how large they were: a reply is kept for resume and sent back to the model with
/// every later request, so arguments kept whole would grow the store and every request
/// by their size each step, though the call never runs.
fn shrink_oversized(reply: &mut crate::provider::Completion, bound: u64) {
    for block in &mut reply.content {
        if let crate::provider::ContentBlock::ToolUse { input, .. } = block {
            let size = serde_json::to_string(input).map_or(0, |s| s.len()) as u64;
            if size > bound {
                *input = serde_json::json!({
                    NOT_STORED: format!("{size} bytes of arguments, over the {bound} of [tools] max_argument_bytes")
                });
            }
        }
    }
}

/// Why a call is not run: past the calls one reply may make, or arguments larger than
/// one call may carry (`[tools]`). The model is told, the call is never dropped.
fn over_bounds(
    bounds: &crate::contract::ToolSettings,
    index: usize,
    calls: usize,
    input: &serde_json::Value,
) -> Option<String> {
    let max_calls = bounds.max_calls_per_reply as usize;
    if index >= max_calls {
        return Some(format!(
            "not run: this reply made {calls} tool calls and at most {max_calls} run per reply ([tools] max_calls_per_reply); ask for the rest in your next reply"
        ));
    }
    if let Some(said) = input.get(NOT_STORED).and_then(|v| v.as_str())
        && input.as_object().is_some_and(|o| o.len() == 1)
    {
        return Some(format!(
            "not run: {said}; split the work into smaller calls"
        ));
    }
    let size = serde_json::to_string(input).map_or(0, |s| s.len()) as u64;
    (size > bounds.max_argument_bytes).then(|| {
        format!(
            "not run: the arguments are {size} bytes and one call may carry at most {} ([tools] max_argument_bytes); split the work into smaller calls",
            bounds.max_argument_bytes
        )
    })
}
