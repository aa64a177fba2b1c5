//! The step engine: owns a run's state and drives it to an outcome.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::budget::{self, Totals};
use super::events::{Flow, RunEvent};
use super::outcome::RunOutcome;
use super::prompt;
use super::stall::{SeenCall, StallDetector, StallVerdict};
use super::state::LoopState;
use super::workdir::{self, WorkDirs};
use super::{RunError, RunOptions, RunResult};
use crate::contract::{TaskContract, WorkspaceMode};
use crate::provider::{
    Completion, CompletionRequest, ContentBlock, Message, Provider, ProviderIdentity, Role,
    ThinkingSettings,
};
use crate::store::{
    NewRun, PolicyEvent, RunFinish, SandboxEvent, StepRecord, Store, ToolCallRecord, ToolIntent,
};
use crate::tools::{FileEffect, ToolContext, ToolLimits, Workspace};
use crate::verify;

/// A file write of an interrupted step that had already been applied.
struct AppliedIntent {
    tool: String,
    input_json: String,
    effects: Vec<FileEffect>,
}

/// Why a step ended the run without being committed.
enum StepEnd {
    /// An outcome reached before the commit (cancel, time, provider failure).
    Outcome(RunOutcome),
    /// The store refused the commit.
    Store(crate::store::StoreError),
}

pub(super) struct Engine<'a> {
    contract: TaskContract,
    provider: &'a dyn Provider,
    store: &'a Store,
    opts: RunOptions,
    run_id: i64,
    dirs: WorkDirs,
    ctx: ToolContext,
    system: String,
    messages: Vec<Message>,
    totals: Totals,
    state: LoopState,
    session_start: Instant,
    resumed: bool,
    applied: Vec<AppliedIntent>,
    stall: StallDetector,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn workspace_err(path: &std::path::Path, source: std::io::Error) -> RunError {
    RunError::Workspace {
        path: path.display().to_string(),
        source,
    }
}

/// A cost budget needs a known price for the model that actually answers.
fn check_price(contract: &TaskContract, id: &ProviderIdentity) -> Result<(), RunError> {
    let mut spec = crate::contract::ProviderSpec::new(match id.kind.as_str() {
        "openai" => crate::contract::ProviderKind::Openai,
        "anthropic" => crate::contract::ProviderKind::Anthropic,
        _ => return Ok(()),
    });
    spec.model = Some(id.model.clone());
    crate::contract::check_cost_price(contract, &spec, &contract.price_table())
        .map_err(|(key, message)| crate::contract::ContractError::Field { key, message }.into())
}

impl<'a> Engine<'a> {
    pub(super) async fn start(
        contract: &TaskContract,
        provider: &'a dyn Provider,
        store: &'a Store,
        opts: RunOptions,
    ) -> Result<Self, RunError> {
        let mut contract = contract.clone();
        contract.validate()?;
        contract.resolve_root()?;
        let identity = provider.identity();
        check_price(&contract, &identity)?;
        store.redact_secrets(&provider.secrets());
        let dirs = workdir::prepare(&contract.root, contract.workspace)
            .map_err(|e| workspace_err(&contract.root, e))?;
        let ws = Workspace::open(&dirs.work).map_err(|e| workspace_err(&dirs.work, e))?;
        let contract_json = serde_json::to_string(&contract).map_err(|e| RunError::Corrupt {
            run_id: 0,
            what: "contract",
            message: e.to_string(),
        })?;
        let run_id = store.create_run(&NewRun {
            goal: contract.goal.clone(),
            root: contract.root.display().to_string(),
            work_dir: dirs.work.display().to_string(),
            contract_json,
            provider_json: serde_json::to_string(&identity).unwrap_or_default(),
            parent_run_id: None,
            scratch_dir: Some(dirs.scratch.display().to_string()),
        })?;
        let ctx = ToolContext {
            workspace: Arc::new(ws),
            limits: ToolLimits::default(),
        };
        let first = prompt::first_message(&contract, &ctx.workspace);
        Ok(Self {
            contract,
            provider,
            store,
            opts,
            run_id,
            dirs,
            ctx,
            system: prompt::system_prompt(),
            messages: vec![Message::user(first)],
            totals: Totals::default(),
            state: LoopState::default(),
            session_start: Instant::now(),
            resumed: false,
            applied: Vec::new(),
            stall: StallDetector::default(),
        })
    }

