//! The records the store writes and reads: plain data, shared with the run loop, the
//! CLI's `show` and `runs`, and resume.

use serde::{Deserialize, Serialize};

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
    /// The policy layers in force (`PolicyLayers`, JSON), when the run has a policy.
    #[serde(default)]
    pub policy_json: Option<String>,
    /// The run's first messages as sent (JSON array of `Message`): goal, instructions
    /// and the memory notes offered.
    #[serde(default)]
    pub initial_json: Option<String>,
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
    /// Appends to the audit log that failed during the run (the log never fails a run;
    /// this says what it missed).
    #[serde(default)]
    pub audit_failures: u64,
    /// The run's wall time as last known, kept while its sessions run (a session cut
    /// off between two commits hands on the time it spent); `None` for runs stored
    /// before it was kept.
    #[serde(default)]
    pub elapsed_ms: Option<u64>,
    /// Model calls whose reply was lost (their estimated input is in `input_tokens`).
    #[serde(default)]
    pub lost_calls: u64,
    /// The part of the token totals that is the harness's estimate (steps the
    /// provider reported no usage for, and lost calls), not the provider's report.
    #[serde(default)]
    pub estimated_tokens: u64,
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
    /// The model's reply: `Completion` content blocks, JSON. Empty in the steps the run
    /// loop commits, whose reply is the first message of `messages_json`: a reply is
    /// stored once (a 50 MB reply was stored three times).
    pub reply_json: String,
    /// Messages this step appended to the conversation (reply, tool results,
    /// verification observation), JSON array of `Message` — replayed by resume.
    pub messages_json: String,
    /// Usage, JSON of `Usage`: the reported fields (absent where the provider said
    /// nothing) and the harness's estimate.
    pub usage_json: String,
    /// Uncached input tokens as the budget counted them (reported, else estimated; see
    /// `token_source`), summed for run totals.
    pub input_tokens: u64,
    /// Output tokens as the budget counted them.
    pub output_tokens: u64,
    /// `reported` when the provider reported input and output, `estimated` when the
    /// counts above are (in part) the harness's estimate.
    #[serde(default = "reported")]
    pub token_source: String,
    /// The harness's estimate of the request's input tokens (`None` in steps stored
    /// before estimates were kept).
    #[serde(default)]
    pub estimated_input_tokens: Option<u64>,
    /// The harness's estimate of the reply's tokens.
    #[serde(default)]
    pub estimated_output_tokens: Option<u64>,
    /// The model call this step's reply answered, closed by the commit.
    #[serde(default)]
    pub model_call: Option<i64>,
    /// Cached input tokens.
    pub cached_input_tokens: Option<u64>,
    /// Cost when known.
    pub cost_usd: Option<f64>,
    /// `reported`, `price_table`, `script`, `estimated` (priced on estimated tokens),
    /// `unknown`.
    pub cost_source: String,
    /// Tool calls.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Policy decisions of this step (committed in the same transaction).
    pub policy_events: Vec<PolicyEvent>,
    /// Run-loop counters after this step (verify attempts, elapsed ms…), JSON, for
    /// resume.
    pub state_json: String,
    /// The provider that served this step (`kind/model`), when known.
    #[serde(default)]
    pub provider: Option<String>,
    /// Why the model stopped (`end_turn`, `tool_use`, `max_tokens`, or the provider's
    /// own word); `None` in steps stored before it was kept.
    #[serde(default)]
    pub stop_reason: Option<String>,
}

/// A failed provider call that was retried or fallen back from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderAttempt {
    /// Run.
    pub run_id: i64,
    /// The step the call was for.
    pub step: u32,
    /// `kind/model` of the provider that failed.
    pub provider: String,
    /// Attempt number with that provider (1-based; the `escalate` row, which records
    /// the failure that ended the run, carries the number of that last attempt; rows
    /// stored before numbers were kept there say 0).
    pub attempt: u32,
    /// Failure kind (`rate-limited`, `server`…).
    pub kind: String,
    /// HTTP status, when there was one.
    pub status: Option<u16>,
    /// Wait before the next attempt.
    pub delay_ms: u64,
    /// `retry` (same provider again), `fallback` (the next provider), `deadline` (the
    /// wait is cut to the time budget, which ends the run), `escalate` (the run ends on
    /// this failure), `probe-failed` (the circuit breaker's one-attempt probe of the
    /// primary failed; the provider that served goes on serving) or `tool-error` (kind
    /// `reply-too-large`: the reply was cut at `max_reply_bytes` and is answered with
    /// a tool error, not retried).
    pub next: String,
    /// The provider's own error type or code, when it named one.
    #[serde(default)]
    pub code: Option<String>,
    /// Size of the request in its neutral JSON form, recorded when the run ends on the
    /// failure (a context overflow is about this number).
    #[serde(default)]
    pub request_bytes: Option<u64>,
    /// The harness's estimate of the request's input tokens (none are ever reported
    /// for a failed attempt).
    #[serde(default)]
    pub estimated_input_tokens: Option<u64>,
    /// Whether the request reached the server and its reply was lost (a broken or idle
    /// stream): its estimated input then counts against the token budget (a
    /// `model_calls` row with status `lost` holds the count).
    #[serde(default)]
    pub reply_lost: bool,
    /// What the server (or the client) said went wrong — "model does not exist",
    /// "max_tokens must be greater than thinking.budget_tokens" — at most 4 KiB,
    /// redacted like everything the store writes (`None` in rows stored before).
    #[serde(default)]
    pub message: Option<String>,
    /// When the attempt was written: as it happened, not when its step ended
    /// (milliseconds since the Unix epoch; 0 before it is stored).
    #[serde(default)]
    pub at_ms: i64,
}

