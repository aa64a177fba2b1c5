//! The agent loop: one step at a time, model → tools → verify → record, until the
//! criterion passes or a budget ends the run.
//!
//! One place opens a session — fresh, resumed or a sub-agent (`session::open`) — one
//! place checks budgets (`budget`), one place emits observer events
//! (`Session::emit`), one place commits a step (`session::commit`), and every store
//! call goes through `store::AsyncStore`, off the async worker threads. A step is
//! committed atomically at its end; a run killed mid-step resumes from the last
//! committed step, and the intent journal keeps the interrupted step's file writes from
//! being applied twice.

pub mod after;
mod budget;
mod events;
mod liveness;
mod mcp_start;
mod outcome;
mod prompt;
mod sandbox_command;
mod session;
mod setup;
mod shared_cost;
mod snapshot_file;
mod stall;
mod state;
mod subagent;
mod workdir;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::contract::{ContractError, TaskContract};
use crate::policy::PolicyGate;
use crate::provider::Provider;
use crate::store::{Store, StoreError};
use crate::tools::ToolRegistry;

mod failure;

pub use events::{CancelToken, Flow, MODEL_TEXT_SHOWN, Observer, RunEvent};
pub use failure::{PolicyFailure, SandboxFailure};
pub use liveness::is_live;
#[cfg(feature = "mcp")]
pub use mcp_start::list_servers;
pub use outcome::{EXIT_INTERNAL, EXIT_USAGE, RunOutcome};
pub use sandbox_command::{StandaloneCommand, standalone_command};
pub use shared_cost::SharedCost;
pub use stall::StallPolicy;
pub use subagent::{AgentBudget, AgentSpec, AgentVerify, FileContent, FileNeedle};
pub use workdir::{cache_dir, diff_trees};

/// A run could not be started or continued. Runs that started and then failed end with
/// a [`RunOutcome`] instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The contract is invalid.
    #[error(transparent)]
    Contract(#[from] ContractError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The workspace could not be prepared or opened.
    #[error("workspace {path}: {source}")]
    Workspace {
        /// The directory.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The kernel's random source could not be read (for the frame boundary of
    /// untrusted text, see [`crate::untrusted::Boundary`]).
    #[error("could not draw the run's random frame boundary: {0}")]
    Random(#[source] std::io::Error),
    /// The store or the audit log lies inside the workspace (see the README's Policy
    /// row): refused before anything is copied or written.
    #[error(
        "the {what} {path} lies inside the workspace {workspace}, or may: a command or tool there could read or destroy it; put it outside (the store: IO_HARNESS_STORE or --store; the audit log: XDG_CONFIG_HOME; the cache: XDG_CACHE_HOME), and give a record file no other hard link"
    )]
    RecordInsideWorkspace {
        /// `store`, `audit log`, `cache directory` or `hard-linked record file`.
        what: &'static str,
        /// Where it is.
        path: String,
        /// The workspace root.
        workspace: String,
    },
    /// The run does not exist.
    #[error("no run with id {0}")]
    NoSuchRun(i64),
    /// The run cannot be resumed (finished with a final outcome, or has no contract).
    #[error("run {run_id} cannot be resumed: {reason}")]
    NotResumable {
        /// The run.
        run_id: i64,
        /// Why.
        reason: String,
    },
    /// A contract passed to `resume` differs from the stored one.
    #[error("run {run_id} was started with a different contract; resume it with the stored one")]
    ContractMismatch {
        /// The run.
        run_id: i64,
    },
    /// No sandbox could be had (`usage` when a required backend is unavailable).
    #[error("sandbox: {source}")]
    Sandbox {
        /// Why.
        source: SandboxFailure,
        /// Whether it is the contract's demand that cannot be met (exit 2).
        usage: bool,
    },
    /// The policy could not be built (a bad rule, an unreadable project file).
    #[error("policy: {0}")]
    Policy(#[source] PolicyFailure),
    /// A sub-agent's spec asks for more than its parent may give (a wider policy, a
    /// depth past the limit, a budget with nothing left, a root outside the
    /// workspace). Nothing was started.
    #[error("run {run_id} cannot spawn that sub-agent: {reason}")]
    SpawnRefused {
        /// The parent run.
        run_id: i64,
        /// Why.
        reason: String,
    },
    /// Stored data could not be decoded.
    #[error("run {run_id}: stored {what} is unreadable: {source}")]
    Corrupt {
        /// The run.
        run_id: i64,
        /// Which record.
        what: &'static str,
        /// Why it does not decode.
        source: serde_json::Error,
    },
    /// The run started, and then its record failed: the store was deleted or replaced
    /// underneath, or a write failed (a full disk, a write noted lost). The run ends
    /// here instead of going on unrecorded or claiming an outcome over a gap; exit 70.
    /// It stays `running` in the store (`interrupted` once this process ends), so it is
    /// resumable from its last committed step while the store file still exists
    /// ([`RunError::is_resumable`]).
    #[error("run {run_id}: the record failed: {source}")]
    Recording {
        /// The run.
        run_id: i64,
        /// What the store said.
        source: StoreError,
    },
    /// The workspace is held by another run (an in-place run edits it, or a copy run
    /// is copying it): two runs on one tree would both edit it, each unaware of the
    /// other. Nothing was started (exit 2). `holder` names the first run as its lock
    /// file tells it.
    #[error(
        "workspace {path} is in use by {holder}; wait for it to finish, or use workspace = \"copy\""
    )]
    WorkspaceBusy {
        /// The canonical workspace path.
        path: String,
        /// The run holding it (`run 7 (pid 1234)`), or what is known of it.
        holder: String,
    },
    /// The contract needs a part of the harness this build was compiled without
    /// (`[[mcp]]` servers without the `mcp` feature). Nothing was started (exit 2).
    #[error(
        "the contract uses `{key}`, but this build of io-harness lacks the `{feature}` feature"
    )]
    FeatureMissing {
        /// The contract key that needs it (`mcp`).
        key: &'static str,
        /// The crate feature missing (`mcp`).
        feature: &'static str,
    },
}