    pub(super) async fn reopen(
        store: &'a Store,
        run_id: i64,
        provider: &'a dyn Provider,
        given: Option<&TaskContract>,
        opts: RunOptions,
    ) -> Result<Self, RunError> {
        let rec = store.run(run_id)?.ok_or(RunError::NoSuchRun(run_id))?;
        let contract = super::stored_contract(store, run_id)?;
        if let Some(given) = given {
            let mut g = given.clone();
            // The stored contract has its root resolved; compare like with like.
            if g.resolve_root().is_err() || g != contract {
                return Err(RunError::ContractMismatch { run_id });
            }
        }
        if rec.status == "finished" {
            let outcome: Option<RunOutcome> = rec
                .outcome_json
                .as_deref()
                .and_then(|j| serde_json::from_str(j).ok());
            if !outcome.as_ref().is_some_and(RunOutcome::is_resumable) {
                return Err(RunError::NotResumable {
                    run_id,
                    reason: format!(
                        "it finished with outcome {}",
                        rec.outcome.as_deref().unwrap_or("unknown")
                    ),
                });
            }
        }
        check_price(&contract, &provider.identity())?;
        store.redact_secrets(&provider.secrets());
        let scratch = rec
            .scratch_dir
            .as_deref()
            .map(PathBuf::from)
            .ok_or_else(|| RunError::NotResumable {
                run_id,
                reason: "it has no scratch directory on record".into(),
            })?;
        let dirs = workdir::reattach(&contract.root, contract.workspace, &scratch);
        let ws = Workspace::open(&dirs.work).map_err(|e| workspace_err(&dirs.work, e))?;
        let ctx = ToolContext {
            workspace: Arc::new(ws),
            limits: ToolLimits::default(),
        };
        let steps = store.steps(run_id)?;
        let mut messages = vec![Message::user(prompt::first_message(
            &contract,
            &ctx.workspace,
        ))];
        for s in &steps {
            let added: Vec<Message> =
                serde_json::from_str(&s.messages_json).map_err(|e| RunError::Corrupt {
                    run_id,
                    what: "step messages",
                    message: e.to_string(),
                })?;
            messages.extend(added);
        }
        let state: LoopState = match steps.last() {
            Some(s) => serde_json::from_str(&s.state_json).map_err(|e| RunError::Corrupt {
                run_id,
                what: "step state",
                message: e.to_string(),
            })?,
            None => LoopState::default(),
        };
        let next_step = u32::try_from(steps.len()).unwrap_or(u32::MAX) + 1;
        let applied = store
            .journal(run_id)?
            .into_iter()
            .filter(|j| j.intent.step == next_step && j.status == "done")
            .filter_map(|j| {
                let effects: Vec<FileEffect> =
                    serde_json::from_str(j.effects_json.as_deref()?).ok()?;
                Some(AppliedIntent {
                    tool: j.intent.tool,
                    input_json: j.intent.input_json,
                    effects,
                })
            })
            .collect();
        let mut stall = StallDetector::default();
        for s in &steps {
            let seen: Vec<SeenCall<'_>> = s
                .tool_calls
                .iter()
                .map(|c| SeenCall {
                    name: &c.name,
                    input_json: &c.input_json,
                    output: &c.output,
                })
                .collect();
            stall.remember(&seen);
        }
        store.reopen_run(run_id)?;
        Ok(Self {
            stall,
            totals: Totals::from_steps(&steps),
            contract,
            provider,
            store,
            opts,
            run_id,
            dirs,
            ctx,
            system: prompt::system_prompt(),
            messages,
            state,
            session_start: Instant::now(),
            resumed: true,
            applied,
        })
    }

    fn emit(&self, event: RunEvent) {
        if let Some(o) = &self.opts.observer
            && o.on_event(&event) == Flow::Cancel
        {
            self.opts.cancel.cancel();
        }
    }

    fn elapsed(&self) -> Duration {
        Duration::from_millis(self.state.elapsed_ms) + self.session_start.elapsed()
    }

    fn request(&self) -> CompletionRequest {
        let spec = self.contract.providers.first();
        CompletionRequest {
            model: self.provider.identity().model,
            system: Some(self.system.clone()),
            messages: self.messages.clone(),
            tools: self.opts.tools.specs(),
            max_tokens: spec.map_or(8192, |s| s.max_output_tokens),
            thinking: ThinkingSettings {
                budget_tokens: spec.and_then(|s| s.thinking_budget),
                effort: spec.and_then(|s| s.reasoning_effort),
            },
        }
    }

