//! Runs a batch's tasks in one process: at most `jobs` at once (a semaphore), each a
//! normal run (or the resume of one) with its own record. Tasks working in place on
//! one workspace take turns: a task waits for its workspace before it takes a job
//! slot, so a waiting task never holds one, and a workspace another process holds
//! (`WorkspaceBusy`) is waited for too, polled every half second. Ctrl-C cancels
//! every running run (each ends `Cancelled`, resumable) and starts no more.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use io_harness::TaskContract;
use io_harness::contract::WorkspaceMode;
use io_harness::run::{CancelToken, RunError, RunOptions, SharedCost};
use io_harness::store::RunSetting;
use tokio::sync::{Mutex, Semaphore};

use super::batch_progress::{BatchProgress, TaskObserver};
use super::{CliError, ProviderArgs, drive, provider_args};

/// How a task's run is to begin this session.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Start {
    /// A new run.
    Fresh,
    /// The resume of this run.
    Resume(i64),
    /// Nothing to do: the run ended earlier.
    Ended,
}

/// One task of the batch with what it starts from.
pub struct Slot {
    pub position: u32,
    pub contract: TaskContract,
    pub settings: Vec<RunSetting>,
    pub start: Start,
}

/// What every task of the session shares.
pub struct Shared {
    pub store: io_harness::Store,
    pub batch_id: i64,
    pub cancel: CancelToken,
    pub cost: Option<SharedCost>,
    pub keep: bool,
    pub progress: Arc<BatchProgress>,
    /// Provider flags given to `batch --resume` (a fresh batch applied them when it
    /// resolved each task).
    pub provider: ProviderArgs,
}

/// How a task's session ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    pub position: u32,
    /// The exit code of its outcome or error; `None`: it did not start (cancelled
    /// first) or had ended before this session.
    pub code: Option<i32>,
    /// The error that ended it, when it had no outcome.
    pub error: Option<String>,
}

/// Runs every slot, `jobs` at once; returns how each ended, in position order.
pub async fn run_all(slots: Vec<Slot>, jobs: u32, shared: Arc<Shared>) -> Vec<Ended> {
    let sem = Arc::new(Semaphore::new(jobs.max(1) as usize));
    let mut places: HashMap<PathBuf, Arc<Mutex<()>>> = HashMap::new();
    let mut set = tokio::task::JoinSet::new();
    let mut ended = Vec::new();
    for slot in slots {
        if slot.start == Start::Ended {
            ended.push(Ended {
                position: slot.position,
                code: None,
                error: None,
            });
            continue;
        }
        let place = (slot.contract.workspace == WorkspaceMode::InPlace).then(|| {
            let key = std::fs::canonicalize(&slot.contract.root)
                .unwrap_or_else(|_| slot.contract.root.clone());
            places.entry(key).or_default().clone()
        });
        set.spawn(one(slot, shared.clone(), sem.clone(), place));
    }
    while let Some(done) = set.join_next().await {
        match done {
            Ok(e) => ended.push(e),
            Err(e) => errln!("error: a batch task panicked: {e}"),
        }
    }
    ended.sort_by_key(|e| e.position);
    ended
}

fn not_started(position: u32) -> Ended {
    Ended {
        position,
        code: None,
        error: None,
    }
}