/// One model call of a step as the budget sees it: written before the request goes
/// out, so a call in flight when the process dies is still counted on resume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCallRecord {
    /// Row id (what a reply carries as `Completion::model_call`).
    pub id: i64,
    /// Run.
    pub run_id: i64,
    /// Step.
    pub step: u32,
    /// `kind/model` of the provider the call went to first.
    pub provider: String,
    /// The harness's estimate of the request's input tokens.
    pub estimated_input_tokens: u64,
    /// That input at the model's price, when known (an estimate).
    pub estimated_cost_usd: Option<f64>,
    /// `sent` (in flight, or answered and not yet committed), `committed` (its reply's
    /// usage is in the step), `failed` (ended in an error whose attempts are recorded
    /// in `provider_attempts`), or `lost` (its reply never reached a commit: a
    /// retried attempt whose stream broke, a cancel or kill while in flight; its
    /// estimated input counts).
    pub status: String,
}

/// What a model call whose reply was lost adds to a run's totals: all of it an
/// estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LostCall {
    /// The request's estimated input tokens.
    pub input_tokens: u64,
    /// Their estimated cost, when the price is known.
    pub cost_usd: Option<f64>,
}

fn reported() -> String {
    "reported".into()
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
    /// `pending`, `done`, `failed`, or `uncertain` (interrupted, effects unknown).
    pub status: String,
    /// File effects (hashes before/after), JSON, once done.
    pub effects_json: Option<String>,
    /// The result the model was given, once done or failed (absent in journals
    /// written before it was kept).
    pub output: Option<String>,
}

/// How a run ended, for [`Store::finish_run`](crate::store::Store::finish_run).
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

/// An approval request: an action the policy asks about, deferred to a human.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// Run.
    pub run_id: i64,
    /// The id an operator answers (`io-harness approve <run> <request> allow|deny`).
    pub request_id: String,
    /// The step it interrupted.
    pub step: u32,
    /// The tool call it belongs to.
    pub call_id: String,
    /// Tool name.
    pub tool: String,
    /// The call's arguments, JSON.
    pub input_json: String,
    /// The action asked about, JSON.
    pub action_json: String,
    /// The model reply of the interrupted step (`Completion`, JSON), replayed on resume.
    pub reply_json: String,
    /// `pending`, `allowed` or `denied`.
    pub status: String,
    /// The reason given with a denial.
    pub reason: Option<String>,
    /// How far an allow is remembered as a rule for the rest of the run.
    pub remember: crate::contract::policy::Remember,
}

/// One sandboxed command as recorded: what was applied, not what was asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSession {
    /// Run.
    pub run_id: i64,
    /// Step.
    pub step: u32,
    /// `tool` (the agent's command), `gate` (a verification command) or `mcp` (an MCP
    /// stdio server, recorded when the run closes it).
    pub purpose: String,
    /// The backend that actually ran it.
    pub backend: String,
    /// The command, JSON array.
    pub argv_json: String,
    /// The layers the sandbox reported applying, JSON.
    pub layers_json: String,
    /// The caps asked for, JSON.
    pub limits_json: String,
    /// The posture in force: `none`, `allowlist` or `open`.
    pub network: String,
    /// The resolved allowlist in force (posture `allowlist`), JSON array; `[]` otherwise.
    pub allow_hosts_json: String,
    /// Connections the egress proxy refused, as it reported them; `None` when no proxy
    /// watched the session (not observed), `Some(0)` when it watched and refused none.
    pub egress_refusals_reported: Option<u64>,
    /// Connections the egress proxy admitted, as reported; `None` when not observed.
    pub egress_admitted_reported: Option<u64>,
    /// The first distinct hosts refused, JSON array (a hint; the count is the number).
    pub egress_refused_hosts_json: String,
    /// Paths masked inside, JSON array.
    pub masked_json: String,
    /// Names of the variables passed in, JSON array (never values).
    pub env_names_json: String,
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Signal, when one ended it.
    pub signal: Option<i32>,
    /// The enforced cap that ended it.
    pub cap_hit: Option<String>,
    /// Wall time.
    pub duration_ms: u64,
}
