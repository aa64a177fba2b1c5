//! The step engine: owns a run's state and drives it to an outcome.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::budget::{self, Totals};
use super::events::{Flow, RunEvent};
use super::outcome::RunOutcome;
use super::prompt;
use super::setup;
use super::stall::{SeenCall, StallDetector, StallVerdict};
use super::state::LoopState;
use super::workdir::{self, WorkDirs};
use super::{RunError, RunOptions, RunResult};
use crate::contract::{TaskContract, WorkspaceMode};
use crate::policy::{
    Action, Approval, ApprovalRequest, Decision, Policy, PolicyDecision, PolicyGate, PolicyLayers,
};
use crate::provider::{
    ChainAttempt, ChainError, Completion, CompletionRequest, ContentBlock, Message, Provider,
    ProviderIdentity, Role, ThinkingSettings, complete_chain,
};
use crate::store::{
    ApprovalRecord, NewRun, PolicyEvent, ProviderAttempt, RunFinish, SandboxEvent, StepRecord,
    Store, ToolCallRecord, ToolIntent,
};
use crate::tools::{FileEffect, ToolContext, ToolLimits, Workspace};
use crate::verify;

/// A file write of an interrupted step that had already been applied.
struct AppliedIntent {
    tool: String,
    input_json: String,
    /// The files it changed, `after` being their content hash now.
    effects: Vec<FileEffect>,
    /// The journal never recorded the call's completion: the files changed after the
    /// intent was written, so it is taken as applied, but its result is unknown.
    uncertain: bool,
}

/// A planned action as journaled: for writes, the target's content hash before the
/// call, so an interrupted call can be reconciled from the workspace alone.
#[derive(serde::Serialize, serde::Deserialize)]
struct JournalAction {
    act: crate::policy::Act,
    target: String,
    #[serde(default)]
    before: Option<String>,
}

/// How an ask was answered.
enum AskAnswer {
    /// Run it (with these arguments, possibly modified by the approver).
    Approved {
        input: serde_json::Value,
        remember: bool,
    },
    /// Do not run it; the reason goes to the model.
    Denied(String),
}

