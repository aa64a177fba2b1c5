//! `io-harness audit`: every sandbox session in the audit log, all generations, oldest
//! first.

use io_harness::audit::{AuditLog, SessionRecord, default_dir};
use io_harness::redact::Redactor;

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
    // A record written by an older version, or a command line an operator typed with a
    // key in it, still never prints the keys this process holds.
    let secrets = held_credentials();
    let records = log
        .read_all()
        .map_err(|e| CliError::Internal(format!("{}: {e}", dir.display())))?;
    if args.json {
        for r in &records {
            let v = serde_json::to_value(r).map_err(|e| CliError::Internal(e.to_string()))?;
            super::json_out::print("audit_session", v, &secrets);
        }
        return Ok(0);
    }
    if records.is_empty() {
        outln!("no sandbox sessions recorded in {}", dir.display());
        return Ok(0);
    }
    for r in &records {
        outln!("{}", output::redact(&text_line(r), &secrets));
    }
    Ok(0)
}

/// The provider keys in this process's environment, as a redactor.
pub fn held_credentials() -> Redactor {
    let values: Vec<String> = io_harness::provider::KEY_VARIABLES
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .collect();
    Redactor::default().with(&values)
}

/// One session as one line. Every string comes from the log file, and the argv and
/// the directory from whatever asked for the command: each is escaped, so no field can
/// end the line early and forge a session of its own, or rewrite the terminal.
fn text_line(r: &SessionRecord) -> String {
    let e = output::escape;
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
        .map_or(String::new(), |c| format!(" cap_hit={}", e(c)));
    format!(
        "{}{run}{step} [{} net={}] {} → {end}{cap} ({} ms) in {}",
        e(&r.time),
        e(&r.backend),
        e(&r.network),
        output::argv_line(&r.argv),
        r.duration_ms,
        e(&r.workspace)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 15.6: a newline in an argv printed a second, forged session line.
    #[test]
    fn no_field_of_a_record_can_forge_a_line_or_escape_the_terminal() {
        let mut r = SessionRecord::new(
            vec![
                "sh".into(),
                "-c".into(),
                "x\n2026-01-01T00:00:00Z [linux-namespaces net=none] true → exit 0".into(),
            ],
            "/ws\r\x1b[2K",
            "portable-floor\n",
        );
        r.time = "t\u{202e}".into();
        r.network = "none\x07".into();
        r.cap_hit = Some("wall\nforged".into());
        r.exit_code = Some(0);
        let line = text_line(&r);
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(
            !line.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{line:?}"
        );
        assert!(line.contains("\\n2026-01-01"), "{line}");
        assert!(line.contains("cap_hit=wall\\nforged"), "{line}");
    }
}
