//! [`Session::open`]: the one way a session starts. `run`, `resume`, the library's
//! `spawn_agent` and the `spawn_agent` tool all come here; what differs between them
//! is data in [`SessionKind`], settled first ([`Origin`]), and every later stage is
//! shared:
//!
//! 1. the contract (checked, or the stored one with its resume checks), the price a
//!    cost budget needs, the provider's secrets registered for redaction;
//! 2. the sandbox, the run's directories (prepared, or reattached from the record)
//!    and this process's lock on them;
//! 3. the policy (the caller's, the stored layers, or the contract's) and the
//!    provider endpoints it must allow;
//! 4. the run's store row (created for a new run), the endpoint decisions recorded;
//! 5. the tools' context (workspace, executor, memory) and the MCP servers;
//! 6. the conversation and counters: a first message for a new run, or everything
//!    the committed steps and the journal of the interrupted step say (`restore`).

use std::path::PathBuf;
use std::sync::Arc;

use super::environment::{
    check_chain_endpoints, check_price, policy_event, tool_context, workspace_err,
};
use super::restore::{Restored, restore};
use super::stored::StoredRun;
use super::{Carryover, Conversation, Identity, Progress, RunPolicy, Session, ToolEnv, model};
use crate::contract::TaskContract;
use crate::halt::Halt;
use crate::policy::PolicyDecision;
use crate::provider::{Message, Provider};
use crate::run::liveness::{self, RunLock};
use crate::run::outcome::RunOutcome;
use crate::run::workdir::{self, WorkDirs};
use crate::run::{RunError, RunOptions, budget::Totals, prompt, setup, stall::StallDetector};
use crate::run::{mcp_start, state::LoopState, subagent};
use crate::sandbox::Sandbox;
use crate::store::{AgentLink, AsyncStore, NewRun, Store};
use crate::tools::Workspace;

/// Which session to open.
pub(in crate::run) enum SessionKind<'k> {
    /// A new root run of this contract.
    Fresh { contract: &'k TaskContract },
    /// A stored run, continued from its last committed step. `given`, when set, must
    /// equal the stored contract.
    Resume {
        run_id: i64,
        given: Option<&'k TaskContract>,
    },
    /// A new sub-agent run: its contract already carved from its parent's (see
    /// `subagent::prepare`), its gate in the options, linked to the parent's call.
    Child {
        contract: &'k TaskContract,
        link: AgentLink,
    },
}

/// What the kind settles before anything is prepared.
struct Origin {
    /// The contract the session works under (root resolved).
    contract: TaskContract,
    /// The run's place in a tree of runs (a child's, or a resumed sub-agent's).
    link: Option<AgentLink>,
    /// The stored run, when the session continues one.
    stored: Option<StoredRun>,
}

impl Origin {
    async fn establish(
        kind: SessionKind<'_>,
        store: &AsyncStore,
        opts: &RunOptions,
    ) -> Result<Self, RunError> {
        match kind {
            SessionKind::Fresh { contract } => Self::new_run(contract, None),
            SessionKind::Child { contract, link } => Self::new_run(contract, Some(link)),
            SessionKind::Resume { run_id, given } => {
                let mut stored = StoredRun::load(store, run_id).await?;
                check_resumable(store, &stored, given, opts).await?;
                Ok(Self {
                    contract: stored.contract.clone(),
                    link: stored.link.take(),
                    stored: Some(stored),
                })
            }
        }
    }

    fn new_run(contract: &TaskContract, link: Option<AgentLink>) -> Result<Self, RunError> {
        let mut contract = contract.clone();
        contract.validate()?;
        contract.resolve_root()?;
        // Stored with the run: a resume reads them from the store, not the disk.
        contract.keep_operator_files()?;
        crate::verify::criterion_set::keep_baselines(&mut contract)?;
        Ok(Self {
            contract,
            link,
            stored: None,
        })
    }