fn describe(actions: &[Action]) -> String {
    actions
        .iter()
        .map(|a| format!("{} {}", a.act.as_str(), a.target))
        .collect::<Vec<_>>()
        .join(", ")
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
    /// Said to the model in the first step after a resume (uncertain commands).
    resume_notes: Vec<String>,
    /// The model reply of a step an approval interrupted, replayed on resume.
    replay_reply: Option<Completion>,
    _lock: super::liveness::RunLock,
    policy: Arc<dyn PolicyGate>,
    /// The policy the harness built, whose layers are kept with the run.
    owned_policy: Option<Arc<Policy>>,
    /// The layers last written to the store.
    saved_policy: String,
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

/// The caller's policy, or the contract's.
/// A policy the harness built itself (its layers go on record), or none.
type OwnedPolicy = Option<Arc<Policy>>;

/// The run's policy: the caller's, or the stored layers of a resumed run, or the
/// contract's. The second value is set when the harness owns the policy and keeps its
/// layers on record.
fn resolve_policy(
    opts: &RunOptions,
    contract: &TaskContract,
    backend: crate::sandbox::Backend,
    work: &std::path::Path,
    stored: Option<&str>,
) -> Result<(Arc<dyn PolicyGate>, OwnedPolicy), RunError> {
    if let Some(p) = &opts.policy {
        return Ok((p.clone(), None));
    }
    let policy = match stored {
        Some(json) => {
            let layers: PolicyLayers = serde_json::from_str(json)
                .map_err(|e| RunError::Policy(format!("stored layers: {e}")))?;
            Policy::from_layers(layers).map_err(|e| RunError::Policy(e.to_string()))?
        }
        None => setup::build_policy(contract, backend, work)?,
    };
    let p = Arc::new(policy);
    Ok((p.clone(), Some(p)))
}

/// The tools' context: the confined workspace and an executor for commands, which
/// masks what the policy denies for reading.
#[allow(clippy::too_many_arguments)]
fn tool_context(
    ws: Workspace,
    sandbox: Arc<dyn crate::sandbox::Sandbox>,
    contract: &TaskContract,
    work: &std::path::Path,
    store: &Store,
    run_id: i64,
    opts: &RunOptions,
    policy: &Arc<dyn PolicyGate>,
) -> ToolContext {
    let masked = setup::masked_paths(work, policy.as_ref());
    let exec = crate::exec::Executor::new(
        sandbox,
        contract.sandbox.clone(),
        work,
        store.clone(),
        run_id,
        opts.audit.clone(),
        masked,
    );
    ToolContext {
        workspace: Arc::new(ws),
        limits: ToolLimits::default(),
        exec: Some(Arc::new(exec)),
        read_gate: Some(policy.clone()),
    }
}

/// Content hash of a workspace file; `None` when it does not exist or cannot be read.
fn file_hash(ws: &Workspace, rel: &str) -> Option<String> {
    ws.read(rel).ok().map(|b| sha256_hex(&b))
}

/// Decides from the journal and the workspace whether a call of an interrupted step
/// already changed files. A completed call carries its effects; a call whose completion
/// was never journaled counts as applied exactly when a target it was about to write no
/// longer has the content it had before.
fn reconcile(ws: &Workspace, j: crate::store::ToolIntentRecord) -> Option<AppliedIntent> {
    if j.status == "done" {
        let effects: Vec<FileEffect> = serde_json::from_str(j.effects_json.as_deref()?).ok()?;
        return Some(AppliedIntent {
            tool: j.intent.tool,
            input_json: j.intent.input_json,
            effects,
            uncertain: false,
        });
    }
    if j.status != "pending" {
        return None;
    }
    let actions: Vec<JournalAction> = serde_json::from_str(&j.intent.actions_json).ok()?;
    let effects: Vec<FileEffect> = actions
        .into_iter()
        .filter(|a| a.act == crate::policy::Act::Write)
        .filter_map(|a| {
            let now = file_hash(ws, &a.target);
            (now != a.before).then_some(FileEffect {
                path: a.target,
                before: a.before,
                after: now,
            })
        })
        .collect();
    (!effects.is_empty()).then_some(AppliedIntent {
        tool: j.intent.tool,
        input_json: j.intent.input_json,
        effects,
        uncertain: true,
    })
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
        let sandbox = match &opts.sandbox {
            Some(s) => s.clone(),
            None => setup::choose_sandbox(&contract)?,
        };
        let dirs = workdir::prepare(&contract.root, contract.workspace)
            .map_err(|e| workspace_err(&contract.root, e))?;
        let (policy, owned_policy) =
            resolve_policy(&opts, &contract, sandbox.backend(), &dirs.work, None)?;
        let ws = Workspace::open(&dirs.work).map_err(|e| workspace_err(&dirs.work, e))?;
        let lock = super::liveness::acquire(&dirs.scratch)
            .map_err(|e| workspace_err(&dirs.scratch, e))?
            .ok_or_else(|| {
                workspace_err(
                    &dirs.scratch,
                    std::io::Error::other("scratch directory locked by another process"),
                )
            })?;
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
        let ctx = tool_context(
            ws, sandbox, &contract, &dirs.work, store, run_id, &opts, &policy,
        );
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
            resume_notes: Vec::new(),
            replay_reply: None,
            _lock: lock,
            policy,
            owned_policy,
            saved_policy: String::new(),
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
        let lock = super::liveness::acquire(&scratch)
            .map_err(|e| workspace_err(&scratch, e))?
            .ok_or_else(|| RunError::NotResumable {
                run_id,
                reason: "another process is running it now".into(),
            })?;
        let dirs = workdir::reattach(&contract.root, contract.workspace, &scratch);
        let ws = Workspace::open(&dirs.work).map_err(|e| workspace_err(&dirs.work, e))?;
        let sandbox = match &opts.sandbox {
            Some(s) => s.clone(),
            None => setup::choose_sandbox(&contract)?,
        };
        let (policy, owned_policy) = resolve_policy(
            &opts,
            &contract,
            sandbox.backend(),
            &dirs.work,
            rec.policy_json.as_deref(),
        )?;
        let ctx = tool_context(
            ws, sandbox, &contract, &dirs.work, store, run_id, &opts, &policy,
        );
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
        let journal: Vec<_> = store
            .journal(run_id)?
            .into_iter()
            .filter(|j| j.intent.step == next_step)
            .collect();
        let mut replay_reply = None;
        for a in store
            .approvals(run_id)?
            .into_iter()
            .filter(|a| a.step == next_step)
        {
            if a.status == "pending" {
                return Err(RunError::NotResumable {
                    run_id,
                    reason: format!(
                        "approval request {} is still pending: decide it with `io-harness approve {run_id} {} allow|deny`",
                        a.request_id, a.request_id
                    ),
                });
            }
            let reply: Completion =
                serde_json::from_str(&a.reply_json).map_err(|e| RunError::Corrupt {
                    run_id,
                    what: "approval reply",
                    message: e.to_string(),
                })?;
            replay_reply = Some(reply);
        }
        let mut resume_notes = Vec::new();
        for j in &journal {
            if j.status == "pending" && j.intent.actions_json.contains("\"exec\"") {
                // A command cut off by the crash: nobody can say what it did.
                let _ = store.journal_uncertain(j.id);
                resume_notes.push(format!(
                    "Note: the previous session was interrupted while `{}` ran ({}). Whatever it did before the \
                     interruption is in the workspace, but its result is unknown: check the state you depend on \
                     before relying on it.",
                    j.intent.tool, j.intent.input_json
                ));
            }
        }
        let applied = journal
            .into_iter()
            .filter_map(|j| reconcile(&ctx.workspace, j))
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
            _lock: lock,
            policy,
            saved_policy: rec.policy_json.clone().unwrap_or_default(),
            owned_policy,
            resume_notes,
            replay_reply,
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
        self.save_policy();
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
        if let Some(e) = &self.ctx.exec {
            e.set_step(step);
        }
        let step_started = Instant::now();
        let started_at_ms = now_ms();
        self.emit(RunEvent::StepStarted {
            run_id: self.run_id,
            step,
            max_steps: self.contract.budget.max_steps,
        });
        let request = self.request();
        let model_started = Instant::now();
        let (reply, served_by) = match self.replay_reply.take() {
            // Resuming a step an approval interrupted: its reply is on record.
            Some(r) => (r, Some("replayed from the approval record".to_string())),
            None => self.call_model(step, &request).await?,
        };
        crate::failpoint::hit("step.after_reply", step);
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
            let (block, record, decisions, fx) = self
                .call_tool(step, id, name, input, &reply)
                .await
                .map_err(StepEnd::Outcome)?;
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
            crate::failpoint::hit("verify.before", step);
            let report = verify::check(
                &self.contract.verify.criteria,
                &self.ctx.workspace,
                self.ctx.exec.as_deref(),
            )
            .await;
            for r in report.results.iter().filter(|r| !r.passed) {
                if let Some(out) = &r.output {
                    let detail = format!("{}\n{}", r.label, out);
                    let _ = self.store.record_sandbox_event(&SandboxEvent::gate_output(
                        self.run_id,
                        step,
                        &detail,
                    ));
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
        for note in std::mem::take(&mut self.resume_notes) {
            results.push(ContentBlock::Text { text: note });
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
            provider: served_by,
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
        crate::failpoint::hit("step.after_commit", step);
        self.save_policy();
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

    /// Calls the provider chain with retries, under the time budget and the cancel
    /// token; records every failed attempt.
    async fn call_model(
        &mut self,
        step: u32,
        request: &CompletionRequest,
    ) -> Result<(Completion, Option<String>), StepEnd> {
        let remaining = budget::remaining(&self.contract.budget, self.elapsed());
        let deadline = remaining.map(|d| tokio::time::Instant::now() + d);
        let chain: Vec<&dyn Provider> = std::iter::once(self.provider)
            .chain(
                self.opts
                    .fallbacks
                    .iter()
                    .map(|p| p.as_ref() as &dyn Provider),
            )
            .collect();
        let names: Vec<String> = chain
            .iter()
            .map(|p| {
                let id = p.identity();
                format!("{}/{}", id.kind, id.model)
            })
            .collect();
        let mut attempts = Vec::new();
        let mut on_attempt = |a: &ChainAttempt| attempts.push(a.clone());
        let call = complete_chain(
            &chain,
            request,
            &self.contract.retry,
            deadline,
            &mut on_attempt,
        );
        let outcome = tokio::select! {
            _ = self.opts.cancel.cancelled() => None,
            r = async {
                match remaining {
                    Some(d) => tokio::time::timeout(d, call).await.unwrap_or(Err(ChainError::Deadline)),
                    None => call.await,
                }
            } => Some(r),
        };
        self.record_attempts(step, &names, &attempts);
        let (reply, served) = match outcome {
            None => return Err(StepEnd::Outcome(RunOutcome::Cancelled)),
            Some(Err(ChainError::Deadline)) => {
                return Err(StepEnd::Outcome(RunOutcome::TimeBudgetExceeded));
            }
            Some(Err(ChainError::Escalated { error, retryable })) => {
                tracing::warn!(run_id = self.run_id, step, error = %error, "provider call failed");
                let provider = names
                    .iter()
                    .find(|n| n.starts_with(&format!("{}/", error.provider)))
                    .or(names.last())
                    .cloned()
                    .unwrap_or_default();
                let _ = self.store.record_provider_attempt(&ProviderAttempt {
                    run_id: self.run_id,
                    step,
                    provider,
                    attempt: 0,
                    kind: error.kind.as_str().to_string(),
                    status: error.status,
                    delay_ms: 0,
                    next: "escalate".into(),
                    code: error.code.clone(),
                    request_bytes: serde_json::to_vec(request).ok().map(|b| b.len() as u64),
                });
                return Err(StepEnd::Outcome(
                    if error.kind == crate::provider::ProviderErrorKind::ContextOverflow {
                        RunOutcome::ContextOverflow
                    } else {
                        RunOutcome::Escalated {
                            kind: error.kind,
                            retryable,
                        }
                    },
                ));
            }
            Some(Ok(r)) => r,
        };
        let served_by = names.get(served).cloned();
        Ok((reply, served_by))
    }

    /// Keeps the policy's layers with the run whenever they changed (an approval
    /// remembered), so a resume applies exactly them.
    fn save_policy(&mut self) {
        let Some(p) = &self.owned_policy else {
            return;
        };
        let Ok(json) = serde_json::to_string(&p.layers()) else {
            return;
        };
        if json != self.saved_policy {
            if let Err(e) = self.store.set_run_policy(self.run_id, &json) {
                tracing::warn!(error = %e, "could not store the policy layers");
            }
            self.saved_policy = json;
        }
    }

    /// Records the failed attempts of a step's model call (best effort: a record that
    /// cannot be written must not end the run) and tells the observer.
    fn record_attempts(&self, step: u32, names: &[String], attempts: &[ChainAttempt]) {
        for a in attempts {
            let provider = names.get(a.provider_index).cloned().unwrap_or_default();
            let _ = self.store.record_provider_attempt(&ProviderAttempt {
                run_id: self.run_id,
                step,
                provider: provider.clone(),
                attempt: a.attempt.attempt,
                kind: a.attempt.kind.as_str().to_string(),
                status: a.attempt.status,
                delay_ms: a.attempt.delay_ms,
                next: a.next.to_string(),
                code: a.attempt.code.clone(),
                request_bytes: None,
            });
            self.emit(RunEvent::ProviderRetry {
                run_id: self.run_id,
                step,
                provider,
                attempt: a.attempt.attempt,
                kind: a.attempt.kind,
                delay_ms: a.attempt.delay_ms,
                next: a.next.to_string(),
            });
        }
    }

    /// Journals, dispatches and records one tool call.
    async fn call_tool(
        &mut self,
        step: u32,
        id: &str,
        name: &str,
        input: &serde_json::Value,
        reply: &Completion,
    ) -> Result<
        (
            ContentBlock,
            ToolCallRecord,
            Vec<PolicyEvent>,
            Vec<FileEffect>,
        ),
        RunOutcome,
    > {
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
            let mut d = self.journaled_dispatch(step, id, name, input, &[]).await;
            if !d.asked.is_empty() {
                let asked = std::mem::take(&mut d.asked);
                match self
                    .resolve_ask(step, id, name, input, &input_json, &asked, reply)
                    .await?
                {
                    AskAnswer::Approved {
                        input: approved_input,
                        remember,
                    } => {
                        if remember {
                            for a in &asked {
                                self.policy.remember(a);
                            }
                        }
                        let first = std::mem::take(&mut d.decisions);
                        d = self
                            .journaled_dispatch(step, id, name, &approved_input, &asked)
                            .await;
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
        Ok((block, record, events, dispatched.effects))
    }

    /// Journals (when the call can change something), dispatches with `approved`
    /// actions, and completes the journal entry.
    async fn journaled_dispatch(
        &self,
        step: u32,
        id: &str,
        name: &str,
        input: &serde_json::Value,
        approved: &[Action],
    ) -> crate::tools::Dispatched {
        let input_json = serde_json::to_string(input).unwrap_or_default();
        let actions: Vec<JournalAction> = self
            .opts
            .tools
            .get(name)
            .and_then(|t| t.plan(&self.ctx, input).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|a| JournalAction {
                before: (a.act == crate::policy::Act::Write)
                    .then(|| file_hash(&self.ctx.workspace, &a.target))
                    .flatten(),
                act: a.act,
                target: a.target,
            })
            .collect();
        // Only calls that can change something need an intent on record: a read
        // replayed after a crash does no harm, and skipping its two journal writes is
        // most of a read step's bookkeeping.
        let effectful = actions.iter().any(|a| a.act != crate::policy::Act::Read);
        let intent_id = effectful
            .then(|| {
                self.store.journal_intent(&ToolIntent {
                    run_id: self.run_id,
                    step,
                    call_id: id.to_string(),
                    tool: name.to_string(),
                    input_json,
                    actions_json: serde_json::to_string(&actions).unwrap_or_default(),
                })
            })
            .and_then(Result::ok);
        let d = self
            .opts
            .tools
            .dispatch_approved(&self.ctx, self.policy.as_ref(), name, input, approved)
            .await;
        crate::failpoint::hit("tool.after_apply", step);
        if let Some(iid) = intent_id {
            let _ = self.store.journal_complete(
                iid,
                !d.is_error,
                &serde_json::to_string(&d.effects).unwrap_or_default(),
            );
        }
        d
    }

    /// Answers an `ask`: a decision already on record (an operator's `approve` before
    /// this resume), else the approver, else — nobody to ask — a deferral that ends the
    /// run `AwaitingApproval`, never a hang.
    #[allow(clippy::too_many_arguments)]
    async fn resolve_ask(
        &self,
        step: u32,
        id: &str,
        name: &str,
        input: &serde_json::Value,
        input_json: &str,
        asked: &[Action],
        reply: &Completion,
    ) -> Result<AskAnswer, RunOutcome> {
        let decided = self
            .store
            .approvals(self.run_id)
            .unwrap_or_default()
            .into_iter()
            .find(|a| {
                a.step == step
                    && a.tool == name
                    && a.input_json == input_json
                    && a.status != "pending"
            });
        if let Some(a) = decided {
            return Ok(if a.status == "allowed" {
                AskAnswer::Approved {
                    input: input.clone(),
                    remember: a.remember,
                }
            } else {
                AskAnswer::Denied(a.reason.unwrap_or_else(|| "no reason given".into()))
            });
        }
        let request_id = format!("{step}-{id}");
        let request = ApprovalRequest {
            id: request_id.clone(),
            action: asked[0].clone(),
            detail: format!(
                "{name} {}",
                crate::tools::bound_text(input_json.to_string(), 2000)
            ),
        };
        let answer = match &self.opts.approver {
            Some(a) => a.decide(&request).await,
            None => Approval::Defer,
        };
        match answer {
            Approval::Approve { modified, remember } => Ok(AskAnswer::Approved {
                input: modified.unwrap_or_else(|| input.clone()),
                remember,
            }),
            Approval::Deny { reason } => Ok(AskAnswer::Denied(reason)),
            Approval::Defer => {
                let record = ApprovalRecord {
                    run_id: self.run_id,
                    request_id: request_id.clone(),
                    step,
                    call_id: id.to_string(),
                    tool: name.to_string(),
                    input_json: input_json.to_string(),
                    action_json: serde_json::to_string(&asked[0]).unwrap_or_default(),
                    reply_json: serde_json::to_string(reply).unwrap_or_default(),
                    status: "pending".into(),
                    reason: None,
                    remember: false,
                };
                if let Err(e) = self.store.record_approval_request(&record) {
                    tracing::error!(error = %e, "could not record the approval request");
                }
                Err(RunOutcome::AwaitingApproval { request_id })
            }
        }
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
                && a.effects
                    .iter()
                    .all(|e| file_hash(&self.ctx.workspace, &e.path) == e.after)
        })?;
        let a = self.applied.remove(pos);
        let paths: Vec<&str> = a.effects.iter().map(|e| e.path.as_str()).collect();
        let content = if a.uncertain {
            format!(
                "this call was interrupted after it changed {}; the change is in place and was not \
                 applied again, but its result was not recorded: re-read the file before editing it",
                paths.join(", ")
            )
        } else {
            format!(
                "already applied before the run was interrupted (not applied twice): {}",
                paths.join(", ")
            )
        };
        Some(crate::tools::Dispatched {
            content,
            is_error: false,
            decisions: Vec::new(),
            confinement_refusal: None,
            effects: a.effects,
            duration_ms: 0,
            asked: Vec::new(),
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
        let diff = workdir::diff_against(&self.dirs.baseline, &self.dirs.work)
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
