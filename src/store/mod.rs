//! The run store: one SQLite file (WAL) that holds everything needed to answer, after
//! the fact, what a run did — and to resume it.
//!
//! STUB: the types are final; the method bodies are being implemented.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Failure of a store operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite said no.
    #[error("store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The file could not be opened or its directory created.
    #[error("store {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file was written by a newer io-harness.
    #[error("store schema version {found} is newer than this io-harness supports ({supported})")]
    TooNew {
        /// Version in the file.
        found: u32,
        /// Newest this build knows.
        supported: u32,
    },
    /// A run id that does not exist.
    #[error("no run with id {0}")]
    NoSuchRun(i64),
}

/// A store result.
pub type Result<T> = std::result::Result<T, StoreError>;

/// One event in the life of a sandboxed execution (seed 000).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxEvent {
    /// The run.
    pub run_id: i64,
    /// The step.
    pub step: u32,
    /// The kind.
    pub kind: String,
    /// The backend.
    pub backend: Option<String>,
    /// Detail.
    pub detail: Option<String>,
}

/// One policy decision as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyEvent {
    /// The run.
    pub run_id: i64,
    /// The step.
    pub step: u32,
    /// `read`, `write`, `exec`, `net`.
    pub act: String,
    /// Path, command or host.
    pub target: String,
    /// `allow`, `ask`, `deny`.
    pub decision: String,
    /// The rule that decided.
    pub rule: String,
    /// Its layer.
    pub layer: String,
}

/// What is known of a run when it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    /// Goal.
    pub goal: String,
    /// Workspace root as given.
    pub root: String,
    /// Directory the agent actually works in (the copy for `workspace = "copy"`).
    pub work_dir: String,
    /// The resolved contract, JSON.
    pub contract_json: String,
    /// Provider identity, JSON.
    pub provider_json: String,
    /// Parent run for sub-agents.
    pub parent_run_id: Option<i64>,
    /// The run's scratch directory (workspace copy or baseline), kept for resume.
    pub scratch_dir: Option<String>,
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Id.
    pub id: i64,
    /// Goal.
    pub goal: String,
    /// Workspace root.
    pub root: String,
    /// Where the agent worked.
    pub work_dir: Option<String>,
    /// `running`, `finished`.
    pub status: String,
    /// Outcome name (`success`, `verification_failed`…) once finished.
    pub outcome: Option<String>,
    /// Outcome as JSON (with its fields) once finished.
    pub outcome_json: Option<String>,
    /// Resolved contract, JSON (absent for runs made by `start_run`).
    pub contract_json: Option<String>,
    /// Provider identity, JSON.
    pub provider_json: Option<String>,
    /// Parent run.
    pub parent_run_id: Option<i64>,
    /// Scratch directory (workspace copy or baseline).
    pub scratch_dir: Option<String>,
    /// Unix ms.
    pub started_at_ms: i64,
    /// Unix ms.
    pub finished_at_ms: Option<i64>,
    /// Committed steps.
    pub steps: u32,
    /// Summed usage over committed steps.
    pub input_tokens: u64,
    /// Summed.
    pub output_tokens: u64,
    /// Summed (steps that did not report count as 0 here; see `steps`).
    pub cached_input_tokens: u64,
    /// Summed over steps whose cost is known; `None` when no step's cost is known.
    pub cost_usd: Option<f64>,
    /// Steps whose cost is unknown.
    pub cost_unknown_steps: u32,
    /// The agent's final message.
    pub final_message: Option<String>,
    /// Final unified diff of the workspace.
    pub diff: Option<String>,
}

/// One tool call of a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// Provider call id.
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// Arguments, JSON.
    pub input_json: String,
    /// What the model was shown.
    pub output: String,
    /// Failed or refused.
    pub is_error: bool,
    /// Set when refused for crossing the workspace boundary.
    pub confinement_refusal: Option<String>,
    /// Wall time.
    pub duration_ms: u64,
}

