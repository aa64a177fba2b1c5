//! The observation ledger: every tool result of the conversation as an observation
//! with a kind and a target, and which later observation supersedes it.
//!
//! The ledger is rebuilt from the full history on every assembly (it is a pure
//! function of the messages), so a resumed run sees exactly the ledger the interrupted
//! one saw, with nothing of its own to store.

use std::collections::BTreeMap;

use crate::provider::{ContentBlock, Message, Role};

/// What kind of action produced an observation, for supersession.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ObsKind {
    /// `read_file`: shows a file's content.
    Read,
    /// `write_file`: its input holds a file's whole new content.
    Write,
    /// `edit_file`: changes a file in place.
    Edit,
    /// `run_command`: a command's output.
    Command,
    /// `grep`, `find`, `list_dir`: a listing or search result.
    Search,
    /// Any other tool, or a failed call: never superseded.
    Other,
}

impl ObsKind {
    /// How a stub names the action (`read`, `write`, `edit`, `run`, `search`, `call`).
    pub fn noun(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Edit => "edit",
            Self::Command => "run",
            Self::Search => "search",
            Self::Other => "call",
        }
    }
}

/// One tool result of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// Message index of the `tool_result` block.
    pub msg: usize,
    /// Block index of the `tool_result` block in its message.
    pub block: usize,
    /// Where the matching `tool_use` block stands (message, block), when found.
    pub call_at: Option<(usize, usize)>,
    /// The step (1-based count of assistant turns) whose call produced it.
    pub turn: u32,
    /// The kind.
    pub kind: ObsKind,
    /// The tool name.
    pub tool: String,
    /// What it was about: a workspace path, a command line, a search's arguments.
    pub target: String,
    /// The call's arguments.
    pub input: serde_json::Value,
    /// Whether the call failed.
    pub is_error: bool,
    /// The first later observation that makes this one obsolete: (its kind, its turn).
    pub superseded_by: Option<(ObsKind, u32)>,
}

/// A workspace path as the tools read it, without `./` and doubled slashes, so two
/// spellings of one file supersede each other.
pub fn normalize_path(p: &str) -> String {
    p.split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect::<Vec<_>>()
        .join("/")
}

fn classify(tool: &str, input: &serde_json::Value) -> (ObsKind, String) {
    let path = || {
        input
            .get("path")
            .and_then(|p| p.as_str())
            .map(normalize_path)
            .unwrap_or_default()
    };
    match tool {
        "read_file" => (ObsKind::Read, path()),
        "write_file" => (ObsKind::Write, path()),
        "edit_file" => (ObsKind::Edit, path()),
        "run_command" => {
            let line = match input.get("argv").and_then(|a| a.as_array()) {
                Some(argv) => argv
                    .iter()
                    .map(|a| a.as_str().unwrap_or("?"))
                    .collect::<Vec<_>>()
                    .join(" "),
                None => input
                    .get("command")
                    .and_then(|c| c.as_str())
                    .unwrap_or("")
                    .to_string(),
            };
            (ObsKind::Command, line)
        }
        "grep" | "find" | "list_dir" => (ObsKind::Search, format!("{tool} {input}")),
        _ => (ObsKind::Other, tool.to_string()),
    }
}

/// Whether a later observation of `later` kind on the same target supersedes an
/// earlier one of `earlier` kind.
fn supersedes(earlier: ObsKind, later: ObsKind) -> bool {
    match earlier {
        // A later read shows the file again; a later write shows its whole content.
        // An edit does not show the file: it makes the read stale (re-read instead).
        ObsKind::Read => matches!(later, ObsKind::Read | ObsKind::Write),
        // A write's content is obsolete once the file is read, written or edited again.
        ObsKind::Write => matches!(later, ObsKind::Read | ObsKind::Write | ObsKind::Edit),
        ObsKind::Command => later == ObsKind::Command,
        ObsKind::Search => later == ObsKind::Search,
        ObsKind::Edit | ObsKind::Other => false,
    }
}