impl RunError {
    /// Whether this is a configuration problem of the caller (exit 2) rather than an
    /// internal failure.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::Contract(_)
                | Self::NoSuchRun(_)
                | Self::NotResumable { .. }
                | Self::ContractMismatch { .. }
                | Self::Policy(_)
                | Self::SpawnRefused { .. }
                | Self::Sandbox { usage: true, .. }
                | Self::FeatureMissing { .. }
                | Self::WorkspaceBusy { .. }
                | Self::RecordInsideWorkspace { .. }
        )
    }

    /// The process exit code (SPEC §3): 2 for a usage or configuration error (nothing
    /// ran), 70 (`EX_SOFTWARE`) for an internal failure of the harness — its store
    /// failing or replaced, an I/O error of its own. 70 is never 1: 1 says the agent's
    /// work was checked and failed, which an internal failure cannot say.
    pub fn exit_code(&self) -> i32 {
        if self.is_usage() {
            EXIT_USAGE
        } else {
            EXIT_INTERNAL
        }
    }

    /// Whether `resume` can continue the run this error ended: a run whose record
    /// failed while its store file is still the one it wrote to.
    pub fn is_resumable(&self) -> bool {
        matches!(self, Self::Recording { source, .. } if !matches!(source, StoreError::Replaced { .. }))
    }

    /// The run this error ended, when it had started.
    pub fn run_id(&self) -> Option<i64> {
        match self {
            Self::Recording { run_id, .. } => Some(*run_id),
            _ => None,
        }
    }

    /// A failure of the store after the run `run_id` started is a failure of its
    /// record; anything else is as it was.
    fn in_run(self, run_id: i64) -> Self {
        match self {
            Self::Store(source) if source.is_failure() => Self::Recording { run_id, source },
            other => other,
        }
    }
}

/// What a finished run reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunResult {
    /// Run id in the store.
    pub run_id: i64,
    /// How it ended.
    pub outcome: RunOutcome,
    /// Committed steps.
    pub steps: u32,
    /// Input tokens (cached excluded).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cached input tokens.
    pub cached_input_tokens: u64,
    /// All tokens: as reported where the provider reported them, else the harness's
    /// estimate.
    pub total_tokens: u64,
    /// How many of `total_tokens` are the harness's estimate (0: all reported).
    #[serde(default)]
    pub estimated_tokens: u64,
    /// Model calls whose reply was lost after the request was sent (a broken stream,
    /// a cancel or kill in flight); their estimated input is in the totals.
    #[serde(default)]
    pub lost_calls: u32,
    /// Known cost; `None` when no call's cost was known.
    pub cost_usd: Option<f64>,
    /// Steps whose cost is unknown (the known total is then a lower bound).
    pub cost_unknown_steps: u32,
    /// Whether part of `cost_usd` was priced on estimated tokens.
    #[serde(default)]
    pub cost_estimated: bool,
    /// Steps its sub-agents took. `steps` counts this run's own; the token and cost
    /// totals above include the sub-agents', and both kinds of step count against
    /// the step budget.
    #[serde(default)]
    pub agent_steps: u32,
    /// Final unified diff of the workspace.
    pub diff: String,
    /// The agent's last message.
    pub final_message: String,
    /// Where the agent worked.
    pub work_dir: String,
}

