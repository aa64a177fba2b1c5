//! The resolved configuration a run started with, briefly: each value that was set
//! (by a flag, a variable, the task file or a config file) with its source, and the
//! built-in defaults as a count (`io-harness show --json` has them all).

use super::{CliError, output};

pub fn print(store: &io_harness::Store, run_id: i64) -> Result<(), CliError> {
    let settings = store.settings(run_id)?;
    if settings.is_empty() {
        return Ok(());
    }
    let (defaults, set): (Vec<_>, Vec<_>) = settings.iter().partition(|s| s.layer == "default");
    outln!(
        "settings: {} set, {} default{}",
        set.len(),
        defaults.len(),
        if defaults.is_empty() {
            ""
        } else {
            " (show --json lists them)"
        }
    );
    let c = output::sanitize;
    // The run's built-in choices (copy mode, 40 steps, 15 minutes without a task file)
    // are defaults an operator may not have meant, so they are named too.
    let named_defaults = [
        "workspace",
        "root",
        "budget.max_steps",
        "budget.max_duration",
    ];
    for s in set.iter().chain(
        defaults
            .iter()
            .filter(|s| named_defaults.contains(&s.key.as_str())),
    ) {
        outln!("  {} = {}  ({})", c(&s.key), c(&s.value), c(&s.source));
    }
    Ok(())
}
