//! The intent journal's side of resume: what an interrupted step already did.

use super::Session;
use crate::digest::sha256_hex;
use crate::tools::{FileEffect, Workspace};

/// A file write of an interrupted step that had already been applied.
pub(super) struct AppliedIntent {
    tool: String,
    input_json: String,
    /// The files it changed, `after` being their content hash now.
    effects: Vec<FileEffect>,
    /// The journal never recorded the call's completion: the files changed after the
    /// intent was written, so it is taken as applied, but its result is unknown.
    uncertain: bool,
}

/// A planned action as journaled: for writes, the target's content hash before the
/// call, so an interrupted call can be reconciled from the workspace alone.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct JournalAction {
    pub(super) act: crate::policy::Act,
    pub(super) target: String,
    #[serde(default)]
    pub(super) before: Option<String>,
}

/// Content hash of a workspace file; `None` when it does not exist or cannot be read.
pub(super) fn file_hash(ws: &Workspace, rel: &str) -> Option<String> {
    ws.read(rel).ok().map(|b| sha256_hex(&b))
}

/// Decides from the journal and the workspace whether a call of an interrupted step
/// already changed files. A completed call carries its effects; a call whose completion
/// was never journaled counts as applied exactly when a target it was about to write no
/// longer has the content it had before.
pub(super) fn reconcile(
    ws: &Workspace,
    j: crate::store::ToolIntentRecord,
) -> Option<AppliedIntent> {
    if j.status == "done" {
        let effects: Vec<FileEffect> = serde_json::from_str(j.effects_json.as_deref()?).ok()?;
        return Some(AppliedIntent {
            tool: j.intent.tool,
            input_json: j.intent.input_json,
            effects,
            uncertain: false,
        });
    }
    if j.status != "pending" {
        return None;
    }
    let actions: Vec<JournalAction> = serde_json::from_str(&j.intent.actions_json).ok()?;
    let effects: Vec<FileEffect> = actions
        .into_iter()
        .filter(|a| a.act == crate::policy::Act::Write)
        .filter_map(|a| {
            let now = file_hash(ws, &a.target);
            (now != a.before).then_some(FileEffect {
                path: a.target,
                before: a.before,
                after: now,
            })
        })
        .collect();
    (!effects.is_empty()).then_some(AppliedIntent {
        tool: j.intent.tool,
        input_json: j.intent.input_json,
        effects,
        uncertain: true,
    })
}

impl Session<'_> {
    /// On the first step after an interruption: a write the interrupted session already
    /// applied (every file still at its recorded after-hash) is not applied again.
    pub(super) fn already_applied(
        &mut self,
        name: &str,
        input_json: &str,
    ) -> Option<crate::tools::Dispatched> {
        let ws = &self.tools.ctx.workspace;
        let pos = self.carryover.applied.iter().position(|a| {
            a.tool == name
                && a.input_json == input_json
                && !a.effects.is_empty()
                && a.effects.iter().all(|e| file_hash(ws, &e.path) == e.after)
        })?;
        let a = self.carryover.applied.remove(pos);
        let paths: Vec<&str> = a.effects.iter().map(|e| e.path.as_str()).collect();
        let content = if a.uncertain {
            format!(
                "this call was interrupted after it changed {}; the change is in place and was not \
                 applied again, but its result was not recorded: re-read the file before editing it",
                paths.join(", ")
            )
        } else {
            format!(
                "already applied before the run was interrupted (not applied twice): {}",
                paths.join(", ")
            )
        };
        Some(crate::tools::Dispatched {
            content,
            is_error: false,
            decisions: Vec::new(),
            confinement_refusal: None,
            effects: a.effects,
            duration_ms: 0,
            asked: Vec::new(),
        })
    }
}
