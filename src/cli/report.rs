//! `io-harness report <run> [-o FILE]`: the run's self-contained HTML page; `report
//! --batch ID [-o DIR]`: a batch's index page (`batch-<id>.html`) and each of its
//! runs' pages beside it (`run-<id>.html`), which the index links.

use std::path::{Path, PathBuf};

use io_harness::redact::Redactor;
use io_harness::report::ReportError;

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
    let redactor = Redactor::default().with(&keys);
    if let Some(batch) = args.batch {
        let dir = args.output.unwrap_or_else(|| PathBuf::from("."));
        return write_batch(&store, batch, &dir, &redactor);
    }
    let run_id = args
        .run_id
        .ok_or_else(|| CliError::Usage("report: name a run or --batch ID".into()))?;
    let page = io_harness::report::render(&store, run_id, &redactor).map_err(mapped)?;
    let out = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("run-{run_id}.html")));
    write(&out, &page)?;
    outln!("{}", out.display());
    Ok(0)
}

fn mapped(e: ReportError) -> CliError {
    match e {
        ReportError::NoSuchRun(_) | ReportError::NoSuchBatch(_) => CliError::Usage(e.to_string()),
        e => CliError::Internal(e.to_string()),
    }
}

fn write(out: &Path, page: &str) -> Result<(), CliError> {
    std::fs::write(out, page.as_bytes())
        .map_err(|e| CliError::Usage(format!("cannot write {}: {e}", out.display())))
}

/// The index and every linked run's page, in `dir` (made if missing).
fn write_batch(
    store: &io_harness::Store,
    batch: i64,
    dir: &Path,
    redactor: &Redactor,
) -> Result<i32, CliError> {
    let (index, runs) = io_harness::report::render_batch(store, batch, redactor).map_err(mapped)?;
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::Usage(format!("cannot make {}: {e}", dir.display())))?;
    for id in runs {
        let page = io_harness::report::render(store, id, redactor).map_err(mapped)?;
        write(&dir.join(format!("run-{id}.html")), &page)?;
    }
    let out = dir.join(format!("batch-{batch}.html"));
    write(&out, &index)?;
    outln!("{}", out.display());
    Ok(0)
}
