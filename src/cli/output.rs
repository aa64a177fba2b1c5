//! Text for a terminal: model output is untrusted, so control, bidi and zero-width
//! characters are removed before printing, and held secrets are redacted.
//!
//! Every line the command prints goes through [`out`] or [`err`] (the `outln!` and
//! `errln!` macros), never `println!`, which panics when the reader has gone
//! (`io-harness runs | head -1`). A closed pipe is no error of ours: a read-only
//! command exits 0 at once, as ripgrep does; a command driving a run
//! ([`set_driving`]) stops writing to that stream and goes on to its outcome, whose
//! exit code it keeps.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `run`, `resume` and `sandbox`: a closed pipe must not cut them short.
static DRIVING: AtomicBool = AtomicBool::new(false);
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);
static STDERR_GONE: AtomicBool = AtomicBool::new(false);

/// Marks this command as one that drives a run (or a sandboxed command) to an outcome.
pub fn set_driving() {
    DRIVING.store(true, Ordering::Relaxed);
}

/// What a failed write means: a closed pipe ends a read-only command quietly (exit 0)
/// and silences the stream of a driving one; any other error is dropped like the
/// line (there is nowhere left to report it).
fn written(result: std::io::Result<()>, gone: &AtomicBool) {
    if let Err(e) = result
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        gone.store(true, Ordering::Relaxed);
        if !DRIVING.load(Ordering::Relaxed) {
            std::process::exit(0);
        }
    }
}

/// Writes `args` to standard output.
pub fn out(args: std::fmt::Arguments<'_>) {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    written(o.write_fmt(args).and_then(|()| o.flush()), &STDOUT_GONE);
}

/// Writes `args` to standard error.
pub fn err(args: std::fmt::Arguments<'_>) {
    if STDERR_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut e = std::io::stderr().lock();
    written(e.write_fmt(args), &STDERR_GONE);
}

/// Removes characters that could move the cursor, rewrite the line or hide text.
pub fn sanitize(text: &str) -> String {
    text.chars()
        .filter(|&c| {
            if c == '\n' || c == '\t' {
                return true;
            }
            if c.is_control() {
                return false;
            }
            !matches!(c,
                '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
        })
        .collect()
}

/// Replaces each secret value with `[REDACTED]`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 8) {
        out = out.replace(s.as_str(), "[REDACTED]");
    }
    out
}

/// Both: what every printed model-derived string goes through.
pub fn clean(text: &str, secrets: &[String]) -> String {
    sanitize(&redact(text, secrets))
}

/// `12.3k`-style token counts.
pub fn tokens(n: u64) -> String {
    if n >= 10_000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        n.to_string()
    }
}

/// A cost, saying when it is unknown or a lower bound.
pub fn cost(usd: Option<f64>, unknown_steps: u32) -> String {
    match (usd, unknown_steps) {
        (None, 0) => "$0".into(),
        (None, _) => "unknown".into(),
        (Some(c), 0) => format!("${c:.4}"),
        (Some(c), n) => format!("≥${c:.4} ({n} calls of unknown cost)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_escapes_bidi_and_zero_width() {
        let evil = "ok\x1b[2J\u{202E}gnp.exe\u{200B}\r\nnext\ttab";
        assert_eq!(sanitize(evil), "ok[2Jgnp.exe\nnext\ttab");
    }

    #[test]
    fn redacts_only_real_secrets() {
        let s = vec!["sk-abcdefgh123".to_string(), "short".to_string()];
        assert_eq!(
            redact("key sk-abcdefgh123 short", &s),
            "key [REDACTED] short"
        );
    }
}
