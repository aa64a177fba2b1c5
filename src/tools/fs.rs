//! The file tools: read, write, edit and list, and the plumbing they share with
//! `find` and `grep` (argument parsing, planning, running off the async threads).
//!
//! Every path goes through [`Workspace`]: lexically in `plan` (so the policy sees the
//! normalized path and a `..` is refused before any decision), and race-free again
//! when the call opens it.

mod edit;
mod list;
mod read;
mod write;

use std::borrow::Cow;
use std::io::{self, Read};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::de::DeserializeOwned;

use super::{EntryKind, ToolContext, ToolError, ToolLimits, ToolOutput, Workspace};
use crate::policy::{Act, Action};

pub use edit::EditFile;
pub use list::ListDir;
pub use read::ReadFile;
pub use write::WriteFile;

/// Parses a tool's arguments; the serde message tells the model what was wrong.
pub(super) fn parse<T: DeserializeOwned>(input: &serde_json::Value) -> Result<T, ToolError> {
    T::deserialize(input).map_err(|e| ToolError::BadInput(e.to_string()))
}

/// The one action of a single-path tool, on the normalized path.
pub(super) fn plan_path(ctx: &ToolContext, act: Act, path: &str) -> Result<Vec<Action>, ToolError> {
    let rel = ctx.workspace.normalize(path)?;
    Ok(match act {
        Act::Read => read_actions(&ctx.workspace, rel),
        // Writes never go through a symlink, so their target is the name.
        _ => vec![Action::new(act, rel)],
    })
}

/// What a read of `rel` (normalized) is judged by: the name, and — a read follows
/// symlinks that stay inside — the file it really reaches. Every read the harness
/// makes for the agent (a tool's, a sub-agent criterion's) is judged by these, so a
/// link named `envlink` cannot read `.env` past a rule that names `.env`.
pub(crate) fn read_actions(ws: &Workspace, rel: String) -> Vec<Action> {
    let real = ws.resolved_target(&rel);
    std::iter::once(Action::new(Act::Read, rel))
        .chain(real.map(|r| Action::new(Act::Read, r)))
        .collect()
}

/// The first of [`read_actions`] of `rel` that `gate` does not allow, decided: `None`
/// when the read may go ahead.
pub(crate) fn read_refusal(
    gate: &dyn crate::policy::PolicyGate,
    ws: &Workspace,
    rel: String,
) -> Option<crate::policy::PolicyDecision> {
    read_actions(ws, rel)
        .iter()
        .map(|a| gate.decide(a))
        .find(|d| d.decision != crate::policy::Decision::Allow)
}

/// Parses `input` and runs `f` on the blocking pool: file system work (a grep over a
/// large tree especially) must not stall the runtime's async threads.
pub(super) fn run_blocking<A, F>(
    ctx: &ToolContext,
    input: &serde_json::Value,
    f: F,
) -> BoxFuture<'static, Result<ToolOutput, ToolError>>
where
    A: DeserializeOwned + Send + 'static,
    F: FnOnce(&Workspace, ToolLimits, A) -> Result<ToolOutput, ToolError> + Send + 'static,
{
    let args = parse::<A>(input);
    let ws = Arc::clone(&ctx.workspace);
    let limits = ctx.limits;
    Box::pin(async move {
        let args = args?;
        tokio::task::spawn_blocking(move || f(&ws, limits, args))
            .await
            .unwrap_or_else(|e| {
                Err(ToolError::Io {
                    path: String::new(),
                    source: io::Error::other(format!("tool task failed: {e}")),
                })
            })
    })
}

/// A text-only result.
pub(super) fn text(content: String) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput {
        content,
        effects: Vec::new(),
    })
}

/// How an entry is shown in listings: directories end with `/`, symlinks with `@`.
pub(super) fn display_entry(path: &str, kind: EntryKind) -> String {
    match kind {
        EntryKind::Dir => format!("{path}/"),
        EntryKind::Symlink => format!("{path}@"),
        _ => path.to_string(),
    }
}

/// Cuts one line to `max` bytes (on a char boundary), saying how much was cut.
pub(super) fn cut_line(line: &str, max: usize) -> Cow<'_, str> {
    if line.len() <= max {
        return Cow::Borrowed(line);
    }
    let cut = line.floor_char_boundary(max);
    Cow::Owned(format!(
        "{}… [{} more bytes on this line]",
        &line[..cut],
        line.len() - cut
    ))
}

pub(super) use crate::digest::sha256_hex;

/// SHA-256 of everything `r` yields, streamed, as lowercase hex.
pub(super) fn sha256_reader(r: impl Read) -> io::Result<String> {
    crate::digest::sha256_stream(r).map(|d| crate::digest::hex(&d))
}

/// Files up to this size are hashed whole: every file a tool edits is.
const HASHED_WHOLE: u64 = 8 << 20;
/// How much of a larger file its fingerprint reads.
const FINGERPRINT_HEAD: u64 = 1 << 20;

/// What a write's journal and its effect record of the file it replaces: the SHA-256
/// of a file up to 8 MiB; of a larger one (only `write_file` replaces it whole, so
/// whether that landed shows in the size and the first MiB) `large:<size>:<hash of
/// the first MiB>`, streamed — a planted file of gigabytes is never read whole.
pub(crate) fn content_fingerprint(file: std::fs::File, len: u64) -> io::Result<String> {
    if len <= HASHED_WHOLE {
        return sha256_reader(file);
    }
    let head = crate::digest::sha256_stream(file.take(FINGERPRINT_HEAD))?;
    Ok(format!("large:{len}:{}", crate::digest::hex(&head)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_is_lowercase_hex_of_the_digest() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(sha256_reader(&b"abc"[..]).unwrap(), sha256_hex(b"abc"));
    }

    #[test]
    fn cut_line_keeps_char_boundaries_and_says_so() {
        assert_eq!(cut_line("short", 10), "short");
        let cut = cut_line("ééééé", 3);
        assert!(cut.starts_with("é…"), "{cut}");
        assert!(cut.contains("more bytes"), "{cut}");
    }
}
