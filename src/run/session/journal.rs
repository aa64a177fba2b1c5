//! The intent journal's side of resume: what the calls of an interrupted step already
//! did, so the replayed reply's calls are answered without doing anything twice.
//!
//! A call of the interrupted step is answered, in this order:
//! - **completed** (`done`/`failed` with its result kept): from the record, not run;
//! - **cut off, effects unknowable** (a command, an MCP call): not run again — the
//!   model is told it was interrupted, with the workspace as it now is;
//! - **cut off file write**: reconciled from the workspace: a target whose content
//!   changed since the intent means the write landed (not applied twice); none changed
//!   means it never did (writes are atomic renames), so it runs now;
//! - **never journaled** (not started, or a read): it runs.

use super::Session;
use crate::policy::Act;
use crate::store::ToolIntentRecord;
use crate::tools::{Dispatched, FileEffect, Workspace};

/// A planned action as journaled: for writes, the target's content hash before the
/// call and the temporary file the write will create, so an interrupted call can be
/// reconciled, and its debris removed, from the workspace alone.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct JournalAction {
    pub(super) act: Act,
    pub(super) target: String,
    #[serde(default)]
    pub(super) before: Option<String>,
    /// The workspace-relative temporary file a write of `target` creates (named
    /// before it exists; see `Workspace::temp_path_for`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) temp: Option<String>,
}

/// Content hash of a workspace file; `None` when it does not exist or cannot be read.
pub(super) fn file_hash(ws: &Workspace, rel: &str) -> Option<String> {
    // The fingerprint the write tool records as the effect's `before`: streamed, a
    // planted file of gigabytes is never read whole.
    let (file, meta) = ws.open_file(rel, crate::tools::Follow::Inside).ok()?;
    crate::tools::content_fingerprint(file, meta.len).ok()
}

fn actions(j: &ToolIntentRecord) -> Vec<JournalAction> {
    serde_json::from_str(&j.intent.actions_json).unwrap_or_default()
}

/// Removes the temporary files the interrupted step's writes journaled before creating
/// them: only those names, never files found by a pattern. Returns how many were there.
pub(super) fn remove_journaled_temps(ws: &Workspace, journal: &[ToolIntentRecord]) -> usize {
    journal
        .iter()
        .flat_map(actions)
        .filter_map(|a| a.temp)
        .filter(|t| ws.confined().remove_file(t).is_ok())
        .count()
}

/// What the model is told for a call the interruption cut off while it ran a command
/// or an MCP call: nobody can say what it did.
pub(super) fn interrupted_notice(tool: &str) -> String {
    format!(
        "{}the run was stopped (killed, cancelled or out of time) while this {tool} call \
         was running, and it was not run again. Whatever it did before the interruption is in the \
         workspace as it now is, but its result and effects are unknown: check the state you depend \
         on before relying on it, and run it again only if that is safe.",
        crate::halt::INTERRUPTED_PREFIX
    )
}

/// How a journaled call of the interrupted step is answered (see the module docs);
/// `None` runs it.
fn answer(ws: &Workspace, j: &ToolIntentRecord) -> Option<Dispatched> {
    let done = |content: String, is_error: bool, effects: Vec<FileEffect>| Dispatched {
        content,
        is_error,
        decisions: Vec::new(),
        confinement_refusal: None,
        effects,
        duration_ms: 0,
        asked: Vec::new(),
    };
    let effects_of = |j: &ToolIntentRecord| -> Vec<FileEffect> {
        j.effects_json
            .as_deref()
            .and_then(|e| serde_json::from_str(e).ok())
            .unwrap_or_default()
    };
    match j.status.as_str() {
        "done" | "failed" => match &j.output {
            Some(out) => Some(done(out.clone(), j.status == "failed", effects_of(j))),
            // A journal written before results were kept: the effects say whether the
            // write is still in place.
            None => {
                let effects = effects_of(j);
                let in_place = !effects.is_empty()
                    && effects.iter().all(|e| file_hash(ws, &e.path) == e.after);
                in_place.then(|| {
                    let paths: Vec<&str> = effects.iter().map(|e| e.path.as_str()).collect();
                    done(
                        format!(
                            "already applied before the run was interrupted (not applied twice): {}",
                            paths.join(", ")
                        ),
                        false,
                        effects,
                    )
                })
            }
        },
        "pending" | "uncertain" => {
            let planned = actions(j);
            if planned
                .iter()
                .any(|a| !matches!(a.act, Act::Read | Act::Write))
            {
                return Some(done(interrupted_notice(&j.intent.tool), true, Vec::new()));
            }
            let effects: Vec<FileEffect> = planned
                .into_iter()
                .filter(|a| a.act == Act::Write)
                .filter_map(|a| {
                    let now = file_hash(ws, &a.target);
                    (now != a.before).then_some(FileEffect {
                        path: a.target,
                        before: a.before,
                        after: now,
                    })
                })
                .collect();
            if effects.is_empty() {
                return None;
            }
            let paths: Vec<&str> = effects.iter().map(|e| e.path.as_str()).collect();
            Some(done(
                format!(
                    "this call was interrupted after it changed {}; the change is in place and was not \
                     applied again, but its result was not recorded: re-read the file before editing it",
                    paths.join(", ")
                ),
                false,
                effects,
            ))
        }
        _ => None,
    }
}

impl Session<'_> {
    /// On the first step after an interruption: the answer the journal gives for call
    /// `id` (by its id in the replayed reply, else by tool and arguments), used up once.
    pub(super) fn answered_by_journal(
        &mut self,
        id: &str,
        name: &str,
        input_json: &str,
    ) -> Option<Dispatched> {
        let journal = &mut self.carryover.journal;
        let pos = journal
            .iter()
            .position(|j| j.intent.call_id == id && j.intent.tool == name)
            .or_else(|| {
                journal
                    .iter()
                    .position(|j| j.intent.tool == name && j.intent.input_json == input_json)
            })?;
        let j = journal.remove(pos);
        answer(&self.tools.ctx.workspace, &j)
    }
}
