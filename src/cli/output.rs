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

use io_harness::redact::Redactor;

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

/// The secrets of the store this command opened: every line printed is redacted of
/// them at the last moment, whatever path built it (adversary B7/B13 of issue 20: the
/// final message, the diff and a gate's line printed a secret the store had
/// redacted; a line sanitised of zero-width characters had reassembled it).
static SECRETS: std::sync::OnceLock<io_harness::redact::SecretSet> = std::sync::OnceLock::new();

/// Redacts every later line of output of the secrets `set` holds (and comes to hold:
/// a run registers its credentials as it opens).
pub fn hold_secrets(set: io_harness::redact::SecretSet) {
    let _ = SECRETS.set(set);
}

/// `args` as the text to write, redacted when secrets are held.
fn final_text(args: std::fmt::Arguments<'_>) -> String {
    let text = std::fmt::format(args);
    match SECRETS.get() {
        Some(set) => set.redactor().text(&text).into_owned(),
        None => text,
    }
}

/// Writes `args` to standard output.
pub fn out(args: std::fmt::Arguments<'_>) {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    let text = final_text(args);
    let mut o = std::io::stdout().lock();
    written(
        o.write_all(text.as_bytes()).and_then(|()| o.flush()),
        &STDOUT_GONE,
    );
}

/// Writes `args` to standard error.
pub fn err(args: std::fmt::Arguments<'_>) {
    if STDERR_GONE.load(Ordering::Relaxed) {
        return;
    }
    let text = final_text(args);
    let mut e = std::io::stderr().lock();
    written(e.write_all(text.as_bytes()), &STDERR_GONE);
}

/// Removes characters that could move the cursor, rewrite the line or hide text.
pub fn sanitize(text: &str) -> String {
    text.chars()
        .filter(|&c| c == '\n' || c == '\t' || !hostile(c))
        .collect()
}

/// Whether `c` could move the cursor, rewrite the line or hide text: a control
/// character, a bidi override or isolate, or a zero-width character.
fn hostile(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// `text` sanitized, each line after the first marked as a continuation (`    | `),
/// so a multi-line field (a gate's output, an event's detail) can never start a line
/// that reads like a record of its own.
pub fn continued(text: &str) -> String {
    sanitize(text).replace('\n', "\n    | ")
}

/// A one-line, unambiguous rendering of a recorded string: every character that
/// could break or disguise the line — a newline included, which would forge a record
/// of its own — is written as an escape (`\n`, `\t`, `\u{202e}`), and a backslash
/// as `\\`, so an escape in the text cannot pass for one of ours. For fields a
/// sandboxed command or a log file could have put anything into.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if hostile(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// An argv as one line: each argument [`escape`]d, and quoted when it is empty or
/// holds a space or a quote, so the words of the line are the arguments.
pub fn argv_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let e = escape(a);
            if a.is_empty() || a.contains([' ', '"', '\'']) {
                format!("\"{}\"", e.replace('"', "\\\""))
            } else {
                e
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Replaces each secret, in every disguise [`io_harness::redact`] finds (split by
/// invisible characters among them), with `[REDACTED]`. It runs before [`sanitize`]
/// drops those characters, and matches as though they were already gone.
pub fn redact(text: &str, secrets: &Redactor) -> String {
    secrets.text(text).into_owned()
}

/// Both: what every printed model-derived string goes through.
pub fn clean(text: &str, secrets: &Redactor) -> String {
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
    fn escape_keeps_everything_on_one_visible_line() {
        let evil = "a\nb\r\x1b[2J\u{202E}\u{200B}\u{85}\\n";
        let e = escape(evil);
        assert_eq!(e, "a\\nb\\r\\u{1b}[2J\\u{202e}\\u{200b}\\u{85}\\\\n");
        assert!(!e.chars().any(hostile), "{e:?}");
        assert_eq!(escape("plain /ok é"), "plain /ok é");
        let argv = vec![
            "sh".to_string(),
            "-c".into(),
            "echo hi\n2026 forged".into(),
            String::new(),
        ];
        assert_eq!(argv_line(&argv), "sh -c \"echo hi\\n2026 forged\" \"\"");
    }

    #[test]
    fn redacts_only_real_secrets() {
        let s = Redactor::default().with(&["sk-abcdefgh123".to_string(), "short".to_string()]);
        assert_eq!(
            redact("key sk-abcdefgh123 short", &s),
            "key [REDACTED] short"
        );
    }

    /// Sanitising drops a zero-width space; redaction before it must already have
    /// matched the key as though it were gone, or the key is printed whole.
    #[test]
    fn a_key_split_by_a_zero_width_space_is_not_printed_whole() {
        let key = "sk-ant-api03-abcdefghijklmnop";
        let s = Redactor::default().with(&[key.to_string()]);
        let printed = clean("key: sk-ant-\u{200B}api03-abcdefghij\u{2063}klmnop.", &s);
        assert_eq!(printed, "key: [REDACTED].");
        assert!(!printed.contains("abcdefghij"), "{printed}");
    }
}
