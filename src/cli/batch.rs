//! `io-harness batch TASK…` and `batch --resume ID` (issue 21 item 1): many task runs
//! in one process under one batch id.
//!
//! Every task file is resolved and checked exactly as `run` would (layered
//! configuration, the up-front checks, the provider chain) before any task runs; one
//! bad file refuses the whole batch (exit 2, naming each file and its problem) and
//! nothing is recorded. The batch then goes on record with each task's resolved
//! contract, so `--resume` needs only the store: it resumes each run that was cut off
//! or cancelled and starts each task that never started; tasks that ended stay as
//! they ended. The batch cost budget (`--max-cost`) is one live counter shared by the
//! running tasks ([`io_harness::run::SharedCost`]); a resumed batch starts it from
//! what its runs' records say they cost.

use std::sync::Arc;
use std::time::Instant;

use io_harness::TaskContract;
use io_harness::run::{CancelToken, SharedCost};
use io_harness::store::{BatchRecord, NewBatchTask, RunSetting};

use super::batch_progress::BatchProgress;
use super::batch_run::{Shared, Slot, Start};
use super::layered::{self, Inputs};
use super::{BatchArgs, BudgetArgs, CliError, batch_list, batch_summary, drive, store_path};

/// The per-task memory cap a task gets when its file sets none (SPEC §3).
const DEFAULT_MEMORY_CAP: u64 = 4 << 30;

pub async fn execute(args: BatchArgs) -> Result<i32, CliError> {
    if args.jobs == Some(0) {
        return Err(CliError::Usage("--jobs: must be at least 1".into()));
    }
    if let Some(c) = args.max_cost
        && !(c.is_finite() && c > 0.0)
    {
        return Err(CliError::Usage(format!(
            "--max-cost: {c} is not a positive amount of USD"
        )));
    }
    let (store, batch, slots) = match args.resume {
        Some(id) => {
            let store = store_path::open_existing(&args.store)?;
            let (batch, slots) = reopen(&store, id)?;
            (store, batch, slots)
        }
        None => {
            let checked = validate(&args)?;
            let store = store_path::open(&args.store)?;
            let jobs = args.jobs.unwrap_or_else(|| default_jobs(&checked));
            let batch = record(&store, jobs, args.max_cost, &checked)?;
            let slots = checked
                .into_iter()
                .enumerate()
                .map(|(i, c)| Slot {
                    position: u32::try_from(i + 1).unwrap_or(u32::MAX),
                    contract: c.contract,
                    settings: c.settings,
                    start: Start::Fresh,
                })
                .collect();
            (store, batch, slots)
        }
    };
    let jobs = args.jobs.unwrap_or(batch.jobs);
    go(args, store, batch, slots, jobs).await
}

async fn go(
    args: BatchArgs,
    store: io_harness::Store,
    batch: BatchRecord,
    slots: Vec<Slot>,
    jobs: u32,
) -> Result<i32, CliError> {
    let started = Instant::now();
    store.set_batch_status(batch.id, "running")?;
    let cost = batch
        .max_cost_usd
        .map(|max| SharedCost::new(max, spent(&store, &batch)));
    let done = slots.iter().filter(|s| s.start == Start::Ended).count();
    let progress = Arc::new(BatchProgress::new(args.json, batch.id, slots.len(), done));
    let cancel = CancelToken::new();
    drive::watch_ctrl_c(cancel.clone());
    let shared = Arc::new(Shared {
        store: store.clone(),
        batch_id: batch.id,
        cancel: cancel.clone(),
        cost: cost.clone(),
        keep: args.keep,
        progress: progress.clone(),
        provider: args.provider.clone(),
    });
    let ended = super::batch_run::run_all(slots, jobs, shared).await;
    progress.finish_line();
    let cancelled = cancel.is_cancelled();
    let batch = store.batch(batch.id)?.unwrap_or(batch);
    let rows = batch_summary::rows(&store, &batch, &ended);
    let open = rows
        .iter()
        .any(|r| matches!(r.state, "unfinished" | "not_started"));
    let status = if cancelled {
        "cancelled"
    } else if open {
        "interrupted"
    } else {
        "finished"
    };
    store.set_batch_status(batch.id, status)?;
    let code = batch_summary::exit_code(cancelled, &rows);
    let heading = batch_summary::Heading {
        batch: &batch,
        status,
        jobs,
        spent: cost.as_ref().map(SharedCost::spent),
        session_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        code,
    };
    batch_summary::print(&heading, &rows, args.json);
    Ok(code)
}

/// A task file resolved and checked as `run` checks it.
struct Checked {
    source: String,
    contract: TaskContract,
    settings: Vec<RunSetting>,
}

/// Resolves and checks every task file; all problems are reported at once.
fn validate(args: &BatchArgs) -> Result<Vec<Checked>, CliError> {
    let listed = batch_list::expand(&args.tasks)?;
    let mut checked = Vec::new();
    let mut problems = Vec::new();
    for l in listed {
        match check_one(&l.file, args) {
            Ok((contract, settings)) => checked.push(Checked {
                source: l.source,
                contract,
                settings,
            }),
            Err(e) => problems.push(format!("{}: {e}", l.source)),
        }
    }
    if !problems.is_empty() {
        return Err(CliError::Usage(format!(
            "batch: {} of {} task file(s) refused, nothing ran:\n{}",
            problems.len(),
            problems.len() + checked.len(),
            problems.join("\n")
        )));
    }
    Ok(checked)
}

