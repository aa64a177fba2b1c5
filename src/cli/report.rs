//! `io-harness report <run> [-o FILE]`: the run's self-contained HTML page.

use std::path::PathBuf;

use super::{CliError, ReportArgs, store_path};

pub fn execute(args: ReportArgs) -> Result<i32, CliError> {
    let store = store_path::open_existing(&args.store)?;
    // The store redacted what it knew when it wrote; the keys this process holds are
    // redacted again, in case one was registered only later.
    let keys: Vec<String> = io_harness::provider::KEY_VARIABLES
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .filter(|v| !v.is_empty())
        .collect();
    let redactor = io_harness::redact::Redactor::default().with(&keys);
    let page = io_harness::report::render(&store, args.run_id, &redactor).map_err(|e| match e {
        io_harness::report::ReportError::NoSuchRun(_) => CliError::Usage(e.to_string()),
        e => CliError::Internal(e.to_string()),
    })?;
    let out = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("run-{}.html", args.run_id)));
    std::fs::write(&out, page.as_bytes())
        .map_err(|e| CliError::Usage(format!("cannot write {}: {e}", out.display())))?;
    outln!("{}", out.display());
    Ok(0)
}
