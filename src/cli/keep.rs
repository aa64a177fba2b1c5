//! The workspace copy at the end of `run` and `resume`, and in `show`: a successful
//! run's copy is removed unless `--keep` (its diff is in the store, its baseline
//! snapshot stays for `apply`); a failed or resumable run's copy is kept, and both
//! commands say where it is.

use io_harness::run::after::{CopyState, copy_state, discard_copy};
use io_harness::store::RunRecord;
use io_harness::{RunOutcome, Store};

use super::output;

/// Removes the copy of a successful run unless `keep`; returns what to say of the
/// workspace after `workspace:` (`None`: the run worked in place).
pub fn settle(store: &Store, run_id: i64, outcome: &RunOutcome, keep: bool) -> Option<String> {
    let run = store.run(run_id).ok().flatten()?;
    let CopyState::Kept(path) = copy_state(&run) else {
        return None;
    };
    let shown = output::sanitize(&path.display().to_string());
    if *outcome != RunOutcome::Success {
        let why = if outcome.is_resumable() {
            "kept: the run can be resumed there"
        } else {
            "kept: the run did not succeed"
        };
        return Some(format!("{shown} ({why})"));
    }
    if keep {
        return Some(format!("{shown} (kept: --keep)"));
    }
    Some(match discard_copy(&run) {
        Ok(_) => format!(
            "copy removed after success (--keep keeps it); io-harness diff {run_id} prints the diff, io-harness apply {run_id} applies it"
        ),
        Err(e) => format!("{shown} (kept: it could not be removed: {e})"),
    })
}

/// `show`'s line about the copy; nothing for a run that worked in place.
pub fn show_line(run: &RunRecord) {
    let s = output::sanitize;
    match copy_state(run) {
        CopyState::InPlace => {}
        CopyState::Kept(p) => outln!("copy: {} (kept)", s(&p.display().to_string())),
        CopyState::Removed(p) => outln!(
            "copy: removed ({}); io-harness diff {} prints the diff",
            s(&p.display().to_string()),
            run.id
        ),
    }
}
