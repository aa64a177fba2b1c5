//! `io-harness runs prune --older-than 7d [--keep-failed] [--rows] [--include-resumable]`:
//! removes the scratch directories (workspace copies, baseline snapshots) of old runs,
//! and with `--rows` their rows in the store, then `VACUUM`.
//!
//! A run is judged as the tree it belongs to (a root run and its sub-agents go
//! together), by when the root finished (else started). A tree still driven by a live
//! process is never touched; a resumable one (interrupted, awaiting approval, out of
//! budget with a retryable cause, cancelled) only with `--include-resumable`, since
//! removing its directory ends any chance to resume it. Removal never follows a
//! symlink (see `io_harness::run::after`). Rows are deleted only for trees whose
//! directories were all removed, so the record never points at half a run.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use io_harness::RunOutcome;
use io_harness::run::after::remove_scratch;
use io_harness::store::RunRecord;

use super::{CliError, PruneArgs, output, store_path};

/// What happened to the trees considered.
#[derive(Default)]
struct Tally {
    pruned: Vec<i64>,
    dirs: usize,
    bytes: u64,
    rows: usize,
    running: usize,
    resumable: usize,
    failed: usize,
    errors: usize,
}

pub fn execute(args: PruneArgs) -> Result<i32, CliError> {
    let store = store_path::open_existing(&args.store)?;
    let all = store.runs()?;
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis();
    let cutoff = i64::try_from(now_ms.saturating_sub(args.older_than.as_millis())).unwrap_or(0);
    let mut t = Tally::default();
    let mut delete: Vec<i64> = Vec::new();
    for root in all.iter().filter(|r| r.parent_run_id.is_none()) {
        if root.finished_at_ms.unwrap_or(root.started_at_ms) > cutoff {
            continue;
        }
        let tree = members(&all, root);
        match verdict(&tree, &args) {
            Verdict::Keep(why) => {
                match why {
                    Keep::Running => t.running += 1,
                    Keep::Resumable => t.resumable += 1,
                    Keep::Failed => t.failed += 1,
                }
                continue;
            }
            Verdict::Prune => {}
        }
        let mut clean = true;
        for r in &tree {
            let Some(dir) = &r.scratch_dir else { continue };
            match remove_scratch(std::path::Path::new(dir)) {
                Ok(Some(freed)) => {
                    t.dirs += 1;
                    t.bytes += freed.bytes;
                }
                Ok(None) => {}
                Err(e) => {
                    clean = false;
                    t.errors += 1;
                    errln!("warning: run {}: {} left: {e}", r.id, output::sanitize(dir));
                }
            }
        }
        t.pruned.push(root.id);
        if args.rows && clean {
            delete.extend(tree.iter().map(|r| r.id));
        }
    }
    if !delete.is_empty() {
        t.rows = store.delete_runs(&delete)?;
        store.vacuum()?;
    }
    report(&t, &args);
    Ok(if t.errors > 0 { 1 } else { 0 })
}

/// `root` and every run below it.
fn members<'a>(all: &'a [RunRecord], root: &'a RunRecord) -> Vec<&'a RunRecord> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let id = out[i].id;
        out.extend(all.iter().filter(|r| r.parent_run_id == Some(id)));
        i += 1;
    }
    out
}

enum Keep {
    Running,
    Resumable,
    Failed,
}

enum Verdict {
    Prune,
    Keep(Keep),
}

fn verdict(tree: &[&RunRecord], args: &PruneArgs) -> Verdict {
    let root = tree[0];
    if tree.iter().any(|r| super::runs::status(r) == "running") {
        return Verdict::Keep(Keep::Running);
    }
    let outcome: Option<RunOutcome> = root
        .outcome_json
        .as_deref()
        .and_then(|j| serde_json::from_str(j).ok());
    let resumable =
        root.status != "finished" || outcome.as_ref().is_some_and(RunOutcome::is_resumable);
    if resumable && !args.include_resumable {
        return Verdict::Keep(Keep::Resumable);
    }
    if args.keep_failed && outcome.as_ref() != Some(&RunOutcome::Success) {
        return Verdict::Keep(Keep::Failed);
    }
    Verdict::Prune
}

fn report(t: &Tally, args: &PruneArgs) {
    let age = humantime::format_duration(args.older_than);
    if t.pruned.is_empty() {
        outln!("nothing to prune older than {age}");
    } else {
        let ids: Vec<String> = t.pruned.iter().map(i64::to_string).collect();
        outln!(
            "pruned {} run(s) older than {age} ({}): {} director(ies) removed, {} freed",
            t.pruned.len(),
            ids.join(", "),
            t.dirs,
            bytes(t.bytes)
        );
    }
    if t.rows > 0 {
        outln!("deleted {} run(s) from the store, then vacuumed it", t.rows);
    }
    if t.resumable > 0 {
        outln!(
            "kept {} resumable run(s) (--include-resumable removes them)",
            t.resumable
        );
    }
    if t.failed > 0 {
        outln!("kept {} failed run(s) (--keep-failed)", t.failed);
    }
    if t.running > 0 {
        outln!("kept {} running run(s)", t.running);
    }
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / f64::from(1 << 20)),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / f64::from(1 << 10)),
        n => format!("{n} bytes"),
    }
}