/// One task: its workspace's turn, a job slot, then its run (again while the
/// workspace is busy elsewhere).
async fn one(
    slot: Slot,
    shared: Arc<Shared>,
    sem: Arc<Semaphore>,
    place: Option<Arc<Mutex<()>>>,
) -> Ended {
    let cancel = shared.cancel.clone();
    let _turn = match &place {
        Some(m) => tokio::select! {
            g = m.lock() => Some(g),
            _ = cancel.cancelled() => return not_started(slot.position),
        },
        None => None,
    };
    let _permit = tokio::select! {
        p = sem.acquire() => p,
        _ = cancel.cancelled() => return not_started(slot.position),
    };
    if cancel.is_cancelled() {
        return not_started(slot.position);
    }
    let chain = match chain_for(&slot, &shared) {
        Ok(c) => c,
        Err(e) => return refused(&slot, &shared, e.to_string(), 2),
    };
    loop {
        match attempt(&slot, &shared, &chain).await {
            Ok((run_id, outcome)) => {
                let _ = super::keep::settle(&shared.store, run_id, &outcome, shared.keep);
                let line = format!(
                    "{} (run {run_id})",
                    serde_json::to_string(&outcome).unwrap_or_default()
                );
                shared.progress.ended(slot.position, &line, &chain.secrets);
                return Ended {
                    position: slot.position,
                    code: Some(outcome.exit_code()),
                    error: None,
                };
            }
            Err(RunError::WorkspaceBusy { path, holder }) => {
                let note = format!("waiting for workspace {path} (held by {holder})");
                shared.progress.note(slot.position, &note, &chain.secrets);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    _ = cancel.cancelled() => return not_started(slot.position),
                }
            }
            Err(e) => {
                let code = e.exit_code();
                let text = CliError::from(e).to_string();
                return refused(&slot, &shared, text, code);
            }
        }
    }
}

/// The task's provider chain: as resolved for a fresh task; for a resume, the stored
/// provider with `batch --resume`'s provider flags over it (as `resume` does).
fn chain_for(slot: &Slot, shared: &Shared) -> Result<drive::Chain, CliError> {
    let spec = match slot.start {
        Start::Resume(_) => {
            provider_args::merge(slot.contract.providers.first(), &shared.provider)?
        }
        _ => slot
            .contract
            .providers
            .first()
            .cloned()
            .ok_or_else(|| CliError::Usage("the task names no provider".into()))?,
    };
    drive::chain(&slot.contract, &spec)
}

/// A task that ended without an outcome: refused at start (code 2, recorded with the
/// task) or failed inside the harness (70).
fn refused(slot: &Slot, shared: &Shared, text: String, code: i32) -> Ended {
    if code == 2
        && let Err(e) = shared
            .store
            .refuse_batch_task(shared.batch_id, slot.position, &text)
    {
        errln!(
            "warning: the refusal of task {} was not stored: {e}",
            slot.position
        );
    }
    let secrets = io_harness::redact::Redactor::default();
    shared
        .progress
        .ended(slot.position, &format!("error: {text}"), &secrets);
    Ended {
        position: slot.position,
        code: Some(code),
        error: Some(text),
    }
}

/// One try at the task's run.
async fn attempt(
    slot: &Slot,
    shared: &Shared,
    chain: &drive::Chain,
) -> Result<(i64, io_harness::RunOutcome), RunError> {
    let fresh = slot.start == Start::Fresh;
    let shown: Arc<dyn io_harness::run::Observer> = Arc::new(TaskObserver {
        position: slot.position,
        progress: shared.progress.clone(),
        secrets: chain.secrets.clone(),
        link: fresh.then(|| (shared.store.clone(), shared.batch_id)),
    });
    let observer: Arc<dyn io_harness::run::Observer> = if fresh && !slot.settings.is_empty() {
        Arc::new(super::settings_observer::RecordSettings::new(
            shown,
            shared.store.clone(),
            slot.settings.clone(),
        ))
    } else {
        shown
    };
    let mut options = RunOptions::default()
        .observer(observer)
        .cancel_token(shared.cancel.clone());
    options.fallbacks = chain.fallbacks.clone();
    options.shared_cost = shared.cost.clone();
    let provider = chain.primary.as_ref();
    let r = match slot.start {
        Start::Resume(id) => {
            io_harness::run::resume_with(&shared.store, id, provider, None, options).await?
        }
        _ => io_harness::run_with(&slot.contract, provider, &shared.store, options).await?,
    };
    Ok((r.run_id, r.outcome))
}
