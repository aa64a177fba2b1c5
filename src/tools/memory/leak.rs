//! Whether a memory note carries content of a file the policy denies reading.
//!
//! A note outlives the run and is shown to later runs' models, so it must not carry
//! what a mask hides. Comparing whole lines is not enough: the secret of `.env`'s
//! `DB_PASSWORD=s3cr3t-value` is the value, and a note holding it alone, inside a
//! sentence or as its key, carries it just the same. So the file is cut into tokens
//! (split on blanks, `=`, `:`, quotes and commas, plus the whole value after a
//! `KEY=`) and a note carrying any token of 8 characters or more is refused. Both
//! sides are compared without invisible characters and without case, so a secret
//! split by a zero-width space or written in upper case is still found.

use std::io::{BufRead, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// How much of a denied file the check compares (a note is at most 1000 bytes; a
/// planted file of gigabytes must not cost the harness its memory).
pub(super) const LEAK_SCAN_BYTES: u64 = 16 << 20;

/// The shortest token compared: shorter ones (`true`, `admin`, `8080`) are common
/// words a note may carry without carrying a secret.
const MIN_TOKEN_CHARS: usize = 8;

/// `text` as the check compares it: invisible characters removed, case folded.
pub(super) fn fold(text: &str) -> String {
    text.chars()
        .filter(|c| !crate::redact::invisible(*c))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether one of `notes` (already [`fold`]ed) carries a token of the file at `path`: read
/// as a stream, regular files only, opened without blocking (a FIFO under a denied
/// name cannot hang the call) and without following a final link, at most
/// [`LEAK_SCAN_BYTES`] of it.
pub(super) fn carries_content_of(path: &Path, notes: &[&str]) -> bool {
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
    else {
        return false;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut lines = std::io::BufReader::new(file.take(LEAK_SCAN_BYTES)).split(b'\n');
    lines.any(|line| {
        line.ok().is_some_and(|l| {
            line_tokens(&String::from_utf8_lossy(&l)).any(|t| notes.iter().any(|n| n.contains(&t)))
        })
    })
}

/// The tokens of one line of a denied file that a note must not carry, folded: the
/// line itself, the value after its first `=` or `:`, and each piece between
/// separators, of [`MIN_TOKEN_CHARS`] or more.
fn line_tokens(line: &str) -> impl Iterator<Item = String> + '_ {
    let value = line
        .split_once(['=', ':'])
        .map(|(_, v)| v.trim().trim_matches(['"', '\'']));
    let pieces = line.split(|c: char| c.is_whitespace() || "=:\"',`".contains(c));
    std::iter::once(line.trim())
        .chain(value)
        .chain(pieces)
        .map(fold)
        .filter(|t| t.chars().count() >= MIN_TOKEN_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(".env");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    /// Issue 16, MEM1: the value of a `.env` line, alone, embedded, disguised or as
    /// the key, is refused; words shorter than a token and other text are not.
    #[test]
    fn mem1_note_with_secret_value() {
        let (_d, env) =
            denied("DB_USER=admin\nDB_PASSWORD=CANARY_MEM1_pw_7d9f3a\nAPI = \"k3y with space\"\n");
        for note in [
            "DB_PASSWORD=CANARY_MEM1_pw_7d9f3a",
            "CANARY_MEM1_pw_7d9f3a",
            "the db password is CANARY_MEM1_pw_7d9f3a, remember",
            "canary_mem1_PW_7D9F3A",
            "CANARY_\u{200b}MEM1_pw_\u{034f}7d9f3a",
            "CANARY_MEM1_pw_\n7d9f3a",
            "k3y with space",
        ] {
            assert!(carries_content_of(&env, &[&fold(note)]), "{note:?}");
        }
        for note in [
            "the user is admin",
            "DB_USER is set in .env",
            "cargo test --all",
        ] {
            assert!(!carries_content_of(&env, &[&fold(note)]), "{note:?}");
        }
    }

    #[test]
    fn the_check_reads_a_bounded_prefix_of_regular_files_only() {
        let (d, env) = denied("");
        let big = std::fs::File::create(&env).unwrap();
        big.set_len(LEAK_SCAN_BYTES + 10).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&env)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"\nLATE_SECRET_value\n"))
            .unwrap();
        assert!(!carries_content_of(&env, &[&fold("LATE_SECRET_value")]));
        let fifo = d.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(!carries_content_of(&fifo, &[&fold("anything at all")]));
    }
}