    /// The run's directories and this process's lock on them: prepared for a new run,
    /// reattached from the record for a resumed one (whose lock another process may
    /// hold: it is running the run now).
    ///
    /// The workspace is locked first (see `liveness`): an in-place run keeps its lock
    /// for the session, a copy run holds it while it copies. `tree` is a sub-agent's
    /// tree, whose own hold covers it.
    fn place(&self, tree: Option<i64>) -> Result<(WorkDirs, RunLock), RunError> {
        let c = &self.contract;
        let in_place = c.workspace == crate::contract::WorkspaceMode::InPlace;
        let Some(stored) = &self.stored else {
            let held = liveness::lock_workspace(&c.root, liveness::hold_for(c.workspace), tree)?;
            let dirs =
                workdir::prepare(&c.root, c.workspace).map_err(|e| workspace_err(&c.root, e))?;
            let mut lock = liveness::acquire(&dirs.scratch)
                .map_err(|e| workspace_err(&dirs.scratch, e))?
                .ok_or_else(|| {
                    workspace_err(
                        &dirs.scratch,
                        std::io::Error::other("scratch directory locked by another process"),
                    )
                })?;
            lock.keep(held.filter(|_| in_place));
            return Ok((dirs, lock));
        };
        let run_id = stored.rec.id;
        let scratch = stored
            .rec
            .scratch_dir
            .as_deref()
            .map(PathBuf::from)
            .ok_or_else(|| RunError::NotResumable {
                run_id,
                reason: "it has no scratch directory on record".into(),
            })?;
        let mut lock = liveness::acquire(&scratch)
            .map_err(|e| workspace_err(&scratch, e))?
            .ok_or_else(|| RunError::NotResumable {
                run_id,
                reason: "another process is running it now".into(),
            })?;
        // A resumed copy run works on its own copy; an in-place one edits the tree again.
        if in_place {
            lock.keep(liveness::lock_workspace(
                &c.root,
                liveness::Hold::Exclusive,
                tree,
            )?);
        }
        Ok((workdir::reattach(&c.root, c.workspace, &scratch), lock))
    }

    /// The policy layers on record (a resumed run's).
    fn stored_layers(&self) -> Option<&str> {
        self.stored.as_ref()?.rec.policy_json.as_deref()
    }

    /// The step events of setup are recorded under: 0 at a fresh start, the last
    /// committed step on resume.
    fn committed(&self) -> u32 {
        self.stored.as_ref().map_or(0, StoredRun::committed)
    }

    /// The run's id: the stored run's, or a new row (linked, for a child).
    async fn record(
        &self,
        store: &AsyncStore,
        dirs: &WorkDirs,
        provider: &dyn Provider,
    ) -> Result<i64, RunError> {
        if let Some(stored) = &self.stored {
            return Ok(stored.rec.id);
        }
        let c = &self.contract;
        let contract_json = serde_json::to_string(c).map_err(|e| RunError::Corrupt {
            run_id: 0,
            what: "contract",
            source: e,
        })?;
        let new = NewRun {
            goal: c.goal.clone(),
            root: c.root.display().to_string(),
            work_dir: dirs.work.display().to_string(),
            contract_json,
            provider_json: serde_json::to_string(&provider.identity()).unwrap_or_default(),
            parent_run_id: self.link.as_ref().map(|l| l.parent_run_id),
            scratch_dir: Some(dirs.scratch.display().to_string()),
        };
        Ok(match &self.link {
            Some(l) => store.create_child_run(new, l.clone()).await?,
            None => store.create_run(new).await?,
        })
    }
}

/// What a session stands on before it has a store row: the sandbox, its directories
/// and lock, the policy and the endpoint decisions it made, the opened workspace.
struct Grounds {
    sandbox: Arc<dyn Sandbox>,
    dirs: WorkDirs,
    lock: RunLock,
    policy: RunPolicy,
    endpoints: Vec<PolicyDecision>,
    ws: Workspace,
}

impl Origin {
    /// Chooses the sandbox, places the run (see [`Origin::place`]), resolves the
    /// policy and checks the provider endpoints against it, opens the workspace.
    fn ground(
        &self,
        provider: &dyn Provider,
        opts: &RunOptions,
        tree: Option<i64>,
    ) -> Result<Grounds, RunError> {
        let contract = &self.contract;
        let sandbox = match &opts.sandbox {
            Some(s) => s.clone(),
            None => setup::choose_sandbox(contract)?,
        };
        let (dirs, lock) = self.place(tree)?;
        let policy = RunPolicy::resolve(
            opts,
            contract,
            sandbox.backend(),
            &dirs.work,
            self.stored_layers(),
        )?;
        let endpoints = check_chain_endpoints(provider, opts, policy.gate.as_ref())?;
        let ws = Workspace::open(&dirs.work).map_err(|e| workspace_err(&dirs.work, e))?;
        Ok(Grounds {
            sandbox,
            dirs,
            lock,
            policy,
            endpoints,
            ws,
        })
    }
}