    pub(super) async fn drive(mut self) -> Result<RunResult, RunError> {
        self.emit(RunEvent::RunStarted {
            run_id: self.run_id,
            goal: self.contract.goal.clone(),
            work_dir: self.dirs.work.display().to_string(),
            resumed: self.resumed,
        });
        let outcome = loop {
            if self.opts.cancel.is_cancelled() {
                break RunOutcome::Cancelled;
            }
            if let Some(o) = budget::before_step(
                &self.contract.budget,
                &self.totals,
                self.elapsed(),
                &self.state.failing,
            ) {
                break o;
            }
            match self.step().await {
                Ok(Some(o)) => break o,
                Ok(None) => {}
                Err(StepEnd::Outcome(o)) => break o,
                Err(StepEnd::Store(e)) => return Err(e.into()),
            }
        };
        Ok(self.finish(outcome))
    }

    /// One step. `Ok(Some)` ends the run after a committed step; `Err` ends it without
    /// committing this step.
    async fn step(&mut self) -> Result<Option<RunOutcome>, StepEnd> {
        let step = self.totals.steps + 1;
        let step_started = Instant::now();
        let started_at_ms = now_ms();
        self.emit(RunEvent::StepStarted {
            run_id: self.run_id,
            step,
            max_steps: self.contract.budget.max_steps,
        });
        let request = self.request();
        let remaining = budget::remaining(&self.contract.budget, self.elapsed());
        let call = self.provider.complete(&request);
        let model_started = Instant::now();
        let reply: Completion = tokio::select! {
            _ = self.opts.cancel.cancelled() => return Err(StepEnd::Outcome(RunOutcome::Cancelled)),
            r = async {
                match remaining {
                    Some(d) => tokio::time::timeout(d, call).await.ok(),
                    None => Some(call.await),
                }
            } => match r {
                None => return Err(StepEnd::Outcome(RunOutcome::TimeBudgetExceeded)),
                Some(Err(e)) => {
                    tracing::warn!(run_id = self.run_id, step, error = %e, "provider call failed");
                    return Err(StepEnd::Outcome(if e.kind == crate::provider::ProviderErrorKind::ContextOverflow {
                        RunOutcome::ContextOverflow
                    } else {
                        RunOutcome::Escalated { kind: e.kind, retryable: e.kind.is_retryable() }
                    }));
                }
                Some(Ok(c)) => c,
            },
        };
        let model_ms = ms(model_started.elapsed());
        let calls: Vec<(String, String, serde_json::Value)> = reply
            .tool_calls()
            .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
            .collect();
        self.emit(RunEvent::ModelReplied {
            run_id: self.run_id,
            step,
            usage: reply.usage,
            cost: reply.cost,
            tool_calls: calls.len(),
        });

        let mut added = vec![reply.to_message()];
        let mut results = Vec::new();
        let mut tool_records = Vec::new();
        let mut policy_events = Vec::new();
        let mut effects = Vec::new();
        for (id, name, input) in &calls {
            let (block, record, decisions, fx) = self.call_tool(step, id, name, input).await;
            results.push(block);
            tool_records.push(record);
            policy_events.extend(decisions);
            effects.push(fx);
        }

        crate::failpoint::hit("step.after_tools", step);
        let mut stalled = false;
        if !calls.is_empty() {
            let changed = effects.iter().flatten().any(|f| f.before != f.after);
            let seen: Vec<SeenCall<'_>> = tool_records
                .iter()
                .map(|c| SeenCall {
                    name: &c.name,
                    input_json: &c.input_json,
                    output: &c.output,
                })
                .collect();
            match self
                .stall
                .observe(&self.contract.stall, &mut self.state.stall, &seen, changed)
            {
                StallVerdict::Progress | StallVerdict::Idle => {}
                StallVerdict::Replan(text) => results.push(ContentBlock::Text { text }),
                StallVerdict::Stalled => stalled = true,
            }
        }
        let done = calls.is_empty();
        let mut verified = None;
        if !stalled && (done || self.contract.verify.every_step) {
            let report = verify::check(&self.contract.verify.criteria, &self.ctx.workspace).await;
            for r in report.results.iter().filter(|r| !r.passed) {
                if let Some(out) = &r.output {
                    let detail = format!("{}\n{}", r.label, out);
                    let _ = self
                        .store
                        .record_sandbox_event(&SandboxEvent::gate_output(self.run_id, step, &detail));
                }
            }
            let passed = report.passed();
            if passed {
                self.state.failing.clear();
            } else {
                self.state.verify_failures += 1;
                self.state.failing = report.failed_labels();
            }
            self.emit(RunEvent::Verified {
                run_id: self.run_id,
                step,
                passed,
                failed: self.state.failing.clone(),
                attempt: self.state.verify_failures,
            });
            if !passed {
                results.push(ContentBlock::Text {
                    text: report.observation(),
                });
            }
            verified = Some(passed);
        }
        if !results.is_empty() {
            added.push(Message {
                role: Role::User,
                content: results,
            });
        }

        self.totals.add(&reply.usage, &reply.cost);
        self.state.elapsed_ms = ms(self.elapsed());
        let record = StepRecord {
            run_id: self.run_id,
            step,
            started_at_ms,
            duration_ms: ms(step_started.elapsed()),
            model_ms,
            request_body: reply.request_body.clone(),
            request_hash: None,
            reply_json: serde_json::to_string(&reply.content).unwrap_or_default(),
            messages_json: serde_json::to_string(&added).unwrap_or_default(),
            usage_json: serde_json::to_string(&reply.usage).unwrap_or_default(),
            input_tokens: reply.usage.input_tokens,
            output_tokens: reply.usage.output_tokens,
            cached_input_tokens: reply.usage.cached_input_tokens,
            cost_usd: reply.cost.usd,
            cost_source: serde_json::to_value(reply.cost.source)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "unknown".into()),
            tool_calls: tool_records,
            policy_events,
            state_json: serde_json::to_string(&self.state).unwrap_or_default(),
        };
        crate::failpoint::hit("step.before_commit", step);
        if let Err(e) = self.store.commit_step(&record) {
            // The step's effects are on disk but not on record: stop rather than run on
            // with a trace that no longer matches the workspace. The run stays
            // `running` in the store, so `resume` continues from the last committed
            // step once the store is writable again, and the intent journal keeps the
            // writes of this step from being applied twice.
            tracing::error!(run_id = self.run_id, step, error = %e, "step commit failed");
            return Err(StepEnd::Store(e));
        }
        self.messages.extend(added);
        self.applied.clear();
        self.emit(RunEvent::StepCommitted {
            run_id: self.run_id,
            step,
            total_tokens: self.totals.total_tokens(),
            cost_usd: self.totals.cost_usd(),
        });

