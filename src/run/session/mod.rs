//! A run session: one process driving one run from [`Session::open`] to its outcome.
//!
//! A session starts one way, whatever started it: [`Session::open`] with a
//! [`SessionKind`] — a fresh root run, a resumed run, or a sub-agent — so the store
//! rows, the policy, the sandbox and executor, the MCP servers, the context assembler
//! and the restored budgets are set up once, with the differences between the kinds
//! written as data (`open`). [`Session::drive`] then steps it (`step`: budget check →
//! model → tools → stall → verify → commit → decide) and records the outcome
//! (`finish`).
//!
//! The session's state is grouped by what it is for, so each part can be read (and
//! borrowed) on its own: [`Identity`] (which run, under what contract, where),
//! [`Conversation`] (what the model is told), [`Progress`] (what budgets are checked
//! against), [`ToolEnv`] (where tool calls run and what decides them) and
//! [`Carryover`] (what an interrupted session left to the first step of this one).
//! Every store call goes through [`AsyncStore`], off the async worker threads.

mod agent;
mod approval;
mod child;
mod commit;
mod environment;
mod finish;
mod journal;
mod model;
mod open;
mod restore;
mod step;
mod stored;
mod tool_call;
mod verify_step;

pub(super) use child::spawn_from_record;
pub(super) use open::SessionKind;
pub(super) use stored::contract_of;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::RunOptions;
use super::budget::Totals;
use super::events::{Flow, RunEvent};
use super::liveness::RunLock;
use super::stall::StallDetector;
use super::state::LoopState;
use super::workdir::WorkDirs;
use crate::context::ContextRunner;
use crate::contract::TaskContract;
use crate::halt::{Halt, HaltReason};
use crate::mcp::McpServers;
use crate::policy::{Policy, PolicyGate};
use crate::provider::{Completion, Message, Provider};
use crate::store::AsyncStore;
use crate::tools::ToolContext;

/// One run being driven by this process.
pub(super) struct Session<'a> {
    run: Identity,
    provider: &'a dyn Provider,
    store: AsyncStore,
    opts: RunOptions,
    tools: ToolEnv,
    conversation: Conversation,
    progress: Progress,
    carryover: Carryover,
    /// The cancel token and this session's deadline, observed by every wait: the
    /// model call, each command (through the executor), each gate, MCP call and
    /// approval prompt.
    halt: Halt,
}

/// Which run this session drives, under what terms and where: fixed from open to
/// finish.
struct Identity {
    /// The run's id in the store.
    id: i64,
    /// 0 for a root run, 1 for its sub-agents…
    depth: u32,
    /// Whether this session continues a run an earlier session started.
    resumed: bool,
    contract: TaskContract,
    dirs: WorkDirs,
    /// This process's hold on the run (see `liveness`): released when the session
    /// ends, however it ends.
    _lock: RunLock,
}

/// What the model is told: the system prompt, the full history, and the assembler
/// that fits it into the context budget for each request (C16).
struct Conversation {
    system: String,
    messages: Vec<Message>,
    context: ContextRunner,
    /// The frame of untrusted text in this run (named in the first message).
    boundary: crate::untrusted::Boundary,
}

/// What the budgets are checked against, and what every commit keeps so a resume
/// continues with it.
struct Progress {
    /// Tokens, cost and steps so far (the sub-agents' included).
    totals: Totals,
    /// Verification and stall counters, and the wall time of earlier sessions.
    state: LoopState,
    /// When this session opened: the wall time of this session.
    session_start: Instant,
    /// The wall time of earlier sessions, as stored when this one opened. Fixed for
    /// the session: each commit stores `earlier + this session's time`, never the
    /// stored figure plus the session's time again (that grew quadratically).
    earlier: Duration,
    stall: StallDetector,
    /// This session's ordinal among the run's sessions (`run_sessions`), once its
    /// start is on record; `None` if the store could not take it (the run goes on).
    ordinal: Option<u32>,
}

/// Where tool calls run and what decides them.
struct ToolEnv {
    /// The workspace, the executor and the memory tools.
    ctx: ToolContext,
    /// The contract's MCP servers, when it declares any.
    mcp: Option<McpServers>,
    policy: RunPolicy,
}

/// The gate every action passes, and the record of its layers.
struct RunPolicy {
    gate: Arc<dyn PolicyGate>,
    /// The policy the harness built, whose layers are kept with the run (`None` when
    /// the caller gave the gate).
    owned: Option<Arc<Policy>>,
    /// The layers last written to the store.
    saved: String,
}

/// What an interrupted session left to the first step of this one; empty for a
/// fresh run, and used up by the first step.
#[derive(Default)]
struct Carryover {
    /// The journal of the interrupted step: what its calls already did (see
    /// `journal`), used up call by call as the replayed reply's calls come.
    journal: Vec<crate::store::ToolIntentRecord>,
    /// Said to the model in the first step (commands whose result is unknown), when
    /// the interrupted step's reply was not on record and the model is asked again.
    notes: Vec<String>,
    /// The model reply of the interrupted step, replayed: its calls are the ones the
    /// journal answers.
    replay: Option<Replay>,
}

/// A reply on record for a step that was not committed.
struct Replay {
    reply: Completion,
    /// Which provider had answered, as recorded (or where the reply was kept).
    served_by: Option<String>,
    model_ms: u64,
}

/// Why a step ended the run without being committed.
enum StepEnd {
    /// An outcome reached before the commit (cancel, time, provider failure).
    Outcome(super::RunOutcome),
    /// The store refused a write the step cannot go on without (the commit, the
    /// reply, an intent).
    Store(crate::store::StoreError),
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Progress {
    /// Counters carried into a session that starts now.
    fn starting(totals: Totals, state: LoopState, stall: StallDetector) -> Self {
        Self {
            totals,
            earlier: Duration::from_millis(state.elapsed_ms),
            state,
            session_start: Instant::now(),
            stall,
            ordinal: None,
        }
    }

    /// Wall time of the run: earlier sessions' and this one's.
    fn elapsed(&self) -> Duration {
        self.earlier + self.session_start.elapsed()
    }
}

impl Session<'_> {
    /// The one place observer events go out; an observer's `Cancel` cancels the run.
    fn emit(&self, event: RunEvent) {
        if let Some(o) = &self.opts.observer
            && o.on_event(&event) == Flow::Cancel
        {
            self.opts.cancel.cancel();
        }
    }

    fn elapsed(&self) -> Duration {
        self.progress.elapsed()
    }

    /// The run's id in the store.
    pub(super) fn run_id(&self) -> i64 {
        self.run.id
    }
}

/// The outcome a halted wait ends the run with.
fn halted(why: HaltReason) -> super::RunOutcome {
    match why {
        HaltReason::Cancelled => super::RunOutcome::Cancelled,
        HaltReason::Deadline => super::RunOutcome::TimeBudgetExceeded,
    }
}

/// How long a wait that observes the halt itself (a command, which records why it
/// stopped) gets to finish after the halt before it is dropped.
const HALT_GRACE: Duration = Duration::from_millis(500);