/// Everything a run may be given besides contract, provider and store.
#[derive(Clone)]
pub struct RunOptions {
    /// Receives every event; may cancel.
    pub observer: Option<Arc<dyn Observer>>,
    /// Cancels the run from outside.
    pub cancel: CancelToken,
    /// Tools offered to the model.
    pub tools: ToolRegistry,
    /// The policy check point; `None` builds it from the contract (the usual case).
    pub policy: Option<Arc<dyn PolicyGate>>,
    /// The sandbox commands run in; `None` picks it per the contract.
    pub sandbox: Option<Arc<dyn crate::sandbox::Sandbox>>,
    /// Where sandbox sessions are logged; the default location unless set.
    pub audit: Option<crate::audit::AuditLog>,
    /// Answers the policy's asks; without one an ask defers (the run ends
    /// `AwaitingApproval`, resumable once an operator decides).
    pub approver: Option<Arc<dyn crate::policy::Approver>>,
    /// Providers tried, in order, when the primary fails with a retryable kind after
    /// its retries.
    pub fallbacks: Vec<Arc<dyn Provider>>,
    /// Where a new run's provider chain starts (its circuit breaker): a parent's,
    /// passed to its sub-agents. `None`: at the primary. A resumed run uses its own,
    /// as stored.
    pub breaker: Option<crate::provider::BreakerState>,
    /// A cost budget shared with other runs (a batch's total): checked before each
    /// model call, fed each reply's known cost; used up, the run ends
    /// [`RunOutcome::CostBudgetExceeded`]. Sub-agents share it.
    pub shared_cost: Option<SharedCost>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            observer: None,
            cancel: CancelToken::new(),
            tools: ToolRegistry::standard(),
            policy: None,
            sandbox: None,
            audit: crate::audit::AuditLog::default_location(),
            approver: None,
            fallbacks: Vec::new(),
            breaker: None,
            shared_cost: None,
        }
    }
}

impl RunOptions {
    /// Sets the observer.
    pub fn observer(mut self, o: Arc<dyn Observer>) -> Self {
        self.observer = Some(o);
        self
    }

    /// Adds a fallback provider.
    pub fn fallback(mut self, p: Arc<dyn Provider>) -> Self {
        self.fallbacks.push(p);
        self
    }

    /// Sets the cancellation token.
    pub fn cancel_token(mut self, c: CancelToken) -> Self {
        self.cancel = c;
        self
    }
}