/// A tool call as seen in an assistant message: name, arguments, turn, position.
type Call<'a> = (&'a str, &'a serde_json::Value, u32, (usize, usize));

/// The observations of `messages`, in conversation order, with supersession marked.
pub fn observations(messages: &[Message]) -> Vec<Observation> {
    let mut calls: BTreeMap<&str, Call<'_>> = BTreeMap::new();
    let mut turn = 0u32;
    let mut out: Vec<Observation> = Vec::new();
    for (mi, m) in messages.iter().enumerate() {
        if m.role == Role::Assistant {
            turn += 1;
        }
        for (bi, b) in m.content.iter().enumerate() {
            match b {
                ContentBlock::ToolUse { id, name, input } => {
                    calls.insert(id, (name, input, turn, (mi, bi)));
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    is_error,
                    ..
                } => {
                    let (tool, input, t, at) = match calls.get(tool_use_id.as_str()) {
                        Some(&(n, i, t, at)) => (n.to_string(), i.clone(), t, Some(at)),
                        None => (String::new(), serde_json::Value::Null, turn, None),
                    };
                    let (mut kind, target) = classify(&tool, &input);
                    if *is_error {
                        kind = ObsKind::Other;
                    }
                    out.push(Observation {
                        msg: mi,
                        block: bi,
                        call_at: at,
                        turn: t,
                        kind,
                        tool,
                        target,
                        input,
                        is_error: *is_error,
                        superseded_by: None,
                    });
                }
                _ => {}
            }
        }
    }
    // The first later observation on the same target that supersedes each one.
    let mut marks = vec![None; out.len()];
    let mut by_target: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, o) in out.iter().enumerate() {
        if o.kind != ObsKind::Other {
            by_target.entry(target_key(o)).or_default().push(i);
        }
    }
    for idxs in by_target.values() {
        for (pos, &i) in idxs.iter().enumerate() {
            marks[i] = idxs[pos + 1..]
                .iter()
                .map(|&j| (out[j].kind, out[j].turn))
                .find(|(k, _)| supersedes(out[i].kind, *k));
        }
    }
    for (o, m) in out.iter_mut().zip(marks) {
        o.superseded_by = m;
    }
    out
}

/// Observations that can supersede each other share a key: file kinds by path,
/// commands by command line, searches by tool and arguments.
fn target_key(o: &Observation) -> String {
    match o.kind {
        ObsKind::Read | ObsKind::Write | ObsKind::Edit => format!("file:{}", o.target),
        ObsKind::Command => format!("cmd:{}", o.target),
        ObsKind::Search => format!("search:{}", o.target),
        ObsKind::Other => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::context::test_messages::{call, result};

    #[test]
    fn later_reads_and_writes_supersede_reads_and_edits_do_not() {
        let msgs = vec![
            Message::user("goal"),
            call("a", "read_file", json!({"path": "src/lib.rs"})),
            result("a", "one"),
            call(
                "b",
                "edit_file",
                json!({"path": "./src/lib.rs", "old": "o", "new": "n"}),
            ),
            result("b", "edited"),
            call("c", "read_file", json!({"path": "src//lib.rs"})),
            result("c", "two"),
            call("d", "run_command", json!({"argv": ["cargo", "test"]})),
            result("d", "ok"),
            call("e", "run_command", json!({"argv": ["cargo", "test"]})),
            result("e", "ok"),
        ];
        let obs = observations(&msgs);
        assert_eq!(obs.len(), 5);
        assert_eq!(obs[0].turn, 1);
        assert_eq!(obs[0].target, "src/lib.rs");
        assert_eq!(obs[0].superseded_by, Some((ObsKind::Read, 3)));
        assert_eq!(obs[1].superseded_by, None, "an edit is not superseded");
        assert_eq!(obs[2].superseded_by, None);
        assert_eq!(obs[3].superseded_by, Some((ObsKind::Command, 5)));
        assert_eq!(obs[3].call_at, Some((7, 0)));
        assert_eq!(obs[4].superseded_by, None);
    }
}