/// Whether a stored run may be continued by this session: a sub-agent only inside
/// its tree, with the contract it started with, and only if it has not finished
/// for good.
async fn check_resumable(
    store: &AsyncStore,
    stored: &StoredRun,
    given: Option<&TaskContract>,
    opts: &RunOptions,
) -> Result<(), RunError> {
    let run_id = stored.rec.id;
    if let Some(l) = &stored.link
        && opts.policy.is_none()
    {
        // Alone, a child would fall back to its own contract's policy, which is
        // not its parent's: it resumes inside its tree, under its parent's gate.
        let root = store.call(move |s| subagent::root_of(s, run_id)).await?;
        return Err(RunError::NotResumable {
            run_id,
            reason: format!(
                "it is sub-agent `{}` of run {}: resume the root run {root} and the tree resumes with it",
                l.name, l.parent_run_id,
            ),
        });
    }
    if let Some(given) = given {
        let mut g = given.clone();
        // The stored contract has its root resolved and its operator files kept;
        // compare like with like.
        let kept = g.resolve_root().is_ok() && g.keep_operator_files().is_ok();
        // The criterion sets' baselines are the run's, taken at its start.
        crate::verify::criterion_set::adopt_baselines(&mut g, &stored.contract);
        if !kept || g != stored.contract {
            return Err(RunError::ContractMismatch { run_id });
        }
    }
    if stored.rec.status == "finished" {
        let outcome: Option<RunOutcome> = stored
            .rec
            .outcome_json
            .as_deref()
            .and_then(|j| serde_json::from_str(j).ok());
        if !outcome.as_ref().is_some_and(RunOutcome::is_resumable) {
            return Err(RunError::NotResumable {
                run_id,
                reason: format!(
                    "it finished with outcome {}",
                    stored.rec.outcome.as_deref().unwrap_or("unknown")
                ),
            });
        }
    }
    Ok(())
}

impl<'a> Session<'a> {
    /// Opens a session of `kind`: everything a run needs before its first step (see
    /// the module docs for the stages).
    pub(in crate::run) async fn open(
        kind: SessionKind<'_>,
        provider: &'a dyn Provider,
        store: &Store,
        mut opts: RunOptions,
    ) -> Result<Self, RunError> {
        let db = AsyncStore::new(store.clone());
        let origin = Origin::establish(kind, &db, &opts).await?;
        let contract = &origin.contract;
        admit(contract, provider, store, &mut opts)?;
        warm_tokenizer(contract, provider);
        // A sub-agent's tree: a workspace lock held by it covers the sub-agent.
        let tree = match origin.link.as_ref().map(|l| l.parent_run_id) {
            Some(parent) => Some(db.call(move |s| subagent::root_of(s, parent)).await?),
            None => None,
        };
        let Grounds {
            sandbox,
            dirs,
            mut lock,
            policy,
            endpoints,
            ws,
        } = origin.ground(provider, &opts, tree)?;
        let run_id = origin.record(&db, &dirs, provider).await?;
        lock.name_run(run_id, tree.unwrap_or(run_id));
        // The endpoint decisions are the run's first policy events (step 0).
        let first: Vec<_> = endpoints
            .iter()
            .map(|d| policy_event(run_id, 0, d))
            .collect();
        db.record_policy_events(first).await;
        let ctx = tool_context(
            ws,
            sandbox.clone(),
            contract,
            &dirs,
            store,
            run_id,
            &opts,
            &policy.gate,
        );
        let mcp = mcp_start::connect(
            contract,
            store,
            run_id,
            origin.committed(),
            sandbox,
            &ctx,
            &policy.gate,
            &mut opts,
        )
        .await;
        let context = model::context_runner(contract, provider);
        let Origin {
            contract,
            link,
            stored,
        } = origin;
        let resumed = stored.is_some();
        let gate = policy.gate.as_ref();
        let restored = match stored {
            Some(stored) => restore(&db, stored, &contract, &ctx.workspace, gate, context).await?,
            None => {
                let mut fresh =
                    first_session(&db, run_id, &contract, &ctx.workspace, gate, context).await?;
                // A sub-agent starts where its parent's chain stands: a primary the
                // parent found dead is not retried in full by every child.
                if let Some(b) = opts.breaker {
                    fresh.progress.state.breaker = b;
                }
                fresh
            }
        };
        let halt = Halt::new(
            opts.cancel.clone(),
            crate::run::budget::remaining(&contract.budget, restored.progress.elapsed()),
        );
        if let Some(exec) = &ctx.exec {
            exec.set_halt(halt.clone());
        }
        Ok(Self {
            run: Identity {
                id: run_id,
                depth: link.map_or(0, |l| l.depth),
                resumed,
                contract,
                dirs,
                _lock: lock,
            },
            provider,
            store: db,
            opts,
            tools: ToolEnv { ctx, mcp, policy },
            conversation: restored.conversation,
            progress: restored.progress,
            carryover: restored.carryover,
            halt,
        })
    }
}