/// Runs `contract` with `provider`, recording into `store`.
///
/// ```
/// use io_harness::provider::{Scripted, ScriptTurn};
/// use io_harness::{run, RunOutcome, Store, TaskContract, Verification};
/// use serde_json::json;
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let contract = TaskContract::workspace(
///     "write hello.txt",
///     dir.path(),
///     Verification::file_contains("hello.txt", "hello"),
/// );
/// let provider = Scripted::new(vec![
///     ScriptTurn::tool("write_file", json!({"path": "hello.txt", "content": "hello\n"})),
///     ScriptTurn::text("Wrote hello.txt."),
/// ]);
/// let store = Store::memory().unwrap();
/// let result = run(&contract, &provider, &store).await.unwrap();
/// assert_eq!(result.outcome, RunOutcome::Success);
/// assert!(result.diff.contains("+hello"));
/// # });
/// ```
///
/// # Cancel safety
///
/// Dropping the future is safe and loses nothing that was committed: a command
/// running in the sandbox is killed (with everything it started) within a second, the
/// MCP servers with it, and the run stays `running` in the store, resumable from its
/// last committed step. A step whose reply was already on record is replayed by the
/// resume, and a call it had started is answered from the intent journal, never run
/// again. To stop a run and get its outcome instead, cancel its [`CancelToken`]
/// ([`RunOptions::cancel_token`]): every wait ends at once and the run ends
/// [`RunOutcome::Cancelled`].
pub async fn run(
    contract: &TaskContract,
    provider: &dyn Provider,
    store: &Store,
) -> Result<RunResult, RunError> {
    run_with(contract, provider, store, RunOptions::default()).await
}

/// [`run`] with an observer, a cancellation token, tools and a policy.
///
/// # Cancel safety
///
/// Dropping the future is safe and loses nothing that was committed: a command
/// running in the sandbox is killed (with everything it started) within a second, the
/// MCP servers with it, and the run stays `running` in the store, resumable from its
/// last committed step. A step whose reply was already on record is replayed by the
/// resume, and a call it had started is answered from the intent journal, never run
/// again. To stop a run and get its outcome instead, cancel its [`CancelToken`]
/// ([`RunOptions::cancel_token`]): every wait ends at once and the run ends
/// [`RunOutcome::Cancelled`].
pub async fn run_with(
    contract: &TaskContract,
    provider: &dyn Provider,
    store: &Store,
    options: RunOptions,
) -> Result<RunResult, RunError> {
    let kind = session::SessionKind::Fresh { contract };
    let session = session::Session::open(kind, provider, store, options).await?;
    let run_id = session.run_id();
    session.drive().await.map_err(|e| e.in_run(run_id))
}

/// Continues an interrupted or resumable run from its last committed step, with the
/// stored contract and its budgets carried over.
///
/// # Cancel safety
///
/// Dropping the future is safe and loses nothing that was committed: a command
/// running in the sandbox is killed (with everything it started) within a second, the
/// MCP servers with it, and the run stays `running` in the store, resumable from its
/// last committed step. A step whose reply was already on record is replayed by the
/// resume, and a call it had started is answered from the intent journal, never run
/// again. To stop a run and get its outcome instead, cancel its [`CancelToken`]
/// ([`RunOptions::cancel_token`]): every wait ends at once and the run ends
/// [`RunOutcome::Cancelled`].
pub async fn resume(
    store: &Store,
    run_id: i64,
    provider: &dyn Provider,
) -> Result<RunResult, RunError> {
    resume_with(store, run_id, provider, None, RunOptions::default()).await
}

/// [`resume`] with options; `contract`, when given, must equal the stored one.
pub async fn resume_with(
    store: &Store,
    run_id: i64,
    provider: &dyn Provider,
    contract: Option<&TaskContract>,
    options: RunOptions,
) -> Result<RunResult, RunError> {
    let kind = session::SessionKind::Resume {
        run_id,
        given: contract,
    };
    let session = session::Session::open(kind, provider, store, options).await?;
    let run_id = session.run_id();
    session.drive().await.map_err(|e| e.in_run(run_id))
}

/// The stored contract of a run.
pub fn stored_contract(store: &Store, run_id: i64) -> Result<TaskContract, RunError> {
    let rec = store.run(run_id)?.ok_or(RunError::NoSuchRun(run_id))?;
    session::contract_of(&rec)
}

/// Runs a sub-agent of the stored run `parent_run_id` from outside its loop: for an
/// embedding program that orchestrates on its own, between or after the parent's
/// sessions. The child is contained exactly as one spawned with the `spawn_agent`
/// tool (see [`AgentSpec`]): its root inside the parent's working tree, its policy the
/// parent's (`options.policy`, else the parent's stored layers) or narrower, its budget
/// carved from what the parent has left after its committed steps and earlier
/// children, its depth bounded by the parent's `[agents] max_depth`. It is linked to
/// the parent after the parent's last committed step, so a later resume of the parent
/// counts its usage.
///
/// A spec the parent's terms refuse (widening rules, a depth or budget with nothing
/// left, a root outside the workspace) is [`RunError::SpawnRefused`].
pub async fn spawn_agent(
    store: &Store,
    parent_run_id: i64,
    spec: &AgentSpec,
    provider: &dyn Provider,
    options: RunOptions,
) -> Result<RunResult, RunError> {
    session::spawn_from_record(store, parent_run_id, spec, provider, options).await
}

/// The values of the credentials a contract hands out: each MCP server's bearer token
/// (`bearer_token_env`) and each variable `[sandbox] env` or a server's `env` passes
/// by a name that says it is one ([`crate::redact::credential_name`]). A run redacts
/// them like the provider's key; so does a command that prints what a contract's
/// servers said (`io-harness mcp list`).
pub fn credentials_of(contract: &TaskContract) -> Vec<String> {
    let mut names: Vec<(String, bool)> = contract
        .sandbox
        .env
        .iter()
        .map(|n| (n.clone(), false))
        .collect();
    for m in &contract.mcp {
        match &m.transport {
            crate::mcp::McpTransport::Stdio { env, .. } => {
                names.extend(env.iter().map(|n| (n.clone(), false)));
            }
            crate::mcp::McpTransport::Http {
                bearer_token_env, ..
            } => names.extend(bearer_token_env.iter().map(|n| (n.clone(), true))),
        }
    }
    names
        .into_iter()
        .filter(|(n, always)| *always || crate::redact::credential_name(n))
        .filter_map(|(n, _)| std::env::var(&n).ok())
        .collect()
}
