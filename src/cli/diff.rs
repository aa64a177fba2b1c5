//! `io-harness diff <run>`: the final diff of a finished run, as stored. To a terminal
//! it is sanitised like every recorded text (the agent wrote it); to a file or a pipe
//! it is written byte for byte, so what is saved is exactly what the store holds.

use std::io::IsTerminal;

use super::{CliError, DiffArgs, output, store_path};

pub fn execute(args: DiffArgs) -> Result<i32, CliError> {
    let store = store_path::open_existing(&args.store)?;
    let run = store
        .run(args.run_id)?
        .ok_or_else(|| CliError::Usage(format!("no run with id {}", args.run_id)))?;
    let Some(diff) = run.diff.as_deref() else {
        return Err(CliError::Usage(format!(
            "run {} has no final diff yet ({}): it has not finished",
            run.id,
            super::runs::status(&run)
        )));
    };
    if diff.is_empty() {
        errln!("run {}: no changes", run.id);
        return Ok(0);
    }
    if std::io::stdout().is_terminal() {
        // `sanitize` keeps newlines and tabs; it drops what could rewrite the screen.
        output::out(format_args!("{}", output::sanitize(diff)));
    } else {
        output::out(format_args!("{diff}"));
    }
    Ok(0)
}
