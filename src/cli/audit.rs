//! `io-harness audit`: every sandbox session in the audit log, all generations, oldest
//! first.

use io_harness::audit::{AuditLog, default_dir};

use super::{AuditArgs, CliError, output};

pub fn execute(args: AuditArgs) -> Result<i32, CliError> {
    let dir = match args.dir.or_else(default_dir) {
        Some(d) => d,
        None => {
            return Err(CliError::Usage(
                "no audit directory: pass --dir or set XDG_CONFIG_HOME or HOME".into(),
            ));
        }
    };
    let log = AuditLog::new(&dir);
    let records = log
        .read_all()
        .map_err(|e| CliError::Internal(format!("{}: {e}", dir.display())))?;
    if args.json {
        for r in &records {
            outln!(
                "{}",
                serde_json::to_string(r).map_err(|e| CliError::Internal(e.to_string()))?
            );
        }
        return Ok(0);
    }
    if records.is_empty() {
        outln!("no sandbox sessions recorded in {}", dir.display());
        return Ok(0);
    }
    for r in &records {
        let run = r.run_id.map_or(String::new(), |id| format!(" run {id}"));
        let step = r.step.map_or(String::new(), |s| format!(" step {s}"));
        let end = match (r.exit_code, r.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => format!("signal {s}"),
            _ => "no exit".into(),
        };
        let cap = r
            .cap_hit
            .as_deref()
            .map_or(String::new(), |c| format!(" cap_hit={c}"));
        outln!(
            "{}{run}{step} [{} net={}] {} → {end}{cap} ({} ms) in {}",
            r.time,
            r.backend,
            r.network,
            output::sanitize(&r.argv.join(" ")),
            r.duration_ms,
            output::sanitize(&r.workspace)
        );
    }
    Ok(0)
}
