//! The step engine: owns a run's state and drives it to an outcome.

mod agent;
mod approval;
mod journal;
mod model;
mod tool_call;

use approval::AskAnswer;
use approval::describe;
use journal::{AppliedIntent, JournalAction, file_hash, reconcile};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    /// 0 for a root run, 1 for its sub-agents…
    depth: u32,
    /// The contract's MCP servers, when it declares any.
    mcp: Option<crate::mcp::McpServers>,
    /// Builds each request from `messages` under the context budget (C16).
    context: crate::context::ContextRunner,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

use crate::digest::sha256_hex;

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

/// [`setup::check_endpoints`] over the primary provider and the fallbacks.
fn check_chain_endpoints(
    provider: &dyn Provider,
    opts: &RunOptions,
    gate: &dyn PolicyGate,
) -> Result<Vec<PolicyDecision>, RunError> {
    let chain: Vec<&dyn Provider> = std::iter::once(provider)
        .chain(opts.fallbacks.iter().map(|p| p.as_ref() as &dyn Provider))
        .collect();
    setup::check_endpoints(&chain, gate)
}

/// Records the endpoint decisions as the run's first policy events (step 0: before any
/// step). Best effort, like every record that must not stop a run.
fn record_endpoints(store: &Store, run_id: i64, decisions: &[PolicyDecision]) {
    for d in decisions {
        let _ = store.record_policy_event(&PolicyEvent {
            run_id,
            step: 0,
            act: d.action.act.as_str().into(),
            target: d.action.target.clone(),
            decision: d.decision.as_str().into(),
            rule: d.rule.clone(),
            layer: d.layer.clone(),
        });
    }
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
    let memory = crate::tools::MemoryContext {
        store: store.clone(),
        workspace: contract.root.display().to_string(),
        run_id,
        denied_files: exec.masked().iter().map(|m| work.join(m)).collect(),
    };
    ToolContext {
        workspace: Arc::new(ws),
        limits: ToolLimits::default(),
        exec: Some(Arc::new(exec)),
        read_gate: Some(policy.clone()),
        memory: Some(Arc::new(memory)),
    }
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
        Self::start_linked(contract, provider, store, opts, None).await
    }

    /// [`Engine::start`] for a root run (`link` `None`) or a sub-agent.
    pub(super) async fn start_linked(
        contract: &TaskContract,
        provider: &'a dyn Provider,
        store: &'a Store,
        mut opts: RunOptions,
        link: Option<&crate::store::AgentLink>,
    ) -> Result<Self, RunError> {
        let mut contract = contract.clone();
        contract.validate()?;
        super::mcp_start::require_available(&contract)?;
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
        let endpoints = check_chain_endpoints(provider, &opts, policy.as_ref())?;
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
        let new = NewRun {
            goal: contract.goal.clone(),
            root: contract.root.display().to_string(),
            work_dir: dirs.work.display().to_string(),
            contract_json,
            provider_json: serde_json::to_string(&identity).unwrap_or_default(),
            parent_run_id: link.map(|l| l.parent_run_id),
            scratch_dir: Some(dirs.scratch.display().to_string()),
        };
        let run_id = match link {
            Some(l) => store.create_child_run(&new, l)?,
            None => store.create_run(&new)?,
        };
        record_endpoints(store, run_id, &endpoints);
        let mcp_sandbox = sandbox.clone();
        let ctx = tool_context(
            ws, sandbox, &contract, &dirs.work, store, run_id, &opts, &policy,
        );
        let mcp = super::mcp_start::connect(
            &contract,
            store,
            run_id,
            0,
            mcp_sandbox,
            &ctx,
            &policy,
            &mut opts,
        )
        .await;
        let notes = store
            .memory_list(&contract.root.display().to_string())
            .unwrap_or_default();
        let (first, offered) = prompt::first_message(&contract, &ctx.workspace, &notes);
        let initial = vec![Message::user(first)];
        // What the model was first told is on record: resume replays it, and the notes
        // offered are part of it.
        let _ = store.set_run_initial(run_id, &serde_json::to_string(&initial).unwrap_or_default());
        let _ = store.memory_touch(&contract.root.display().to_string(), &offered);
        let context = model::context_runner(&contract, provider);
        Ok(Self {
            context,
            contract,
            provider,
            store,
            opts,
            run_id,
            dirs,
            ctx,
            system: prompt::system_prompt(),
            messages: initial,
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
            depth: link.map_or(0, |l| l.depth),
            mcp,
        })
    }

    pub(super) async fn reopen(
        store: &'a Store,
        run_id: i64,
        provider: &'a dyn Provider,
        given: Option<&TaskContract>,
        mut opts: RunOptions,
    ) -> Result<Self, RunError> {
        let rec = store.run(run_id)?.ok_or(RunError::NoSuchRun(run_id))?;
        let contract = super::stored_contract(store, run_id)?;
        super::mcp_start::require_available(&contract)?;
        let link = store.agent_link(run_id)?;
        if let Some(l) = &link
            && opts.policy.is_none()
        {
            // Alone, a child would fall back to its own contract's policy, which is
            // not its parent's: it resumes inside its tree, under its parent's gate.
            return Err(RunError::NotResumable {
                run_id,
                reason: format!(
                    "it is sub-agent `{}` of run {}: resume the root run {} and the tree resumes with it",
                    l.name,
                    l.parent_run_id,
                    super::subagent::root_of(store, run_id)?
                ),
            });
        }
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
        let endpoints = check_chain_endpoints(provider, &opts, policy.as_ref())?;
        record_endpoints(store, run_id, &endpoints);
        let mcp_sandbox = sandbox.clone();
        let ctx = tool_context(
            ws, sandbox, &contract, &dirs.work, store, run_id, &opts, &policy,
        );
        let steps = store.steps(run_id)?;
        let last_step = u32::try_from(steps.len()).unwrap_or(u32::MAX);
        let mcp = super::mcp_start::connect(
            &contract,
            store,
            run_id,
            last_step,
            mcp_sandbox,
            &ctx,
            &policy,
            &mut opts,
        )
        .await;
        let mut messages: Vec<Message> = match rec.initial_json.as_deref() {
            Some(json) => serde_json::from_str(json).map_err(|e| RunError::Corrupt {
                run_id,
                what: "initial messages",
                message: e.to_string(),
            })?,
            None => vec![Message::user(
                prompt::first_message(&contract, &ctx.workspace, &[]).0,
            )],
        };
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
        if replay_reply.is_none()
            && let Some(json) = store.spawn_reply(run_id, next_step)?
        {
            // The step spawned sub-agents: the same reply finds the same children.
            replay_reply = Some(serde_json::from_str(&json).map_err(|e| RunError::Corrupt {
                run_id,
                what: "spawn reply",
                message: e.to_string(),
            })?);
        }
        let mut totals = Totals::from_steps(&steps);
        for c in store.children(run_id)? {
            // Children of committed steps count now; those of the interrupted step
            // count when the replayed step adopts them.
            if c.link.step < next_step {
                totals.add_child(&super::subagent::rolled_up(store, c.run.id)?);
            }
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
        let mut context = model::context_runner(&contract, provider);
        context.restore(
            store,
            run_id,
            u32::try_from(steps.len()).unwrap_or(u32::MAX),
        );
        Ok(Self {
            context,
            _lock: lock,
            policy,
            saved_policy: rec.policy_json.clone().unwrap_or_default(),
            owned_policy,
            resume_notes,
            replay_reply,
            stall,
            totals,
            depth: link.map_or(0, |l| l.depth),
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
            mcp,
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
            if let Some(server) = self.mcp.as_ref().and_then(|m| m.required_failed()) {
                break RunOutcome::McpRequiredServerFailed { server };
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
        if let Some(m) = &self.mcp {
            m.set_step(step);
        }
        let step_started = Instant::now();
        let started_at_ms = now_ms();
        self.emit(RunEvent::StepStarted {
            run_id: self.run_id,
            step,
            max_steps: self.contract.budget.max_steps,
        });
        let model_started = Instant::now();
        let (reply, served_by) = match self.replay_reply.take() {
            // Resuming a step an approval interrupted: its reply is on record.
            Some(r) => (r, Some("replayed from the approval record".to_string())),
            None => self.call_assembled(step).await?,
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
            let (block, record, decisions, fx) =
                self.call_tool(step, id, name, input, &reply).await?;
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
                if let Some(phase) = r.phase {
                    let _ = self
                        .store
                        .record_sandbox_event(&SandboxEvent::gate_phase_failed(
                            self.run_id,
                            step,
                            phase,
                        ));
                } else if let Some(out) = &r.output {
                    // A Rust gate's compiler output quotes the agent's file: it goes to
                    // the model only, and the record gets the phase.
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
        if self.depth > 0 {
            crate::failpoint::hit("agent.child_after_commit", step);
        }
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
        if let Some(m) = &self.mcp {
            m.close();
        }
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
        // The run's gate directory and its dependency caches end with the run.
        if let Some(exec) = &self.ctx.exec {
            verify::remove_gate_dir(exec);
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
            agent_steps: self.totals.agent_steps,
            diff,
            final_message,
            work_dir: self.dirs.work.display().to_string(),
        }
    }
}
