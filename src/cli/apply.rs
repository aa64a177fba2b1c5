//! `io-harness apply <run> [--branch NAME]`: a copy run's final diff taken back into
//! the original workspace, three-way (see `io_harness::run::after`): a file the
//! operator changed since the run started is merged where the changes do not touch,
//! and refused by name where they do — and then nothing at all is written. With
//! `--branch` the result is committed on a new branch of the workspace's repository
//! instead (`apply_git`), leaving the working tree and HEAD as they are.

use io_harness::run::after::{ApplyPlan, RunChanges, TakeError, read_workspace};
use io_harness_confine::Workspace;

use super::{ApplyArgs, CliError, output, store_path};

pub fn execute(args: ApplyArgs) -> Result<i32, CliError> {
    let store = store_path::open_existing(&args.store)?;
    let changes = RunChanges::load(&store, args.run_id).map_err(take_error)?;
    if !changes.has_baseline() {
        errln!(
            "note: run {}'s baseline snapshot is gone: each change must fit the current files exactly",
            changes.run_id
        );
    }
    match &args.branch {
        Some(name) => super::apply_git::commit(&changes, name),
        None => into_workspace(&changes),
    }
}

/// A library error as the command's: what the operator asked for cannot be done
/// (exit 2), or the record is not what the harness writes (exit 70).
pub fn take_error(e: TakeError) -> CliError {
    match e {
        TakeError::Store(s) => s.into(),
        TakeError::BadDiff { .. } => CliError::Internal(e.to_string()),
        e => CliError::Usage(e.to_string()),
    }
}

fn into_workspace(changes: &RunChanges) -> Result<i32, CliError> {
    let root = &changes.root;
    let ws = Workspace::open(root)
        .map_err(|e| CliError::Usage(format!("workspace {}: {e}", root.display())))?;
    let plan = changes
        .plan(&|p| read_workspace(&ws, p))
        .map_err(take_error)?;
    let target = format!(
        "workspace {}",
        output::sanitize(&root.display().to_string())
    );
    if refuse_conflicts(&plan, changes.run_id, &target) {
        return Ok(1);
    }
    plan.write_into(&ws)
        .map_err(|e| CliError::Internal(e.to_string()))?;
    print_done(&plan, changes.run_id, &target);
    Ok(0)
}

/// Prints the conflicts of `plan` (with what is not applied), and whether there were.
pub fn refuse_conflicts(plan: &ApplyPlan, run_id: i64, target: &str) -> bool {
    if plan.conflicts.is_empty() {
        return false;
    }
    let s = output::escape;
    errln!("refused: run {run_id}'s changes conflict with {target}; nothing was applied");
    for c in &plan.conflicts {
        errln!("  conflict: {} {}", s(&c.path), c.reason);
    }
    print_not_applied(plan);
    true
}

/// What an apply left as it was and why: listed, since the operator must do it by
/// hand or not at all.
pub fn print_not_applied(plan: &ApplyPlan) {
    for n in &plan.not_applied {
        errln!("  not applied: {} ({})", output::escape(&n.path), n.reason);
    }
}

/// The summary of a plan that was carried out.
pub fn print_done(plan: &ApplyPlan, run_id: i64, target: &str) {
    let s = output::escape;
    outln!(
        "applied run {run_id} to {target}: {} file(s) written, {} already as the run left them",
        plan.writes.len(),
        plan.unchanged.len()
    );
    for w in &plan.writes {
        let (mark, note) = match (&w.content, w.merged) {
            (None, _) => ("D", ""),
            (Some(_), true) => ("M", " (merged with changes made since the run started)"),
            (Some(_), false) if w.added => ("A", ""),
            (Some(_), false) => ("M", ""),
        };
        outln!("  {mark} {}{note}", s(&w.path));
    }
    if !plan.not_applied.is_empty() {
        errln!(
            "{} path(s) of the diff not applied:",
            plan.not_applied.len()
        );
        print_not_applied(plan);
    }
}