/// One committed step: everything needed to show it and to resume after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Run.
    pub run_id: i64,
    /// 1-based step number.
    pub step: u32,
    /// Unix ms.
    pub started_at_ms: i64,
    /// Whole step wall time.
    pub duration_ms: u64,
    /// Model call wall time.
    pub model_ms: u64,
    /// Exact request body (stored content-addressed; identical bodies once).
    #[serde(skip)]
    pub request_body: Option<Vec<u8>>,
    /// SHA-256 hex of the request body, filled by the store.
    pub request_hash: Option<String>,
    /// The model's reply: `Completion` content blocks, JSON.
    pub reply_json: String,
    /// Messages this step appended to the conversation (reply, tool results,
    /// verification observation), JSON array of `Message` — replayed by resume.
    pub messages_json: String,
    /// Usage, JSON of `Usage`.
    pub usage_json: String,
    /// Tokens, summed for run totals.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cached input tokens.
    pub cached_input_tokens: Option<u64>,
    /// Cost when known.
    pub cost_usd: Option<f64>,
    /// `reported`, `price_table`, `script`, `unknown`.
    pub cost_source: String,
    /// Tool calls.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Policy decisions of this step (committed in the same transaction).
    pub policy_events: Vec<PolicyEvent>,
    /// Run-loop counters after this step (verify attempts, elapsed ms…), JSON, for
    /// resume.
    pub state_json: String,
}

/// A tool call about to happen: written before it runs, completed after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolIntent {
    /// Run.
    pub run_id: i64,
    /// Step.
    pub step: u32,
    /// Provider call id.
    pub call_id: String,
    /// Tool name.
    pub tool: String,
    /// Arguments, JSON.
    pub input_json: String,
    /// Planned actions, JSON.
    pub actions_json: String,
}

/// A journal row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolIntentRecord {
    /// Row id.
    pub id: i64,
    /// The intent.
    pub intent: ToolIntent,
    /// `pending`, `done`, `failed`.
    pub status: String,
    /// File effects (hashes before/after), JSON, once done.
    pub effects_json: Option<String>,
}

/// How a run ended, for [`Store::finish_run`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFinish {
    /// Outcome name.
    pub outcome: String,
    /// Outcome JSON.
    pub outcome_json: String,
    /// Final message.
    pub final_message: Option<String>,
    /// Final diff.
    pub diff: Option<String>,
}

/// The store handle. Cheap to clone; one connection per handle, shared by its clones.
#[derive(Clone)]
pub struct Store {
    _priv: (),
}

impl Store {
    /// Opens (creating if needed) a store file.
    pub fn open(_path: impl AsRef<Path>) -> Result<Store> {
        todo!()
    }
    /// An in-memory store.
    pub fn memory() -> Result<Store> {
        todo!()
    }
    /// Values to redact from everything written from now on.
    pub fn redact_secrets(&self, _values: &[String]) {
        todo!()
    }
    /// Starts a bare run (seed API).
    pub fn start_run(&self, _goal: &str, _root: &str) -> Result<i64> {
        todo!()
    }
    /// Starts a run with its resolved contract.
    pub fn create_run(&self, _run: &NewRun) -> Result<i64> {
        todo!()
    }
    /// One run.
    pub fn run(&self, _run_id: i64) -> Result<Option<RunRecord>> {
        todo!()
    }
    /// All runs, newest first.
    pub fn runs(&self) -> Result<Vec<RunRecord>> {
        todo!()
    }
    /// Commits a step atomically.
    pub fn commit_step(&self, _step: &StepRecord) -> Result<()> {
        todo!()
    }
    /// Committed steps of a run, in order.
    pub fn steps(&self, _run_id: i64) -> Result<Vec<StepRecord>> {
        todo!()
    }
    /// Marks a run finished.
    pub fn finish_run(&self, _run_id: i64, _fin: &RunFinish) -> Result<()> {
        todo!()
    }
    /// Marks a finished-but-resumable run running again.
    pub fn reopen_run(&self, _run_id: i64) -> Result<()> {
        todo!()
    }
    /// Journals an intent; returns its id.
    pub fn journal_intent(&self, _intent: &ToolIntent) -> Result<i64> {
        todo!()
    }
    /// Completes an intent.
    pub fn journal_complete(&self, _id: i64, _ok: bool, _effects_json: &str) -> Result<()> {
        todo!()
    }
    /// The journal of a run.
    pub fn journal(&self, _run_id: i64) -> Result<Vec<ToolIntentRecord>> {
        todo!()
    }
    /// Records a sandbox event.
    pub fn record_sandbox_event(&self, _e: &SandboxEvent) -> Result<()> {
        todo!()
    }
    /// Sandbox events of a run.
    pub fn sandbox_events(&self, _run_id: i64) -> Result<Vec<SandboxEvent>> {
        todo!()
    }
    /// Records a policy event outside a step commit.
    pub fn record_policy_event(&self, _e: &PolicyEvent) -> Result<()> {
        todo!()
    }
    /// Policy events of a run.
    pub fn policy_events(&self, _run_id: i64) -> Result<Vec<PolicyEvent>> {
        todo!()
    }
    /// A stored blob by hash.
    pub fn blob(&self, _hash: &str) -> Result<Option<Vec<u8>>> {
        todo!()
    }
}