fn check_one(
    file: &std::path::Path,
    args: &BatchArgs,
) -> Result<(TaskContract, Vec<RunSetting>), CliError> {
    let resolved = layered::resolve(&Inputs {
        task: Some(file),
        project: None,
        provider: &args.provider,
        budget: &BudgetArgs::default(),
        require_sandbox: None,
        goal_run: None,
    })?;
    TaskContract::from_file_to_run(file).map_err(|e| CliError::Usage(e.to_string()))?;
    let contract = resolved.contract;
    let spec = contract.providers.first().cloned().ok_or_else(|| {
        CliError::Usage(
            "no provider: pass --provider, set IO_HARNESS_PROVIDER, or add a [provider] \
             section to the task file or the user config"
                .into(),
        )
    })?;
    drive::chain(&contract, &spec)?;
    Ok((contract, layered::to_store(&resolved.settings)))
}

/// Puts the new batch on record.
fn record(
    store: &io_harness::Store,
    jobs: u32,
    max_cost: Option<f64>,
    checked: &[Checked],
) -> Result<BatchRecord, CliError> {
    let tasks: Vec<NewBatchTask> = checked
        .iter()
        .map(|c| NewBatchTask {
            source: c.source.clone(),
            contract_json: serde_json::to_string(&c.contract).unwrap_or_default(),
            settings_json: serde_json::to_string(&c.settings).unwrap_or_default(),
        })
        .collect();
    let id = store.create_batch(jobs, max_cost, &tasks)?;
    store
        .batch(id)?
        .ok_or_else(|| CliError::Internal(format!("batch {id} vanished from the store")))
}

/// A stored batch's tasks with what each starts from this session.
fn reopen(store: &io_harness::Store, id: i64) -> Result<(BatchRecord, Vec<Slot>), CliError> {
    let batch = store
        .batch(id)?
        .ok_or_else(|| CliError::Usage(format!("no batch with id {id}")))?;
    let mut slots = Vec::new();
    for t in &batch.tasks {
        let corrupt = |what: &str, e: serde_json::Error| {
            CliError::Internal(format!(
                "batch {id} task {}: stored {what} is unreadable: {e}",
                t.position
            ))
        };
        let contract: TaskContract =
            serde_json::from_str(&t.contract_json).map_err(|e| corrupt("contract", e))?;
        let settings: Vec<RunSetting> =
            serde_json::from_str(&t.settings_json).map_err(|e| corrupt("settings", e))?;
        let start = match t.run_id {
            None => Start::Fresh,
            Some(run_id) => match store.run(run_id)? {
                Some(r) if ended(&r) => Start::Ended,
                _ => Start::Resume(run_id),
            },
        };
        slots.push(Slot {
            position: t.position,
            contract,
            settings,
            start,
        });
    }
    Ok((batch, slots))
}

/// Whether a run's outcome is final (nothing for `--resume` to do).
fn ended(r: &io_harness::store::RunRecord) -> bool {
    r.outcome_json
        .as_deref()
        .and_then(|j| serde_json::from_str::<io_harness::RunOutcome>(j).ok())
        .is_some_and(|o| !o.is_resumable())
}

/// What the batch's runs have cost so far, as their records say (known costs).
fn spent(store: &io_harness::Store, batch: &BatchRecord) -> f64 {
    batch
        .tasks
        .iter()
        .filter_map(|t| t.run_id)
        .filter_map(|id| store.run(id).ok().flatten())
        .filter_map(|r| r.cost_usd)
        .sum()
}

/// min(cores, memory ÷ the largest per-task memory cap), at least 1.
fn default_jobs(checked: &[Checked]) -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let caps: Vec<Option<u64>> = checked
        .iter()
        .map(|c| c.contract.sandbox.limits.memory)
        .collect();
    jobs_for(cores, total_memory(), &caps)
}

/// The default job count from the machine (`memory`: `None` when unknown) and the
/// tasks' memory caps (`None`: the default cap).
fn jobs_for(cores: u64, memory: Option<u64>, caps: &[Option<u64>]) -> u32 {
    let cap = caps
        .iter()
        .map(|c| c.unwrap_or(DEFAULT_MEMORY_CAP))
        .max()
        .unwrap_or(DEFAULT_MEMORY_CAP)
        .max(1);
    let by_memory = memory.map_or(cores, |m| m / cap);
    u32::try_from(cores.min(by_memory).max(1)).unwrap_or(1)
}

/// The machine's memory (`MemTotal` of /proc/meminfo), where it can be read.
fn total_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::jobs_for;

    #[test]
    fn jobs_default_to_the_smaller_of_cores_and_memory_over_the_largest_cap() {
        const GIB: u64 = 1 << 30;
        assert_eq!(
            jobs_for(8, Some(16 * GIB), &[None, None]),
            4,
            "4 GiB default cap"
        );
        assert_eq!(
            jobs_for(2, Some(64 * GIB), &[Some(GIB)]),
            2,
            "cores bound it"
        );
        assert_eq!(jobs_for(8, Some(16 * GIB), &[Some(GIB), Some(8 * GIB)]), 2);
        assert_eq!(jobs_for(8, Some(GIB), &[None]), 1, "at least one");
        assert_eq!(jobs_for(3, None, &[None]), 3, "unknown memory: cores");
    }
}