/// What a run must pass before anything is recorded — its MCP servers buildable, its
/// prices and token counting known, its records outside the workspace — and the
/// credentials its records redact from now on (the provider's, the contract's), which
/// the audit log shares with the store.
/// Starts loading an exact tokenizer while the workspace and the sandbox are set up,
/// off the first request's path.
fn warm_tokenizer(contract: &TaskContract, provider: &dyn Provider) {
    let id = provider.identity();
    crate::context::tokens::warm(crate::context::Family::counting(
        &id.kind,
        &id.model,
        contract.context.tokens,
    ));
}

fn admit(
    contract: &TaskContract,
    provider: &dyn Provider,
    store: &Store,
    opts: &mut RunOptions,
) -> Result<(), RunError> {
    crate::run::mcp_start::require_available(contract)?;
    check_price(contract, &provider.identity())?;
    check_exact_tokens(contract, &provider.identity())?;
    super::environment::check_record_outside(contract, store, opts.audit.as_ref())?;
    store.redact_secrets(&provider.secrets());
    store.redact_secrets(&crate::run::credentials_of(contract));
    // The audit log hides what the store hides, tokens registered later included.
    opts.audit = opts
        .audit
        .take()
        .map(|a| a.sharing_secrets(store.secrets()));
    Ok(())
}

/// A new run's conversation: the first message, with the memory notes it offers,
/// put on record (resume replays it), and counters from zero.
async fn first_session(
    store: &AsyncStore,
    run_id: i64,
    contract: &TaskContract,
    ws: &Workspace,
    gate: &dyn crate::policy::PolicyGate,
    context: crate::context::ContextRunner,
) -> Result<Restored, RunError> {
    let workspace = contract.root.display().to_string();
    let notes = store
        .memory_list(workspace.clone())
        .await
        .unwrap_or_default();
    let boundary = crate::untrusted::Boundary::fresh().map_err(RunError::Random)?;
    let (first, offered) = prompt::first_message(contract, ws, gate, &notes, &boundary);
    let initial = vec![Message::user(first)];
    // Resume replays the first message from the record: without it there is no run.
    store
        .set_run_initial(run_id, serde_json::to_string(&initial).unwrap_or_default())
        .await?;
    if let Err(e) = store.memory_touch(workspace, offered).await {
        store.sync().note_lost(Some(run_id), "memory note use", &e);
    }
    Ok(Restored {
        conversation: Conversation {
            system: prompt::system_prompt(),
            messages: initial,
            context,
            boundary,
        },
        progress: Progress::starting(
            Totals::default(),
            LoopState::default(),
            StallDetector::default(),
        ),
        carryover: Carryover::default(),
    })
}

/// `[context] tokens = "exact"` needs a model whose encoder this build has.
fn check_exact_tokens(
    contract: &TaskContract,
    id: &crate::provider::ProviderIdentity,
) -> Result<(), RunError> {
    use crate::contract::{ContractError, TokenCounting};
    if contract.context.tokens != TokenCounting::Exact
        || crate::context::Family::of(&id.kind, &id.model).is_exact()
    {
        return Ok(());
    }
    Err(ContractError::Field {
        key: "context.tokens".into(),
        message: format!(
            "\"exact\" needs a model with a known encoder; {} ({}) has none here: use \"auto\" or \"estimate\"",
            id.model, id.kind
        ),
    }
    .into())
}