        if stalled {
            return Ok(Some(RunOutcome::Stalled));
        }
        match verified {
            Some(true) => return Ok(Some(RunOutcome::Success)),
            Some(false) if self.state.verify_failures >= self.contract.verify.max_attempts => {
                return Ok(Some(RunOutcome::VerificationFailed {
                    failed: self.state.failing.clone(),
                }));
            }
            _ => {}
        }
        Ok(budget::after_step(&self.contract.budget, &self.totals))
    }

    /// Journals, dispatches and records one tool call.
    async fn call_tool(
        &mut self,
        step: u32,
        id: &str,
        name: &str,
        input: &serde_json::Value,
    ) -> (
        ContentBlock,
        ToolCallRecord,
        Vec<PolicyEvent>,
        Vec<FileEffect>,
    ) {
        let target = ["path", "pattern"]
            .iter()
            .find_map(|k| input.get(k).and_then(|v| v.as_str()).map(str::to_string));
        self.emit(RunEvent::ToolCalled {
            run_id: self.run_id,
            step,
            name: name.to_string(),
            target,
        });
        let input_json = serde_json::to_string(input).unwrap_or_default();
        let dispatched = if let Some(done) = self.already_applied(name, &input_json) {
            done
        } else {
            let actions = self
                .opts
                .tools
                .get(name)
                .and_then(|t| t.plan(&self.ctx, input).ok())
                .unwrap_or_default();
            let intent_id = self
                .store
                .journal_intent(&ToolIntent {
                    run_id: self.run_id,
                    step,
                    call_id: id.to_string(),
                    tool: name.to_string(),
                    input_json: input_json.clone(),
                    actions_json: serde_json::to_string(&actions).unwrap_or_default(),
                })
                .ok();
            let d = self
                .opts
                .tools
                .dispatch(&self.ctx, self.opts.policy.as_ref(), name, input)
                .await;
            if let Some(iid) = intent_id {
                let _ = self.store.journal_complete(
                    iid,
                    !d.is_error,
                    &serde_json::to_string(&d.effects).unwrap_or_default(),
                );
            }
            d
        };
        let mut events = Vec::new();
        for pd in &dispatched.decisions {
            self.emit(RunEvent::PolicyDecision {
                run_id: self.run_id,
                step,
                act: pd.action.act.as_str().into(),
                target: pd.action.target.clone(),
                decision: pd.decision.as_str().into(),
                layer: pd.layer.clone(),
            });
            events.push(PolicyEvent {
                run_id: self.run_id,
                step,
                act: pd.action.act.as_str().into(),
                target: pd.action.target.clone(),
                decision: pd.decision.as_str().into(),
                rule: pd.rule.clone(),
                layer: pd.layer.clone(),
            });
        }
        self.emit(RunEvent::ToolFinished {
            run_id: self.run_id,
            step,
            name: name.to_string(),
            is_error: dispatched.is_error,
            duration_ms: dispatched.duration_ms,
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
        let block = ContentBlock::ToolResult {
            tool_use_id: id.to_string(),
            content: dispatched.content,
            is_error: dispatched.is_error,
        };
        (block, record, events, dispatched.effects)
    }

    /// On the first step after an interruption: a write the interrupted session already
    /// applied (every file still at its recorded after-hash) is not applied again.
    fn already_applied(
        &mut self,
        name: &str,
        input_json: &str,
    ) -> Option<crate::tools::Dispatched> {
        let pos = self.applied.iter().position(|a| {
            a.tool == name
                && a.input_json == input_json
                && !a.effects.is_empty()
                && a.effects.iter().all(|e| {
                    let now = self
                        .ctx
                        .workspace
                        .read(&e.path)
                        .ok()
                        .map(|b| sha256_hex(&b));
                    now == e.after
                })
        })?;
        let a = self.applied.remove(pos);
        let paths: Vec<&str> = a.effects.iter().map(|e| e.path.as_str()).collect();
        Some(crate::tools::Dispatched {
            content: format!(
                "already applied before the run was interrupted (not applied twice): {}",
                paths.join(", ")
            ),
            is_error: false,
            decisions: Vec::new(),
            confinement_refusal: None,
            effects: a.effects,
            duration_ms: 0,
        })
    }

    fn final_message(&self) -> String {
        self.messages
            .iter()
            .rev()
            .filter(|m| m.role == Role::Assistant)
            .map(Message::text)
            .find(|t| !t.trim().is_empty())
            .unwrap_or_default()
    }

    fn finish(self, outcome: RunOutcome) -> RunResult {
        let diff = workdir::diff_trees(&self.dirs.baseline, &self.dirs.work)
            .unwrap_or_else(|e| format!("[diff unavailable: {e}]\n"));
        let final_message = self.final_message();
        let fin = RunFinish {
            outcome: outcome.name().to_string(),
            outcome_json: serde_json::to_string(&outcome).unwrap_or_default(),
            final_message: Some(final_message.clone()),
            diff: Some(diff.clone()),
        };
        if let Err(e) = self.store.finish_run(self.run_id, &fin) {
            tracing::error!(run_id = self.run_id, error = %e, "could not record the outcome");
        }
        // The in-place baseline is only needed while the run can go on; a copy is the
        // run's product and stays where `show` says it is.
        if self.contract.workspace == WorkspaceMode::InPlace && !outcome.is_resumable() {
            let _ = std::fs::remove_dir_all(&self.dirs.scratch);
        }
        self.emit(RunEvent::Finished {
            run_id: self.run_id,
            outcome: outcome.clone(),
        });
        RunResult {
            run_id: self.run_id,
            outcome,
            steps: self.totals.steps,
            input_tokens: self.totals.input_tokens,
            output_tokens: self.totals.output_tokens,
            cached_input_tokens: self.totals.cached_input_tokens,
            total_tokens: self.totals.total_tokens(),
            cost_usd: self.totals.cost_usd(),
            cost_unknown_steps: self.totals.cost_unknown_steps,
            diff,
            final_message,
            work_dir: self.dirs.work.display().to_string(),
        }
    }
}
